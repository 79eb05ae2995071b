// Prompt tokens per turn against the model's window and the compaction trigger: the
// sawtooth of a window filling up and being compacted, under the line of the client's own
// prompt (what it sent; the gap to the proxy's count is what composing saved). Plain SVG.
import { el, fmtInt, svg } from "./dom.js";

const W = 1000;
const H = 260;
const PAD = { left: 58, right: 16, top: 14, bottom: 34 };

function polyline(points, cls) {
  // one polyline per run of turns that have a value
  const runs = [];
  let run = [];
  for (const p of points) {
    if (p === null) {
      if (run.length) runs.push(run);
      run = [];
    } else run.push(p);
  }
  if (run.length) runs.push(run);
  return runs.map((r) => svg("polyline", { class: cls, points: r.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ") }));
}

// turns: the journal's turns (seq order); limits: {context_window, trigger}; onTurn(seq) selects a turn.
export function renderChart(turns, windows, limits, onTurn) {
  const reported = turns.map((t) => (t.usage && t.usage.prompt_tokens) || null);
  // a shadow turn sent the client's own prompt: its line is what managed mode would have sent
  const counted = turns.map((t) => (t.shadow ? t.shadow.composed_tokens : t.context_tokens) || null);
  const client = turns.map((t) => (t.saved_tokens === null || t.saved_tokens === undefined ? null : t.client_tokens));
  const top = Math.max(limits.context_window || 0, ...reported.filter(Boolean), ...counted.filter(Boolean),
    ...client.filter(Boolean), 1) * 1.06;
  const n = Math.max(turns.length, 2);
  const x = (i) => PAD.left + ((W - PAD.left - PAD.right) * i) / (n - 1);
  const y = (v) => PAD.top + (H - PAD.top - PAD.bottom) * (1 - v / top);
  const plot = svg("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "chart", id: "chart", role: "img",
    "aria-label": "prompt tokens per turn against the context window and the trigger",
  });

  // one band per window, over the turns answered in it; a marker where a compaction landed
  let start = 0;
  turns.forEach((t, i) => {
    const last = i === turns.length - 1 || turns[i + 1].window !== t.window;
    if (!last) return;
    const x0 = start === 0 ? PAD.left : (x(start - 1) + x(start)) / 2;
    const x1 = i === turns.length - 1 ? W - PAD.right : (x(i) + x(i + 1)) / 2;
    const index = windows.findIndex((w) => w.id === t.window);
    plot.append(svg("rect", { class: `band band-${index % 2}`, x: x0, y: PAD.top, width: Math.max(0, x1 - x0), height: H - PAD.top - PAD.bottom }));
    if (start > 0) {
      plot.append(svg("line", { class: "compaction", x1: x0, x2: x0, y1: PAD.top, y2: H - PAD.bottom },
        svg("title", { text: `compaction → ${t.window}` })));
      plot.append(svg("text", { class: "compaction-label", x: x0 + 4, y: H - PAD.bottom - 6, text: `→ ${t.window}` }));
    }
    start = i + 1;
  });

  for (let k = 0; k <= 4; k += 1) {
    const v = Math.round((top / 1.06) * (k / 4));
    plot.append(svg("line", { class: "grid", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
      svg("text", { class: "tick", x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", text: fmtInt(v) }));
  }
  const step = Math.max(1, Math.ceil(turns.length / 20));
  turns.forEach((t, i) => {
    if (i % step === 0 || i === turns.length - 1) {
      plot.append(svg("text", { class: "tick", x: x(i), y: H - PAD.bottom + 16, "text-anchor": "middle", text: `#${t.seq}` }));
    }
  });
  plot.append(svg("text", { class: "axis", x: W / 2, y: H - 4, "text-anchor": "middle", text: "turn" }));

  for (const [value, cls, label] of [[limits.context_window, "limit", "context window"], [limits.trigger, "trigger", "trigger"]]) {
    if (!value) continue;
    plot.append(svg("line", { class: cls, x1: PAD.left, x2: W - PAD.right, y1: y(value), y2: y(value) }),
      svg("text", { class: `${cls}-label`, x: PAD.left + 6, y: y(value) - 5, text: `${label} ${fmtInt(value)}` }));
  }
  plot.append(...polyline(client.map((v, i) => (v === null ? null : [x(i), y(v)])), "series client"));
  plot.append(...polyline(counted.map((v, i) => (v === null ? null : [x(i), y(v)])), "series counted"));
  plot.append(...polyline(reported.map((v, i) => (v === null ? null : [x(i), y(v)])), "series reported"));
  turns.forEach((t, i) => {
    const v = reported[i] ?? counted[i];
    if (v === null) return;
    const dot = svg("circle", { class: `dot status-${t.status}`, cx: x(i), cy: y(v), r: 3.5, "data-seq": t.seq },
      svg("title", { text: `turn #${t.seq} · ${t.status} · ${t.window}${t.shadow ? " · shadow" : ""}\nreported ${fmtInt(reported[i])} · proxy ${t.shadow ? "would send " : ""}${fmtInt(counted[i])}`
        + (client[i] === null ? "" : ` · client ${fmtInt(client[i])} · saved ${fmtInt(t.saved_tokens)}`) }));
    dot.addEventListener("click", () => onTurn(t.seq));
    plot.append(dot);
  });

  const legend = el("div", { class: "legend" },
    el("span", { class: "key-reported" }, "reported prompt tokens (usage)"),
    el("span", { class: "key-counted" }, "the proxy's count (X-Context-Tokens; a shadow turn's: what it would send)"),
    el("span", { class: "key-client" }, "the client's prompt as sent (saved: the gap to the proxy's count)"),
    el("span", { class: "key-limit" }, "context window"),
    el("span", { class: "key-trigger" }, "compaction trigger"),
    el("span", { class: "key-compaction" }, "compaction landed"),
  );
  return el("figure", { class: "chart-box", id: "chart-box" }, plot, legend);
}

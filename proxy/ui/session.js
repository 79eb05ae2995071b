// A session: its chart, its windows as bands over the timeline of turns, and beside the
// timeline what the model saw for the selected turn.
import { sessionPath } from "./api.js";
import { renderChart } from "./chart.js";
import { el, fmtInt, fmtTime, sessionHref } from "./dom.js";
import { MessageRenderer, pairTools } from "./messages.js";
import { SawPanel } from "./saw.js";

function lineage(journal) {
  // window id -> its compaction event (what it evicted, from which window, its summary)
  const events = new Map();
  for (const e of journal.events) if (e.type === "compaction" || e.type === "clear") events.set(e.window, e);
  return events;
}

export async function renderSession(root, api, session) {
  const journal = await api(sessionPath(session));
  const next = await api(sessionPath(session, "/turns/next/context"));
  const tools = pairTools(journal.turns);
  const renderer = new MessageRenderer(api, session, tools);
  const events = lineage(journal);
  const evictedBy = new Map();
  for (const [id, e] of events) for (const seq of e.evicted_turns || []) evictedBy.set(seq, id);
  const active = new Set((journal.branches.find((b) => b.active) || { turns: [] }).turns);
  const cards = new Map();
  const select = (seq) => { location.hash = sessionHref(session, seq); };
  const saw = new SawPanel(api, session, renderer, (seq) => {
    const card = cards.get(seq);
    if (card) card.scrollIntoView({ block: "center" });
  });

  const failures = journal.events.filter((e) => e.type === "compaction_failed");
  const failedBy = new Map(failures.map((e) => [e.request_id, e]));
  root.append(
    el("nav", { class: "crumbs" }, el("a", { href: "#/" }, "← Sessions")),
    el("div", { class: "title-row" },
      el("h1", { class: "mono", id: "session-title" }, journal.id),
      el("div", { class: "chips" },
        el("span", { class: "chip" }, `${journal.turns.length} turns`),
        el("span", { class: "chip" }, `${journal.branches.length} branch${journal.branches.length === 1 ? "" : "es"}`),
        el("span", { class: "chip window" }, `window ${journal.window.current}`),
        el("span", { class: "chip" }, `${fmtInt(journal.totals.prompt_tokens)} prompt + ${fmtInt(journal.totals.completion_tokens)} completion tokens`),
        savedChip(journal.totals, journal.turns.some((t) => t.shadow)),
        failures.length ? el("span", { class: "chip status-failed" }, `${failures.length} failed compaction${failures.length > 1 ? "s" : ""}`) : null,
        el("span", { class: "muted" }, `created ${fmtTime(journal.created)} · last used ${fmtTime(journal.updated)}`))),
    el("section", { class: "panel", id: "chart-panel" }, el("h2", { text: "Prompt tokens per turn" }), renderChart(journal.turns, journal.windows, next, select)),
    renderWindows(journal, events, renderer),
  );

  const timeline = el("div", { class: "timeline", id: "timeline" });
  // a completed turn whose parent already had a completed child starts a branch
  const forks = new Map();
  const firstChild = new Map();
  for (const turn of journal.turns.filter((t) => t.status === "completed")) {
    if (firstChild.has(turn.parent)) forks.set(turn.seq, firstChild.get(turn.parent));
    else firstChild.set(turn.parent, turn.seq);
  }
  let band = null;
  for (const turn of journal.turns) {
    if (!band || band.dataset.window !== turn.window) {
      band = el("section", { class: `band band-${journal.windows.findIndex((w) => w.id === turn.window) % 2}`, "data-window": turn.window, id: `band-${turn.window}` },
        el("h3", { class: "band-title" }, `answered in ${turn.window || "?"}`));
      timeline.append(band);
    }
    const card = renderTurn(turn, { renderer, evictedBy, failedBy, forks, active, select });
    cards.set(turn.seq, card);
    band.append(card);
  }
  const branches = el("div", { class: "branches" }, "Branches: ",
    journal.branches.map((b) => el("span", { class: `chip${b.active ? " active" : ""}`, title: `turns ${b.turns.join(", ")}` },
      `→ #${b.head}${b.active ? " (active)" : ""}, ${b.turns.length} turns`)));
  const hint = el("p", { class: "muted hint" }, "Outlined: turns the selected request carried verbatim. ",
    "Faded: turns it did not carry (summarized, evicted, on another branch, or not completed).");
  root.append(el("div", { class: "split" },
    el("section", { class: "journal" }, el("h2", { text: "Journal" }), branches, renderFind(journal, cards, evictedBy, timeline), hint, timeline),
    saw.root));

  return {
    async select(turn) {
      const context = await saw.show(turn);
      const used = new Set(context.sources.map((s) => s.turn));
      timeline.classList.add("has-selection");
      for (const [seq, card] of cards) {
        card.classList.toggle("selected", String(seq) === String(turn));
        card.classList.toggle("in-context", used.has(seq));
      }
    },
  };
}

function renderWindows(journal, events, renderer) {
  const counts = new Map();
  for (const t of journal.turns) counts.set(t.window, (counts.get(t.window) || 0) + 1);
  const strip = el("div", { class: "strip", id: "windows-strip" });
  const details = el("div", { class: "windows", id: "windows" });
  journal.windows.forEach((w, i) => {
    const segment = el("a", { class: `segment band-${i % 2}`, href: "#", onclick: (e) => {
      e.preventDefault();
      const band = document.getElementById(`band-${w.id}`);
      if (band) band.scrollIntoView({ block: "start" });
    } }, `${w.id} · ${counts.get(w.id) || 0} turns`);
    segment.style.flexGrow = String(Math.max(1, counts.get(w.id) || 0));
    strip.append(segment);
    const event = events.get(w.id);
    const card = el("article", { class: `window-card band-${i % 2}`, "data-window": w.id }, el("h3", {}, w.id));
    if (!event) {
      card.append(el("p", { class: "muted" }, "the first window: nothing evicted yet"));
    } else {
      const evicted = event.evicted_turns || [];
      card.append(
        el("p", {}, `${event.strategy} from ${event.from_window} at ${fmtTime(event.created)}; evicted ${evicted.length} turns: `,
          el("span", { class: "mono" }, evicted.map((s) => `#${s}`).join(" "))),
        el("p", {}, "archive: ", renderer.inline(event.archive || "")),
      );
      if (event.summary) {
        card.append(el("details", { class: "summary-box" }, el("summary", {}, "summary"), renderer.summary(event.summary)));
      }
    }
    details.append(card);
  });
  return el("section", { class: "panel" }, el("h2", { text: "Windows" }),
    el("p", { class: "muted" }, `lineage: ${journal.windows.map((w) => w.id).join(" → ")}`), strip, details);
}

const DOORS = { responses: "Responses API", messages: "Messages API" };

// What composing saved over the session's counted turns (docs/savings.md); none before any was counted.
function savedChip(totals, shadow) {
  if (!totals.client_tokens) return null;
  const saved = totals.saved_tokens;
  const money = totals.cost_usd || totals.saved_cost_usd ? ` ($${totals.saved_cost_usd.toFixed(4)} of $${(totals.cost_usd + totals.saved_cost_usd).toFixed(4)})` : "";
  const text = saved >= 0
    ? `${shadow ? "shadow: would have saved" : "saved"} ${fmtInt(saved)} of ${fmtInt(totals.client_tokens)} client tokens${money}`
    : `${shadow ? "shadow: would supply" : "history supplied:"} ${fmtInt(-saved)} tokens`;
  return el("span", { class: "chip saved", id: "saved-total", title: "the client's prompts less what the proxy sent, over the counted turns" }, text);
}

function doorLabel(turn) {
  const door = DOORS[turn.door];
  return door ? `${door}${turn.door_id ? ` ${turn.door_id}` : ""} · ` : "";
}

function renderTurn(turn, { renderer, evictedBy, failedBy, forks, active, select }) {
  const usage = turn.usage || {};
  const took = turn.finished && turn.created ? `${(turn.finished - turn.created).toFixed(2)} s` : "";
  const head = el("div", { class: "turn-head" },
    el("span", { class: "seq" }, `#${turn.seq}`),
    el("span", { class: `chip status status-${turn.status}` }, turn.status),
    el("span", { class: "muted" }, `${turn.imported ? "imported" : turn.model} · ${doorLabel(turn)}${fmtTime(turn.created)}${took ? ` · ${took}` : ""}`),
    el("span", { class: "usage", title: "prompt tokens reported by the upstream / counted by the proxy; completion tokens" },
      `prompt ${fmtInt(usage.prompt_tokens)} (proxy ${fmtInt(turn.context_tokens)}) · completion ${fmtInt(usage.completion_tokens)}`),
    el("button", { type: "button", class: "button small saw-button", onclick: () => select(turn.seq) }, "what the model saw →"));
  const notes = [];
  const sibling = forks.get(turn.seq);
  if (sibling !== undefined) {
    notes.push(el("span", { class: "chip branch", title: `a new branch: #${sibling} continued the same turn before` },
      turn.parent < 0 ? "↳ a new root" : `↳ branches from #${turn.parent}`));
  }
  if (!active.has(turn.seq)) notes.push(el("span", { class: "chip muted-chip" }, turn.status === "completed" ? "not on the active branch" : "not in any later context"));
  if (evictedBy.has(turn.seq)) notes.push(el("span", { class: "chip evicted" }, `evicted by ${evictedBy.get(turn.seq)} (archived)`));
  const failed = failedBy.get(turn.request_id);
  if (failed) notes.push(el("span", { class: "chip status-failed" }, `compaction failed (${failed.strategy}): ${failed.reason}`));
  if (turn.error) notes.push(el("span", { class: "chip status-failed" }, `error: ${turn.error.message || JSON.stringify(turn.error)}`));
  const card = el("article", { class: `turn status-${turn.status}`, id: `turn-${turn.seq}`, "data-seq": turn.seq },
    head, notes.length ? el("div", { class: "notes" }, notes) : null);
  // a turn that brought its own system/developer block (the latest one leads later contexts)
  for (const message of turn.system || []) card.append(renderer.message(message, { kind: "leading" }));
  for (const message of turn.input || []) card.append(renderer.message(message));
  if (turn.output) card.append(renderer.message(turn.output));
  for (const entry of turn.feedback || []) card.append(renderFeedback(entry, renderer));
  return card;
}

// "Why did the bot forget that?": find the turns that mention a text, whether they were
// evicted, and which windows' summaries still carry it.
function renderFind(journal, cards, evictedBy, timeline) {
  const input = el("input", { id: "find", type: "search", placeholder: "Find a text in the journal and the summaries", "aria-label": "Find in the journal" });
  const result = el("p", { class: "muted", id: "find-result" });
  input.addEventListener("input", () => {
    const needle = input.value.trim().toLowerCase();
    timeline.classList.toggle("finding", needle !== "");
    if (!needle) {
      result.textContent = "";
      for (const card of cards.values()) card.classList.remove("match");
      return;
    }
    const hits = [];
    for (const [seq, card] of cards) {
      const hit = card.textContent.toLowerCase().includes(needle);
      card.classList.toggle("match", hit);
      if (hit) hits.push(seq);
    }
    const evicted = hits.filter((seq) => evictedBy.has(seq));
    const summaries = journal.windows.filter((w) => w.summary && w.summary.toLowerCase().includes(needle)).map((w) => w.id);
    result.textContent = `${hits.length} turn${hits.length === 1 ? "" : "s"} mention it` +
      (hits.length ? ` (${hits.map((s) => `#${s}`).join(" ")})` : "") +
      `; ${evicted.length} of them evicted; summaries that carry it: ${summaries.length ? summaries.join(", ") : "none"}.`;
    if (hits.length) cards.get(hits[0]).scrollIntoView({ block: "center" });
  });
  return el("div", { class: "find" }, input, result);
}

function renderFeedback(entry, renderer) {
  const rating = entry.rating === 1 ? "rated +1" : entry.rating === -1 ? "rated −1" : null;
  return el("div", { class: "feedback" },
    el("span", { class: "chip feedback-chip" }, "feedback"),
    rating ? el("span", { class: `chip ${entry.rating === 1 ? "active" : "evicted"}` }, rating) : null,
    entry.comment ? el("span", { class: "muted" }, ` “${entry.comment}”`) : null,
    entry.preferred ? el("div", { class: "content preferred" }, "preferred reply: ", renderer.inline(entry.preferred)) : null);
}

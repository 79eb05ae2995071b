// "What the model saw": the messages a turn sent upstream, rebuilt from the journal,
// each marked with where it came from; or the context the next request would send.
import { sessionPath } from "./api.js";
import { clear, el, fmtInt } from "./dom.js";

const KINDS = ["leading", "summary", "pinned", "history", "input", "filled"];
const KIND_HELP = {
  leading: "the session's leading system/developer block, always kept",
  summary: "the window's summary, standing in for the evicted turns",
  pinned: "a turn holding a pinned message, lifted out of an evicted span",
  history: "a recent turn, verbatim",
  input: "this turn's new input",
  filled: "added so the request is valid (a placeholder tool result or user turn)",
};

export class SawPanel {
  constructor(api, session, renderer, onTurn) {
    this.api = api;
    this.session = session;
    this.renderer = renderer;
    this.onTurn = onTurn;
    this.root = el("aside", { class: "saw", id: "saw" });
  }

  async show(turn) {
    const seq = turn === undefined ? "next" : turn;
    const context = await this.api(sessionPath(this.session, `/turns/${encodeURIComponent(seq)}/context`));
    clear(this.root);
    const title = seq === "next" ? "The next request's context" : `What the model saw · turn #${seq}`;
    const totals = {};
    for (const source of context.sources) totals[source.kind] = (totals[source.kind] || 0) + source.tokens;
    const bar = el("div", { class: "composition", title: "tokens by origin" });
    for (const kind of KINDS) {
      if (!totals[kind]) continue;
      const part = el("span", { class: `part kind-${kind}`, title: `${kind}: ${totals[kind]} tokens` });
      part.style.flexGrow = String(totals[kind]);
      bar.append(part);
    }
    const figures = [
      ["window", context.window + (context.summarized ? " (summarized)" : "")],
      ["messages", fmtInt(context.messages.length)],
      ["tokens, counted now", fmtInt(context.tokens)],
    ];
    if (seq !== "next") {
      figures.push(["proxy's count when sent", fmtInt(context.context_tokens)], ["reported by the upstream", fmtInt(context.prompt_tokens)]);
    }
    figures.push(["model window / trigger", `${fmtInt(context.context_window)} / ${fmtInt(context.trigger)}`]);
    this.root.append(
      el("div", { class: "saw-head" },
        el("h2", { id: "saw-title" }, title),
        el("nav", { class: "tabs" },
          seq === "next" ? null : el("a", { href: `#/sessions/${encodeURIComponent(this.session)}/turns/next`, class: "button", id: "show-next" }, "Next request"))),
      el("dl", { class: "figures" }, figures.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })])),
      bar,
      el("ul", { class: "kinds" }, KINDS.filter((k) => totals[k]).map((k) =>
        el("li", { title: KIND_HELP[k] }, el("span", { class: `chip kind-${k}` }, k), ` ${fmtInt(totals[k])} tok`))),
    );
    const list = el("div", { class: "messages", id: "saw-messages" });
    context.messages.forEach((message, i) => {
      const source = context.sources[i];
      list.append(this.renderer.message(message, { ...source, onTurn: this.onTurn }));
    });
    if (context.caveats && context.caveats.length) {
      this.root.append(el("div", { class: "notice caveats", id: "caveats" },
        el("strong", {}, "Rebuilt with the default composition; the proxy is configured with options the journal does not replay:"),
        el("ul", {}, context.caveats.map((c) => el("li", {}, c)))));
    }
    this.root.append(list);
    return context;
  }
}

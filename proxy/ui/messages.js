// One chat message as text: role, content, tool calls paired with their results, the
// pinned marker, and `context://archive/...` citations as links to the archived span.
import { sessionPath } from "./api.js";
import { clear, el } from "./dom.js";

const ARCHIVE = /context:\/\/archive\/([A-Za-z0-9_.:-]+[A-Za-z0-9_])/g;

export class MessageRenderer {
  // api: the session API; session: its id; tools: call id -> {call, result, callTurn, resultTurn}
  constructor(api, session, tools) {
    this.api = api;
    this.session = session;
    this.tools = tools;
  }

  // Text with every archive citation made a link; everything else stays text.
  inline(text) {
    const out = [];
    let last = 0;
    for (const match of text.matchAll(ARCHIVE)) {
      out.push(text.slice(last, match.index));
      const id = match[1];
      out.push(el("a", { href: "#", class: "archive-link", "data-archive": id, onclick: (e) => {
        e.preventDefault();
        this.openArchive(id);
      } }, match[0]));
      last = match.index + match[0].length;
    }
    out.push(text.slice(last));
    return out;
  }

  // A summary: markdown headings and list items become elements, the rest paragraphs.
  summary(text) {
    const box = el("div", { class: "rendered-summary" });
    let list = null;
    for (const line of text.split("\n")) {
      const heading = /^#{1,6}\s+(.*)$/.exec(line);
      const item = /^\s*[-*]\s+(.*)$/.exec(line);
      if (item) {
        if (!list) box.append((list = el("ul")));
        list.append(el("li", {}, this.inline(item[1])));
        continue;
      }
      list = null;
      if (heading) box.append(el("h4", {}, this.inline(heading[1])));
      else if (line.trim()) box.append(el("p", {}, this.inline(line)));
    }
    return box;
  }

  content(message, asSummary) {
    const content = message.content;
    if (content === null || content === undefined || content === "") return null;
    if (Array.isArray(content)) {
      return el("div", { class: "content" }, content.map((part) =>
        part && part.type === "text" ? el("p", {}, this.inline(String(part.text))) : el("p", { class: "muted" }, `[${part && part.type}]`)));
    }
    const text = typeof content === "string" ? content : JSON.stringify(content);
    return asSummary ? this.summary(text) : el("div", { class: "content" }, this.inline(text));
  }

  // A message; `kind` is where a sent message came from (summary, pinned, ...), if known.
  message(message, { kind, turn, pinned, tokens, onTurn } = {}) {
    const role = String(message.role || "?");
    const marked = pinned || message.pinned === true;
    const head = el(
      "div",
      { class: "msg-head" },
      el("span", { class: `role role-${role.replace(/[^a-z]/g, "")}` }, role),
      kind ? el("span", { class: `chip kind-${kind}` }, kind) : null,
      marked ? el("span", { class: "chip pin", title: "the client marked this message pinned: true" }, "pinned: true") : null,
      turn !== null && turn !== undefined && onTurn
        ? el("a", { href: "#", class: "from", onclick: (e) => { e.preventDefault(); onTurn(turn); } }, `from #${turn}`)
        : null,
      tokens !== undefined ? el("span", { class: "tokens" }, `${tokens} tok`) : null,
    );
    const box = el("div", { class: `msg msg-${role.replace(/[^a-z]/g, "")}${kind ? ` src-${kind}` : ""}${marked ? " pinned" : ""}` }, head);
    const body = this.content(message, kind === "summary");
    if (body) box.append(body);
    for (const call of message.tool_calls || []) box.append(this.toolCall(call));
    if (role === "tool") box.append(this.toolResultOf(message));
    return box;
  }

  toolCall(call) {
    const fn = call.function || {};
    const pair = this.tools.get(call.id);
    const result = pair && pair.result;
    return el(
      "div",
      { class: "tool-pair" },
      el("div", { class: "tool-call" }, el("span", { class: "chip tool" }, "tool call"),
        el("code", {}, `${fn.name}(${fn.arguments || ""})`), el("span", { class: "muted" }, ` ${call.id}`)),
      result
        ? el("div", { class: "tool-result" }, el("span", { class: "chip tool" }, `result · turn #${pair.resultTurn}`),
          el("div", { class: "content" }, this.inline(String(result.content ?? ""))))
        : el("div", { class: "tool-result missing" }, "no result recorded"),
    );
  }

  toolResultOf(message) {
    const pair = this.tools.get(message.tool_call_id);
    const name = pair && pair.call ? (pair.call.function || {}).name : "?";
    return el("div", { class: "muted answers" },
      `↳ answers ${name} (${message.tool_call_id})${pair && pair.callTurn !== undefined ? ` from turn #${pair.callTurn}` : ""}`);
  }

  async openArchive(id) {
    const dialog = document.getElementById("archive");
    const body = clear(document.getElementById("archive-body"));
    document.getElementById("archive-title").textContent = `Archived span ${id}`;
    document.getElementById("archive-close").onclick = () => dialog.close();
    if (!dialog.open) dialog.showModal();
    try {
      const span = await this.api(sessionPath(this.session, `/archive/${encodeURIComponent(id)}`));
      body.append(el("p", { class: "muted" }, `${span.uri}: ${span.messages.length} messages that left the window, verbatim.`));
      for (const message of span.messages) body.append(this.message(message));
    } catch (exc) {
      body.append(el("p", { class: "error" }, String(exc.message || exc)));
    }
  }
}

// call id -> {call, callTurn, result, resultTurn}, over every turn of the journal.
export function pairTools(turns) {
  const tools = new Map();
  const entry = (id) => tools.get(id) || tools.set(id, {}).get(id);
  for (const turn of turns) {
    for (const message of [...(turn.input || []), turn.output].filter(Boolean)) {
      for (const call of message.tool_calls || []) Object.assign(entry(call.id), { call, callTurn: turn.seq });
      if (message.role === "tool") Object.assign(entry(message.tool_call_id), { result: message, resultTurn: turn.seq });
    }
  }
  return tools;
}

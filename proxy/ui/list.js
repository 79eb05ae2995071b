// The sessions list: the key's sessions, newest first, a page at a time, filtered by id.
import { sessionPath } from "./api.js";
import { el, fmtAgo, fmtInt, fmtTime, sessionHref } from "./dom.js";

const PAGE = 50;

export async function renderList(root, api, after) {
  const page = await api(`/v1/sessions?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ""}`);
  const filter = el("input", {
    id: "filter", type: "search", placeholder: "Filter by id, or an exact id + Enter", "aria-label": "Filter sessions by id",
  });
  const body = el("tbody");
  const rows = page.data.map((s) => {
    const row = el(
      "tr",
      { "data-id": s.id },
      el("td", {}, el("a", { href: sessionHref(s.id), class: "mono" }, s.id)),
      el("td", { text: s.model || "–" }),
      el("td", { class: "num", text: fmtInt(s.turns) }),
      el("td", {}, el("span", { class: "chip window" }, s.window)),
      el("td", { class: "num", title: "the proxy's count / the usage the upstream reported" },
        `${fmtInt(s.tokens)} / ${fmtInt(s.prompt_tokens)}`),
      el("td", { title: fmtTime(s.last_used) }, fmtAgo(s.last_used)),
      el("td", { text: fmtTime(s.created) }),
    );
    body.append(row);
    return row;
  });
  const empty = el("p", { class: "notice", id: "empty", hidden: page.data.length > 0 },
    after ? "No more sessions." : "This key has no sessions yet.");
  filter.addEventListener("input", () => {
    const needle = filter.value.trim().toLowerCase();
    for (const row of rows) row.hidden = needle !== "" && !row.dataset.id.toLowerCase().includes(needle);
  });
  filter.addEventListener("keydown", async (event) => {
    if (event.key !== "Enter" || !filter.value.trim()) return;
    const id = filter.value.trim();
    try {
      await api(sessionPath(id));
      location.hash = sessionHref(id);
    } catch {
      empty.hidden = false;
      empty.textContent = `No session ${JSON.stringify(id)} for this key.`;
    }
  });
  root.append(
    el("div", { class: "title-row" }, el("h1", { text: "Sessions" }), filter),
    el(
      "table",
      { class: "sessions", id: "sessions" },
      el("thead", {}, el("tr", {}, ["Session", "Model", "Turns", "Window", "Tokens (proxy / reported)", "Last used", "Created"]
        .map((h) => el("th", { text: h })))),
      body,
    ),
    empty,
    el(
      "nav",
      { class: "pager" },
      after ? el("a", { href: "#/", class: "button" }, "← Newest") : null,
      page.has_more ? el("a", { href: `#/?after=${encodeURIComponent(page.last_id)}`, class: "button", id: "older" }, "Older →") : null,
    ),
  );
}

// Entry point: sign-in, the hash routes, and the view each one shows.
//   #/                      the sessions list (#/?after=ID for the next page)
//   #/sessions/ID           a session; #/sessions/ID/turns/N selects turn N (or "next")
import { ApiError, makeApi } from "./api.js";
import { clear, el } from "./dom.js";
import { renderList } from "./list.js";
import { renderSession } from "./session.js";

const KEY = "context-proxy.inspector.key";
const main = document.getElementById("app");
let shown = null; // {session, view} of the session on screen, so selecting a turn does not reload it

function signOut() {
  sessionStorage.removeItem(KEY);
  shown = null;
  location.hash = "#/";
  route();
}

function renderWho(key) {
  const who = clear(document.getElementById("who"));
  if (!key) return;
  who.append(
    el("span", { class: "key", title: "the API key this page reads with (kept in this tab only)" }, `key …${key.slice(-4)}`),
    el("button", { type: "button", class: "button", id: "sign-out", onclick: signOut }, "Sign out"),
  );
}

function renderSignIn() {
  const input = el("input", {
    id: "key", type: "password", name: "key", autocomplete: "off", required: true, placeholder: "sk-…",
    "aria-label": "API key",
  });
  const error = el("p", { class: "error", id: "sign-in-error" });
  const form = el(
    "form",
    { class: "sign-in", id: "sign-in" },
    el("h1", { text: "Sign in" }),
    el("p", {}, "The inspector shows the sessions of one API key, read through the proxy's session API. ",
      "The key stays in this browser tab (session storage) and goes only to this proxy."),
    el("label", { for: "key" }, "API key"),
    input,
    el("button", { type: "submit", class: "button primary" }, "Open my sessions"),
    error,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    try {
      await makeApi(key)("/v1/sessions?limit=1");
    } catch (exc) {
      error.textContent = exc instanceof ApiError ? `The proxy refused this key: ${exc.message}` : String(exc);
      return;
    }
    sessionStorage.setItem(KEY, key);
    route();
  });
  main.append(form);
  input.focus();
}

function parse(hash) {
  const [path, query] = hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(query || "") };
}

async function route() {
  const key = sessionStorage.getItem(KEY);
  renderWho(key);
  const { parts, query } = parse(location.hash);
  if (!key) {
    shown = null;
    clear(main);
    renderSignIn();
    return;
  }
  const api = makeApi(key);
  try {
    if (parts[0] === "sessions" && parts[1]) {
      const turn = parts[2] === "turns" ? parts[3] : undefined;
      if (shown && shown.session === parts[1]) {
        await shown.view.select(turn);
        return;
      }
      clear(main);
      shown = { session: parts[1], view: await renderSession(main, api, parts[1]) };
      await shown.view.select(turn);
      return;
    }
    shown = null;
    clear(main);
    await renderList(main, api, query.get("after"));
  } catch (exc) {
    shown = null;
    clear(main);
    const message = exc instanceof ApiError ? `${exc.status}: ${exc.message}` : String(exc);
    main.append(el("div", { class: "notice error", id: "load-error" }, message), el("a", { href: "#/" }, "← Sessions"));
  }
}

window.addEventListener("hashchange", route);
route();

"""The session inspector in a real headless Chromium, against a running proxy.

Needs the Debian packages `chromium` and `chromium-driver` (`.ci/run` installs them);
without them the test is skipped, so the rest of the suite runs anywhere (with
REQUIRE_BROWSER=1, as in CI, it fails instead). Selenium is
pointed at the system browser and driver: nothing is downloaded. The browser runs in a
thread, so the proxy keeps serving on the test's event loop meanwhile.
With UPDATE_SCREENSHOTS=1 the test saves the README's screenshots to docs/.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import Proxy, ProxyFactory
from tests.handlers.test_sessions import session_json
from tests.ui.scenario import MARKUP, build_session

FEEDBACK = {"rating": -1, "comment": "just answer it", "preferred": "Topic 7 is the tide tables."}
CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path("/usr/bin/chromedriver")
DOCS = Path(__file__).resolve().parents[2] / "docs"

if not (CHROMIUM.exists() and DRIVER.exists()):
    if os.environ.get("REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"REQUIRE_BROWSER=1 but {CHROMIUM} or {DRIVER} is missing")
    pytest.skip("needs the chromium and chromium-driver packages", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait


def chromium() -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1366,860",
        "--force-device-scale-factor=1", "--lang=en-US", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-default-apps",
    ):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=options)


@dataclass(frozen=True)
class Expected:
    url: str
    session: str
    turns: int
    bands: list[str]
    """The window of each run of turns, as the timeline groups them."""
    windows: list[str]
    last_turn: int
    last_turn_messages: int
    next_messages: int
    archived: str
    """A message text of the span the last window's summary cites."""
    carried: str
    """The windows whose summary mentions the tool's result ("none")."""


class Page:
    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver

    def wait(self, condition: Callable[[Any], Any], timeout: float = 15) -> Any:
        return WebDriverWait(self.driver, timeout).until(condition)

    def css(self, selector: str) -> Any:
        return self.wait(ec.presence_of_element_located((By.CSS_SELECTOR, selector)))

    def all(self, selector: str) -> list[Any]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def text_of(self, selector: str, text: str) -> None:
        self.wait(ec.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text))

    def sign_in(self, url: str, key: str) -> None:
        self.driver.get(url + "/ui/")
        field = self.css("#key")
        field.send_keys(key)
        self.css("#sign-in button[type=submit]").click()

    def errors(self) -> list[dict[str, Any]]:
        return [entry for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]

    def screenshot(self, name: str, element: Any = None) -> None:
        if os.environ.get("UPDATE_SCREENSHOTS") != "1":
            return
        DOCS.mkdir(exist_ok=True)
        png = element.screenshot_as_png if element is not None else self.driver.get_screenshot_as_png()
        (DOCS / name).write_bytes(png)


def inspect(expected: Expected) -> None:
    """Everything the user does in the browser, with the checks, run in a thread."""
    driver = chromium()
    page = Page(driver)
    try:
        page.sign_in(expected.url, "sk-test")
        page.css(f'#sessions tr[data-id="{expected.session}"]')
        page.screenshot("inspector-list.png")
        page.css(f'#sessions tr[data-id="{expected.session}"] a').click()

        # the timeline: every turn, a band per window, the failed turn, the branch, the tool pair
        page.css("#timeline .turn")
        page.text_of("#saw-title", "The next request's context")
        assert len(page.all("#timeline .turn")) == expected.turns
        assert [b.get_attribute("data-window") for b in page.all("#timeline .band")] == expected.bands
        assert page.all("#timeline .turn.status-failed .chip.status-failed"), "a failed turn shows in its colour"
        assert [c.text for c in page.all("#timeline .chip.branch")] == ["↳ branches from #0"], "one fork: the edit"
        pair = page.css("#timeline .tool-pair")
        assert "lookup(" in pair.text and "tide tables" in pair.text, "the tool call shows with its result"
        assert page.all("#timeline .msg.pinned .chip.pin"), "the pinned message is marked"
        feedback = page.css("#turn-3 .feedback").text
        assert "rated −1" in feedback and FEEDBACK["comment"] in feedback and FEEDBACK["preferred"] in feedback

        # windows: the lineage, a summary, and its archive link opening the archived span
        cards = page.all("#windows .window-card")
        assert [c.get_attribute("data-window") for c in cards] == expected.windows
        last = cards[-1]
        last.find_element(By.CSS_SELECTOR, "details > summary").click()
        assert "Task Overview" in last.find_element(By.CSS_SELECTOR, ".rendered-summary h4").text
        last.find_element(By.CSS_SELECTOR, ".rendered-summary .archive-link").click()
        page.text_of("#archive-body", expected.archived)
        assert page.driver.execute_script("return document.getElementById('archive').open") is True
        page.css("#archive-close").click()

        # what the model saw: the next request, then the last turn, side by side with the journal
        assert len(page.all("#saw-messages .msg")) == expected.next_messages
        for kind in ("leading", "summary", "pinned", "history"):
            assert page.all(f"#saw-messages .msg.src-{kind}"), f"the {kind} part is marked"
        assert page.all("#saw-messages .src-summary .archive-link"), "the summary's citation is a link"
        page.css(f"#turn-{expected.last_turn} .saw-button").click()
        page.text_of("#saw-title", f"turn #{expected.last_turn}")
        page.wait(lambda _: len(page.all("#saw-messages .msg")) == expected.last_turn_messages)
        assert page.all("#saw-messages .msg")[-1].get_attribute("class").split()[-1] == "src-input"
        assert page.all(f"#turn-{expected.last_turn}.selected") and page.all("#timeline .turn.in-context")

        # the chart: a dot per answered turn, the window and trigger lines, a marker per compaction
        assert len(page.all("#chart circle.dot")) == expected.turns
        assert page.all("#chart line.limit") and page.all("#chart line.trigger")
        assert len(page.all("#chart line.compaction")) == len(expected.bands) - 1
        assert page.all("#chart polyline.reported") and page.all("#chart polyline.counted")
        assert page.all("#chart polyline.client"), "the client's own prompt, above what the proxy sent"
        assert re.search(r"saved [\d,]+ of [\d,]+ client tokens|history supplied", page.css("#saved-total").text)

        # the markup in a message is text, and nothing ran
        assert MARKUP in page.css("#timeline").text
        assert driver.execute_script("return typeof window.__pwned") == "undefined"
        assert not page.all("#app script") and not page.all('#app img[src="x"]')
        assert page.errors() == [], "no JavaScript errors, no CSP violations"

        page.screenshot("inspector-chart.png", page.css("#chart-panel"))
        driver.execute_script("window.scrollTo(0, 0)")
        page.screenshot("inspector-session.png")
        driver.execute_script("document.querySelector('.split').scrollIntoView()")
        page.screenshot("inspector-saw.png")

        # finding a forgotten fact: which turns said it, whether they left, which summaries carry it
        page.css("#find").send_keys("tide tables")
        page.text_of("#find-result", "evicted")
        found = page.css("#find-result").text
        assert "#4" in found and f"summaries that carry it: {expected.carried}." in found, found
        assert page.all("#turn-4.match") and not page.all("#turn-5.match")

        # another key sees none of it
        page.css("#sign-out").click()
        page.sign_in(expected.url, "sk-someone-else")
        page.css("#empty")
        assert not page.all("#sessions tbody tr"), "another key lists none of the first key's sessions"
        driver.get(f"{expected.url}/ui/#/sessions/{expected.session}")
        page.text_of("#load-error", "404")
        assert not page.all("#timeline")
        leaks = [e for e in page.errors() if "404" not in e["message"]]
        assert leaks == [], "only the refused reads are logged"
    finally:
        driver.quit()


@pytest.mark.timeout(180)
async def test_the_inspector_shows_a_twice_compacted_session_and_only_to_its_key(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await build_session(proxy, "support-chat-42")
    async with aiohttp.ClientSession() as http:
        url = f"{proxy.url}/v1/sessions/support-chat-42/turns/3/feedback"
        async with http.post(url, json=FEEDBACK, headers={"Authorization": "Bearer sk-test"}) as r:
            assert r.status == 200
    await _neighbours(proxy)
    _, journal = await session_json(proxy, "support-chat-42")
    last = journal["turns"][-1]["seq"]
    _, last_context = await session_json(proxy, "support-chat-42", suffix=f"/turns/{last}/context")
    _, next_context = await session_json(proxy, "support-chat-42", suffix="/turns/next/context")
    _, archived = await session_json(proxy, "support-chat-42", suffix=f"/archive/{journal['window']['current']}")
    expected = Expected(
        url=proxy.url,
        session="support-chat-42",
        turns=len(journal["turns"]),
        bands=_bands(journal),
        windows=[w["id"] for w in journal["windows"]],
        last_turn=last,
        last_turn_messages=len(last_context["messages"]),
        next_messages=len(next_context["messages"]),
        archived=str(archived["messages"][-1]["content"])[:40],
        carried=", ".join(w["id"] for w in journal["windows"] if "tide tables" in (w["summary"] or "")) or "none",
    )
    await asyncio.to_thread(inspect, expected)


def _bands(journal: dict[str, Any]) -> list[str]:
    bands: list[str] = []
    for turn in journal["turns"]:
        if not bands or bands[-1] != turn["window"]:
            bands.append(turn["window"])
    return bands


async def _neighbours(proxy: Proxy) -> None:
    """A few more sessions of the same key, so the list has more than one row."""
    for session, question in (("onboarding-bot", "How do I reset my password?"), ("code-review-7", "Review this diff")):
        client = proxy.client(default_headers={"X-Session-Id": session})
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": question}])

"""`/ui/`: the inspector's static files, served from the package with a strict CSP."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import aiohttp

from proxy.handlers.ui import CSP
from tests.conftest import Proxy

UI = Path(__file__).resolve().parents[2] / "proxy" / "ui"
ROOT = Path(__file__).resolve().parents[2]


async def fetch(proxy: Proxy, path: str) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as http, http.get(proxy.url + path, allow_redirects=False) as r:
        return r.status, dict(r.headers), await r.text()


async def test_the_page_and_every_module_it_imports_are_served_with_the_csp(proxy: Proxy) -> None:
    status, headers, _ = await fetch(proxy, "/ui")
    assert status == 302 and headers["Location"] == "/ui/"
    status, headers, html = await fetch(proxy, "/ui/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"] == CSP and "'unsafe-inline'" not in CSP
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert all(re.search(r'\bsrc="', tag) for tag in re.findall(r"<script[^>]*>", html)), "no inline script"
    assert not re.search(r"\sstyle=|\son[a-z]+=", html), "no inline style or handler"
    wanted = set(re.findall(r'(?:src|href)="([a-z0-9-]+\.(?:js|css))"', html))
    seen: set[str] = set()
    while wanted - seen:
        name = (wanted - seen).pop()
        seen.add(name)
        status, headers, text = await fetch(proxy, f"/ui/{name}")
        assert status == 200, name
        assert headers["Content-Type"].startswith("text/javascript" if name.endswith(".js") else "text/css")
        assert headers["Content-Security-Policy"] == CSP
        wanted |= set(re.findall(r'from "\./([a-z0-9-]+\.js)"', text))
    assert seen == {p.name for p in UI.iterdir() if p.suffix in (".js", ".css")}, "every file is used, none missing"


async def test_only_the_inspector_files_are_served(proxy: Proxy) -> None:
    for path in ("/ui/nope.js", "/ui/..%2Fapp.py", "/ui/APP.JS", "/ui/__init__.py", "/ui/app.js.map"):
        status, headers, body = await fetch(proxy, path)
        assert status == 404 and headers["Content-Type"].startswith("application/json"), path
        assert '"not_found"' in body


def test_the_scripts_never_parse_data_as_html() -> None:
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\"style"
    )
    for script in UI.glob("*.js"):
        assert not sinks.findall(script.read_text()), f"{script.name} builds the page with textContent only"


def test_the_files_ship_as_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["proxy"]
    for path in UI.iterdir():
        assert any(fnmatch(f"ui/{path.name}", p) for p in patterns), path.name

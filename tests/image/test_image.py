"""The Docker image, built and run here without a daemon (issue 23).

The base image is made locally from Debian packages (`build_base.sh`) and given to the
Dockerfile as BASE_IMAGE; BAKE_ENCODINGS=0, since no encoding host is reachable in a test.
The image's own command then runs as the image's user, with its embedded Redis writing
into the image's data directory, in front of the fake upstream on a loopback port: it must
answer `/healthz` and `/readyz`, and manage a conversation (the second, delta request goes
upstream with the first turn that Redis kept). Its tokens are counted with an encoding the
image did not bake, which tiktoken caches in the image's TIKTOKEN_CACHE_DIR at run time.

Needs root and the Debian packages `buildah` and `debootstrap` (`.ci/run` installs them);
without them the test is skipped, and with REQUIRE_IMAGE=1, as in CI, it fails instead.
The build (`build.py`) starts in the background when collection ends, and the test waits
for it. The root file system and the images are cached (IMAGE_CACHE_DIR, default
/var/tmp/context-proxy-image, and buildah's storage), so a rerun builds only what changed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fake_upstream import FakeOpenAI
from tests.image.build import BASE_TIMEOUT_S, BUILD, BUILD_TIMEOUT_S, CACHE, TAG, BackgroundBuild, timings
from tests.image.buildah import chrooted, descendants, image_config, unavailable, working_container
from tests.processes import free_port

USER_ID = 10001
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def image(request: pytest.FixtureRequest) -> str:
    """The image built from this repository on the local base, by the session's background build."""
    reason = unavailable()
    if reason is not None:
        if os.environ.get("REQUIRE_IMAGE") == "1":
            pytest.fail(f"REQUIRE_IMAGE=1 but the image test {reason}", pytrace=False)
        pytest.skip(reason)
    build = request.config.stash.get(BUILD, None)
    if build is None:  # conftest.py's hook did not start it
        build = BackgroundBuild(CACHE / "logs" / f"build-{os.getpid()}.log")
        build.start()
        request.config.stash[BUILD] = build
    started = time.monotonic()
    took = timings(build.wait(BASE_TIMEOUT_S + BUILD_TIMEOUT_S))
    print(f"image: base {took[0]}, build {took[1]}; the test waited {time.monotonic() - started:.1f}s for them")
    return TAG


@asynccontextmanager
async def running(
    container: str, options: list[str], command: list[str], log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`buildah run` of the command in the container. At the end the proxy gets SIGTERM (stopping
    `buildah run` itself would SIGKILL the proxy and orphan its Redis server), and whatever of
    the run still lives in the container is then killed by its id."""
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            "buildah", "run", "--isolation", "chroot", *options, container, "--", *command,
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield process
    finally:
        inside = [pid for pid in descendants(process.pid) if chrooted(pid)]
        for pid in _proxy_pids(process.pid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        with suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
        for pid in inside:
            if chrooted(pid):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if process.returncode is None:
            process.kill()
            await process.wait()


def _proxy_pids(run: int) -> list[int]:
    """The proxy's own processes in the run (not buildah's helpers, not the Redis server)."""
    pids = []
    for pid in descendants(run):
        with suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if Path(argv[0].decode()).name.startswith("python") and b"serve" in argv:
                pids.append(pid)
    return pids


def _owner(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for process {pid}")


async def _wait_ready(http: aiohttp.ClientSession, url: str, process: asyncio.subprocess.Process, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.returncode is not None:
            break
        with suppress(aiohttp.ClientError):
            async with http.get(url + "/readyz") as r:
                if r.status == 200:
                    return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the image's proxy did not become ready:\n{log.read_text(errors='replace')[-4000:]}")


async def _chat(http: aiohttp.ClientSession, url: str, text: str) -> tuple[dict[str, Any], Any]:
    headers = {"Authorization": "Bearer sk-image", "X-Session-Id": "image-test"}
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    async with http.post(url + "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        return dict(r.headers), await r.json()


@pytest.mark.timeout(BASE_TIMEOUT_S + BUILD_TIMEOUT_S + 60)
async def test_the_image_serves_a_managed_chat_as_its_user(image: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    config = image_config(image)
    assert config["User"] == f"{USER_ID}:{USER_ID}"
    assert config["Healthcheck"]["Test"][0] == "CMD"
    assert "TIKTOKEN_CACHE_DIR=/opt/tiktoken" in config["Env"]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [*(config.get("Entrypoint") or []), *config["Cmd"], "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path / "proxy.log"
    with working_container(image) as (container, root):
        env = ["--env", f"UPSTREAM_BASE_URL={fake.url}"]  # type: ignore[attr-defined]
        async with running(container, env, command, log) as process, aiohttp.ClientSession() as http:
            started = time.monotonic()
            await _wait_ready(http, url, process, log)
            print(f"image: ready in {time.monotonic() - started:.1f}s")
            async with http.get(url + "/healthz") as r:
                assert r.status == 200
            async with http.get(url + "/readyz") as r:
                assert r.status == 200 and (await r.json())["status"] == "ready"

            headers, answer = await _chat(http, url, "hello from the image")
            assert headers["X-Session-Id"] == "image-test" and int(headers["X-Context-Tokens"]) > 0
            await _chat(http, url, "and once more")
            sent = [(m["role"], m["content"]) for m in fake.chats[-1]["messages"]]
            first = answer["choices"][0]["message"]["content"]
            assert sent == [("user", "hello from the image"), ("assistant", first), ("user", "and once more")]
            inside = [pid for pid in descendants(process.pid) if chrooted(pid)]
            assert _proxy_pids(process.pid) and all(_owner(pid) == USER_ID for pid in inside), inside

            data = root / config["WorkingDir"].lstrip("/") / ".data"
            assert (data / "appendonlydir").is_dir()
            assert {p.stat().st_uid for p in data.rglob("*")} == {USER_ID}
            cached = list((root / "opt/tiktoken").iterdir())
            assert cached and all(p.stat().st_uid == USER_ID for p in cached)
        assert process.returncode == 0, log.read_text(errors="replace")[-4000:]

"""The image as the test builds it: the local Debian base, then the Dockerfile on it.

`python -m tests.image.build [--tag TAG] [--bake]` (as root, from the repository) runs both
steps and prints each command and what it took. The test starts it in the background when
collection ends (`conftest.py`), niced, so that the build overlaps with the rest of the suite
and the test itself only waits for it; `BackgroundBuild` is that handle.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.image.buildah import build_command, pip_volumes

REPO = Path(__file__).resolve().parents[2]
BUILD_BASE = Path(__file__).with_name("build_base.sh")
CACHE = Path(os.environ.get("IMAGE_CACHE_DIR", "/var/tmp/context-proxy-image"))
TAG = "localhost/context-proxy:test"
BASE_TIMEOUT_S = 240.0
BUILD_TIMEOUT_S = 240.0
_NICENESS = 10
_TOOK = "took "


def timings(output: str) -> list[str]:
    """What each step of a build took, from its output (base first, then the Dockerfile)."""
    return [line.removeprefix(_TOOK) for line in output.splitlines() if line.startswith(_TOOK)]


def _step(argv: list[str], timeout_s: float) -> str:
    print("+ " + shlex.join(argv), flush=True)
    started = time.monotonic()
    done = subprocess.run(argv, check=False, stdout=subprocess.PIPE, text=True, timeout=timeout_s)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {done.returncode}")
    print(f"{_TOOK}{time.monotonic() - started:.1f}s", flush=True)
    return done.stdout


def build(tag: str = TAG, *, bake: bool = False) -> str:
    """Builds the image from this repository on the local base; returns its name."""
    CACHE.mkdir(parents=True, exist_ok=True)
    base = _step(["bash", str(BUILD_BASE)], BASE_TIMEOUT_S).strip().splitlines()[-1]
    _step(build_command(REPO, tag, base, pip_volumes(CACHE), bake=bake), BUILD_TIMEOUT_S)
    return tag


class BackgroundBuild:
    """`python -m tests.image.build` in a process group of its own, its output in a log file."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self._process = subprocess.Popen(
                ["nice", "-n", str(_NICENESS), sys.executable, "-m", "tests.image.build", "--tag", TAG],
                cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def wait(self, timeout_s: float) -> str:
        """The build's output once it has ended; AssertionError with that output if it failed."""
        assert self._process is not None, "the build was not started"
        code = self._process.wait(timeout_s)
        output = self.log.read_text(errors="replace")
        if code != 0:
            raise AssertionError(f"the image build exited {code}:\n{output[-4000:]}")
        return output

    def stop(self) -> None:
        """Ends a build still running (an interrupted session), its whole process group."""
        if self._process is None or self._process.poll() is not None:
            return
        os.killpg(self._process.pid, signal.SIGTERM)
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()


BUILD = pytest.StashKey[BackgroundBuild]()
"""Where the session's background build is kept (`conftest.py` starts it, the test waits for it)."""


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.image.build", description=__doc__)
    parser.add_argument("--tag", default=TAG)
    parser.add_argument("--bake", action="store_true", help="BAKE_ENCODINGS=1 (needs the encodings' host)")
    args = parser.parse_args()
    started = time.monotonic()
    print(build(args.tag, bake=args.bake))
    print(f"image built in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Starts the image's build as soon as collection ends, when the image test is among the
tests to run, and moves that test to the end of the run: the build then overlaps with the
rest of the suite, and the test waits only for what is left of it. A session that ends
first stops the build."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.image.build import BUILD, CACHE, BackgroundBuild
from tests.image.buildah import unavailable

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: Path(item.path).is_relative_to(HERE))  # stable: the others keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or unavailable() is not None:
        return
    if any(Path(item.path).is_relative_to(HERE) for item in session.items):
        build = BackgroundBuild(CACHE / "logs" / f"build-{os.getpid()}.log")
        build.start()
        session.config.stash[BUILD] = build


def pytest_sessionfinish(session: pytest.Session) -> None:
    build = session.config.stash.get(BUILD, None)
    if build is not None:
        build.stop()
        build.log.unlink(missing_ok=True)

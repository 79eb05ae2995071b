"""Reading a Prometheus exposition in tests: its samples, and `promtool check metrics` where installed."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample by name and sorted labels (the parser refuses what the format does not allow)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def promtool_check(text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    checked = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, check=False)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()

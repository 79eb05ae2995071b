"""Several workers' Prometheus text expositions -> one, each series summed over the workers.

Every worker renders only its own share (`proxy/metrics.py`); with `server.workers > 1`
the worker that answers a scrape merges its text with the other workers' here, at the
text level, so the renderer stays a one-process concern. Samples with the same name and
label set (label order aside) are summed: counters, histogram `_bucket`/`_sum`/`_count`
(every worker uses the same buckets, so summed cumulative counts are exact), and gauges,
label-free ones included (requests in flight, resident memory and open descriptors add up
over the workers), except a `*_start_time_seconds` gauge, which keeps the earliest
(the oldest worker's start: a sum of timestamps means nothing). `# HELP` and
`# TYPE` are kept once per family; families and samples keep the order in which they
first appear, and a sample only some workers have joins its own family, so each family's
lines stay together as the format requires. Other comments and timestamps are dropped.
A line that does not parse is skipped, never raised on: a scrape must still answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from proxy.types import frozen

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_INTEGER = re.compile(r"[+-]?\d+")
# Suffixes under which a family's samples appear (histograms, summaries, counters).
_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")
_EARLIEST = "_start_time_seconds"

Labels = tuple[tuple[str, str], ...]
Number = int | float


@dataclass
class _Sample:
    text: str
    """The sample's name and label block as first seen, reused verbatim."""
    value: Number


@dataclass
class _Family:
    help: str | None = None
    type: str | None = None
    samples: dict[tuple[str, Labels], _Sample] = field(default_factory=dict)


@frozen
class ParsedSample:
    name: str
    labels: Labels
    """Label names and values, values still escaped as in the text."""
    text: str
    value: Number


def merge_expositions(texts: Iterable[str]) -> str:
    """One exposition whose every series is the sum of that series over `texts`."""
    families: dict[str, _Family] = {}
    for text in texts:
        current = ""
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("#"):
                current = _comment(line, families) or current
                continue
            sample = parse_sample(line)
            if sample is None:
                continue
            name = current if _belongs(sample.name, current) else sample.name
            family = families.setdefault(name, _Family())
            key = (sample.name, tuple(sorted(sample.labels)))
            if key not in family.samples:
                family.samples[key] = _Sample(sample.text, sample.value)
            elif sample.name.endswith(_EARLIEST):
                family.samples[key].value = min(family.samples[key].value, sample.value)
            else:
                family.samples[key].value += sample.value
    lines: list[str] = []
    for family in families.values():
        lines += [comment for comment in (family.help, family.type) if comment]
        lines += [f"{sample.text} {format_value(sample.value)}" for sample in family.samples.values()]
    return "\n".join(lines) + "\n"


def parse_sample(line: str) -> ParsedSample | None:
    """`name{a="x",b="y"} value [timestamp]`, or None when the line is not a sample."""
    match = _NAME.match(line)
    if match is None:
        return None
    name, end = match.group(), match.end()
    labels: Labels = ()
    if line[end : end + 1] == "{":
        parsed = _labels(line, end + 1)
        if parsed is None:
            return None
        end, labels = parsed
    fields = line[end:].split()
    if not fields or (end < len(line) and not line[end].isspace()):
        return None
    value = _number(fields[0])
    if value is None:
        return None
    return ParsedSample(name, labels, line[:end], value)


def format_value(value: Number) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _comment(line: str, families: dict[str, _Family]) -> str | None:
    """Keep the first `# HELP`/`# TYPE` of a family; the family name, or None for other comments."""
    parts = line.split(None, 3)
    if len(parts) < 3 or parts[1] not in ("HELP", "TYPE") or not _NAME.fullmatch(parts[2]):
        return None
    family = families.setdefault(parts[2], _Family())
    if parts[1] == "HELP" and family.help is None:
        family.help = line
    elif parts[1] == "TYPE" and family.type is None:
        family.type = line
    return parts[2]


def _belongs(sample: str, family: str) -> bool:
    if not family:
        return False
    return sample == family or (sample.startswith(family) and sample[len(family) :] in _SUFFIXES)


def _labels(line: str, start: int) -> tuple[int, Labels] | None:
    """Parse `a="x",b="y"}` from `start`; the index after `}` and the pairs (values kept escaped)."""
    pairs: list[tuple[str, str]] = []
    i = start
    while True:
        while i < len(line) and line[i] in " ,":
            i += 1
        if line[i : i + 1] == "}":
            return i + 1, tuple(pairs)
        match = _LABEL_NAME.match(line, i)
        if match is None:
            return None
        i = value_start = match.end()
        while i < len(line) and line[i] != '"':
            i += 2 if line[i] == "\\" else 1
        if i >= len(line):
            return None
        pairs.append((match.group(1), line[value_start:i]))
        i += 1


def _number(text: str) -> Number | None:
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return None

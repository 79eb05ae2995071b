"""Merging workers' exposition texts: every series summed, each family once and in one piece."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.events import CompactionLanded, UpstreamAnswered
from proxy.metrics import Metrics
from proxy.metrics_merge import merge_expositions, parse_sample
from tests.exposition import promtool_check


def parsed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by name and sorted labels; fails if a family appears twice (split up) in the text."""
    families = list(text_string_to_metric_families(text))
    names = [family.name for family in families]
    assert len(names) == len(set(names)), f"a family is split: {names}"
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in families for s in family.samples}


def test_merging_workers_renders_equals_one_process_that_saw_everything() -> None:
    one, two, both = Metrics(["gpt-4o"]), Metrics(["gpt-4o"]), Metrics(["gpt-4o"])
    for metrics, route, model, status, seconds in (
        (one, "/v1/chat/completions", "gpt-4o", 200, 0.003),
        (one, "/v1/chat/completions", "gpt-4o", 200, 0.2),
        (two, "/v1/chat/completions", "gpt-4o", 200, 1.5),
        (two, "/v1/chat/completions", "gpt-4o-mini", 400, 0.001),
        (two, "/v1/models", "", 200, 0.04),
    ):
        for target in (metrics, both):
            target.request_done(route, model, status, seconds)
            target.observe(UpstreamAnswered(route, status, seconds / 2, "req"))
            target.tokens(model, prompt=10, completion=3)
    landed = CompactionLanded("s", "req", "summarize", "win_0", "win_1", (0,), (1,), "a", None, None, None, 0.5)
    for target in (one, both):
        target.observe(landed)
    one.in_flight, two.in_flight, both.in_flight = 2, 3, 5

    text = merge_expositions([one.render(), two.render()])
    promtool_check(text)
    merged = parsed(text)
    expected = parsed(both.render())
    assert merged.keys() == expected.keys()
    for key, value in expected.items():
        if not key[0].startswith("process_"):
            assert merged[key] == pytest.approx(value), key
    assert merged[("context_proxy_in_flight_requests", ())] == 5
    assert merged[("context_proxy_requests_total", (("model", "gpt-4o"), ("route", "/v1/chat/completions"), ("status", "200")))] == 3  # fmt: skip


def test_process_gauges_add_up_but_the_start_time_is_the_earliest() -> None:
    def worker(started: float, rss: int) -> str:
        return (
            f"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {started}\n"
            f"# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {rss}\n"
        )

    merged = parsed(merge_expositions([worker(1700000100.5, 1000), worker(1700000000.25, 2000)]))
    assert merged[("process_start_time_seconds", ())] == 1700000000.25
    assert merged[("process_resident_memory_bytes", ())] == 3000


def test_help_and_type_once_and_a_series_only_one_worker_has_stays_in_its_family() -> None:
    first = '# HELP a_total A.\n# TYPE a_total counter\na_total{k="x"} 1\n# HELP g Gauge.\n# TYPE g gauge\ng 4\n'
    second = (
        "# HELP a_total A.\n# TYPE a_total counter\n"
        'a_total{k="x"} 2\na_total{k="y"} 7\n'
        "# HELP g Gauge.\n# TYPE g gauge\ng 1\n"
    )
    merged = merge_expositions([first, second])
    assert merged == (
        "# HELP a_total A.\n# TYPE a_total counter\n"
        'a_total{k="x"} 3\na_total{k="y"} 7\n'
        "# HELP g Gauge.\n# TYPE g gauge\ng 5\n"
    )
    parsed(merged)


def test_escaped_label_values_and_label_order() -> None:
    first = '# TYPE r counter\nr{path="/a,\\"b\\"}",m="x\\\\"} 1\n'
    second = '# TYPE r counter\nr{m="x\\\\",path="/a,\\"b\\"}"} 2.5\n'
    merged = merge_expositions([first, second])
    assert merged == '# TYPE r counter\nr{path="/a,\\"b\\"}",m="x\\\\"} 3.5\n'
    assert parsed(merged) == {("r_total", (("m", "x\\"), ("path", '/a,"b"}'))): 3.5}


def test_histograms_sum_bucket_by_bucket() -> None:
    def worker(below: int, count: int, total: float) -> str:
        return f'# TYPE h histogram\nh_bucket{{le="0.1"}} {below}\nh_bucket{{le="+Inf"}} {count}\nh_sum {total}\nh_count {count}\n'

    merged = merge_expositions([worker(1, 2, 0.25), worker(0, 3, 1.5), worker(4, 4, 0.125)])
    assert merged == '# TYPE h histogram\nh_bucket{le="0.1"} 5\nh_bucket{le="+Inf"} 9\nh_sum 1.875\nh_count 9\n'


def test_what_does_not_parse_is_skipped_and_timestamps_dropped() -> None:
    text = '# a comment\nnot a sample\nbad{unclosed="x} 1\nx 1 1700000000000\ny NaN\nz +Inf\nw{} 2\nv{a="1"}3\n'
    merged = merge_expositions([text, text])
    assert merged == "x 2\ny NaN\nz +Inf\nw{} 4\n"


@pytest.mark.parametrize(
    ("line", "name", "labels", "value"),
    [
        ("up 1", "up", (), 1),
        ('req_total{a="1",b="two words"} 3.5e2', "req_total", (("a", "1"), ("b", "two words")), 350.0),
        ('x{a="q\\"uote"} -2', "x", (("a", 'q\\"uote'),), -2),
        ("x{} 0", "x", (), 0),
    ],
)
def test_parse_sample(line: str, name: str, labels: tuple[tuple[str, str], ...], value: float) -> None:
    sample = parse_sample(line)
    assert sample is not None and (sample.name, sample.labels, sample.value) == (name, labels, value)

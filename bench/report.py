"""The benchmark's tables, and the issues' targets each with its figure (ratios of one run)."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from bench.load import Result

Results = dict[tuple[str, int], list[Result]]
Growth = dict[tuple[int, bool], list[float]]
"""Per-turn proxy CPU (ms), one sample per round, by (history depth, full-history client?)."""

REDIS_USERS = (
    "g floor relay", "c proxy off", "d proxy delta 50", "e proxy full 50", "f-d stream proxy", "j proxy delta 50 cold",
)  # fmt: skip


def serving(name: str) -> str:
    """The process whose CPU a scenario measures."""
    if name in ("a direct", "f-a stream direct"):
        return "upstream"
    return {"b bare relay": "relay", "g floor relay": "floor"}.get(name, "proxy")


def median(results: list[Result], fn: Callable[[Result], float]) -> float:
    return statistics.median(fn(r) for r in results)


def cpu(results: Results, name: str, concurrency: int, process: str | None = None) -> float:
    return median(results[(name, concurrency)], lambda r: r.cpu_ms.get(process or serving(name), float("nan")))


def table(results: Results) -> str:
    lines = [
        (
            "| scenario | c | req/s | p50 ms | p99 ms | req/s vs a | req/s vs b | p50 +ms vs a | p99 +ms vs a "
            "| TTFB p50 ms | TTFB p99 ms | CPU ms/req | Redis CPU ms/req | cache misses |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for concurrency in (1, 32):
        a = results[("a direct", concurrency)]
        b = results[("b bare relay", concurrency)]
        a_rps, b_rps = median(a, lambda r: r.throughput), median(b, lambda r: r.throughput)
        a50, a99 = median(a, lambda r: r.percentile(50)), median(a, lambda r: r.percentile(99))
        sa = results[("f-a stream direct", concurrency)]
        for (name, c), runs in results.items():
            if c != concurrency:
                continue
            rps = median(runs, lambda r: r.throughput)
            p50, p99 = median(runs, lambda r: r.percentile(50)), median(runs, lambda r: r.percentile(99))
            ref50, ref99 = (a50, a99)
            ttfb = ("", "")
            if name.startswith("f-"):
                ref50, ref99 = median(sa, lambda r: r.percentile(50)), median(sa, lambda r: r.percentile(99))
                ttfb = (
                    f"{median(runs, lambda r: r.percentile(50, 'ttfb')) * 1000:.2f}",
                    f"{median(runs, lambda r: r.percentile(99, 'ttfb')) * 1000:.2f}",
                )
            redis = f"{cpu(results, name, c, 'redis'):.3f}" if name in REDIS_USERS else ""
            shares = [r.cache_misses for r in runs if r.cache_misses is not None]
            misses = f"{statistics.median(shares):.0%}" if shares else ""
            lines.append(
                f"| {name} | {c} | {rps:.0f} | {p50 * 1000:.2f} | {p99 * 1000:.2f} | {rps / a_rps:.2f} | {rps / b_rps:.2f} "
                f"| {(p50 - ref50) * 1000:+.2f} | {(p99 - ref99) * 1000:+.2f} | {ttfb[0]} | {ttfb[1]} "
                f"| {cpu(results, name, c):.3f} | {redis} | {misses} |"
            )
    return "\n".join(lines)


def growth_table(growth: Growth) -> str:
    lines = [
        "Per-turn proxy CPU (process CPU time, ms per request; median of interleaved rounds):",
        "| history | delta client | full-history client |",
        "|---|---|---|",
    ]
    for depth in (10, 100, 1000):
        lines.append(
            f"| {depth} turns | {statistics.median(growth[depth, False]):.2f} "
            f"| {statistics.median(growth[depth, True]):.2f} |"
        )
    delta, full = growth_ratios(growth, False), growth_ratios(growth, True)
    lines.append(
        f"| ratio 1000/10 (median; worst round) | {delta[0]:.2f}; {delta[1]:.2f} | {full[0]:.2f}; {full[1]:.2f} |"
    )
    return "\n".join(lines)


def growth_ratios(growth: Growth, full_history: bool) -> tuple[float, float]:
    """The median ratio of 1,000 turns to 10, and the worst of the rounds' own ratios."""
    deep, shallow = growth[1000, full_history], growth[10, full_history]
    per_round = [d / s for d, s in zip(deep, shallow, strict=True)]
    return statistics.median(deep) / statistics.median(shallow), max(per_round)


def targets(results: Results, growth: Growth, peak_rss: dict[str, float], memory: dict[str, float]) -> str:
    """The targets of issue 25 (and, marked, the rest of issue 15's): figure, goal, met or not."""
    relay_cpu = cpu(results, "b bare relay", 1)
    relay_rps = {c: median(results[("b bare relay", c)], lambda r: r.throughput) for c in (1, 32)}
    direct_p50 = median(results[("a direct", 1)], lambda r: r.percentile(50))
    rows: list[tuple[str, str, str, bool]] = []
    floor = cpu(results, "g floor relay", 1)
    rows.append(("floor relay CPU/req vs bare relay, c=1 (reference)", f"{floor / relay_cpu:.2f}x", "", True))
    for name, label in (("d proxy delta 50", "delta"), ("e proxy full 50", "full-history")):
        ratio = cpu(results, name, 1) / relay_cpu
        rows.append((f"proxy CPU/req vs bare relay, {label}, 50 turns, c=1", f"{ratio:.2f}x", "<= 3.5x", ratio <= 3.5))
    cold = cpu(results, "j proxy delta 50 cold", 1)
    rows.append(
        ("proxy CPU/req vs bare relay, a cold 50-turn load (j), c=1 (reference)", f"{cold / relay_cpu:.2f}x", "", True)
    )
    for name, label in (("d proxy delta 50", "delta"), ("e proxy full 50", "full-history")):
        redis = cpu(results, name, 1, "redis")
        rows.append((f"Redis server CPU/req, {label}, c=1", f"{redis:.3f} ms", "<= 0.4 ms", redis <= 0.4))
    cold_redis = cpu(results, "j proxy delta 50 cold", 1, "redis")
    rows.append(("Redis server CPU/req, a cold 50-turn load (j), c=1 (reference)", f"{cold_redis:.3f} ms", "", True))
    for name, label in (("d proxy delta 50", "delta"), ("e proxy full 50", "full-history")):
        ratio = median(results[(name, 32)], lambda r: r.throughput) / relay_rps[32]
        rows.append((f"req/s vs bare relay, {label}, c=32", f"{ratio:.2f}x", ">= 0.35x", ratio >= 0.35))
    relay_cpu32 = cpu(results, "b bare relay", 32)
    for name, label in (("d proxy delta 50", "delta"), ("j proxy delta 50 cold", "a cold 50-turn load (j)")):
        ratio = cpu(results, name, 32) / relay_cpu32
        rows.append((f"proxy CPU/req vs bare relay, {label}, c=32 (reference)", f"{ratio:.2f}x", "", True))
    relay_added = (median(results[("b bare relay", 1)], lambda r: r.percentile(50)) - direct_p50) * 1000
    rows.append(("added p50 over direct, bare relay, c=1 (reference)", f"{relay_added:+.2f} ms", "", True))
    for name, label in (("d proxy delta 50", "delta"), ("e proxy full 50", "full-history")):
        added = (median(results[(name, 1)], lambda r: r.percentile(50)) - direct_p50) * 1000
        rows.append((f"added p50 over direct, {label}, c=1", f"{added:+.2f} ms", "<= +2.5 ms", added <= 2.5))
    chat = cpu(results, "d proxy delta 50", 1)
    for name, label in (("h proxy responses 50", "Responses"), ("i proxy messages 50", "Messages")):
        ratio = cpu(results, name, 1) / chat
        rows.append((f"{label} turn CPU vs a chat turn, delta, c=1", f"{ratio:.2f}x", "<= 1.2x", ratio <= 1.2))
    tools = cpu(results, "k proxy tools 50", 1) / chat
    rows.append(("an agent's turn (16 tool schemas) CPU vs a chat turn, c=1 (reference)", f"{tools:.2f}x", "", True))
    ratio = memory["memory"] / memory["text"]
    rows.append(
        (f"Redis memory per turn of text, {memory['turns']:.0f} short chat turns (bench.memory)", f"{ratio:.2f}x",
         "<= 1.5x", ratio <= 1.5)
    )  # fmt: skip
    for full_history, label, goal in ((True, "full-history", 2.5), (False, "delta", 1.5)):
        med, worst = growth_ratios(growth, full_history)
        rows.append(
            (f"CPU/turn 1000 vs 10 turns, {label} (median; worst round; issue 15)", f"{med:.2f}x; {worst:.2f}x",
             f"<= {goal}x", worst <= goal)
        )  # fmt: skip
    rows.append(
        ("proxy RSS under c=64 (issue 15)", f"{peak_rss['proxy']:.0f} MB", "<= 100 MB", peak_rss["proxy"] <= 100)
    )
    rows.append(("embedded server RSS under c=64 (apart)", f"{peak_rss['redis']:.0f} MB", "", True))
    lines = ["Issue 25's targets (this run):", "| target | figure | goal | met |", "|---|---|---|---|"]
    for label, figure, goal, met in rows:
        lines.append(f"| {label} | {figure} | {goal} | {('yes' if met else 'NO') if goal else ''} |")
    return "\n".join(lines)

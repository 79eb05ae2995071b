"""`python -m bench.instructions`: what a request costs in instructions, which noise does not move.

CPU time on a shared machine varies by a third from one run to the next (the host's other
tenants, its caches); the instructions a process executes for the same requests do not. The
bare relay and the proxy run under valgrind's callgrind (instrumented from their first request,
so start-up is not slowed), the benchmark's lean upstream and the embedded Redis as they are.
For each target: its pool's sessions served once, a warm-up, then the counts zeroed, N requests
at the given concurrency, the counts dumped; instructions per request, and the ratio to the
bare relay's. Callgrind counts user-space instructions only (a system call counts as one), and
a large `memcpy` counts one per byte copied (`rep movsb`); a ratio of instructions is not one of
time, but a change in them is a change in the work done. Repeat runs of the proxy's rows agree
to about 0.3%; the relay's, whose batching depends more on timing, to a few percent.

Needs valgrind (the Debian package `valgrind`); about 15 s a target, 2 minutes in all.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
from functools import partial
from pathlib import Path

from bench.__main__ import PRIMER_OFFSET, Bench, _shifted
from bench.load import run_each
from bench.procs import Processes, running
from proxy.store import Store

TARGETS = (
    "b bare relay",
    "c proxy off",
    "d proxy delta 50",
    "e proxy full 50",
    "h proxy responses 50",
    "i proxy messages 50",
)
MEASURED = ("relay", "proxy")
"""The processes run under callgrind (each target is served by one of them)."""


def _under(workdir: Path) -> dict[str, list[str]]:
    return {
        name: ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={workdir}/callgrind.{name}"]
        for name in MEASURED
    }


_CONTROL_TIMEOUT_S = 60.0


class Counters:
    """The callgrind counters of the measured processes, each command checked by its effect:
    `callgrind_control` exits 0 whether or not it reached the process."""

    def __init__(self, procs: Processes) -> None:
        self.procs = procs
        self.dumps = dict.fromkeys(MEASURED, 0)

    async def instrument(self, name: str, on: bool) -> None:
        await self._control(name, f"--instr={'on' if on else 'off'}")

    async def take(self, name: str) -> int:
        """Dump `name`'s counters (which zeroes them): the instructions since its last dump."""
        await self._control(name, "--dump")
        self.dumps[name] += 1
        path = self.procs.workdir / f"callgrind.{name}.{self.dumps[name]}"
        if not path.exists():
            raise RuntimeError(f"callgrind wrote no dump {path.name}")
        for line in path.read_text().splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1])
        raise RuntimeError(f"no totals in {path}")

    async def _control(self, name: str, *args: str) -> None:
        command = ["callgrind_control", *args, str(self.procs.children[name].pid)]
        done = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, timeout=_CONTROL_TIMEOUT_S
        )
        if "Error" in done.stdout or "No active" in done.stdout or done.returncode:
            raise RuntimeError(f"{' '.join(command)}: {done.stdout.strip() or done.stderr.strip()}")


async def measure(count: int, concurrency: int, pool_size: int) -> dict[str, float]:
    """Instructions per request of each target, in millions."""
    per_request: dict[str, float] = {}
    async with running("instructions", under=_under, wait_s=120.0) as (procs, redis_url):
        store = await Store.connect(redis_url)
        bench = Bench(procs, store, redis_url, quick=True, pool_size=pool_size)
        counters = Counters(procs)
        try:
            for name in MEASURED:
                await counters.instrument(name, on=True)
            for target in TARGETS:
                served_by = "relay" if "relay" in target else "proxy"
                pool = await bench.fresh_pool(50, pool_size) if "50" in target else []
                url, factory, stream = bench.targets(pool)[target]
                primer = partial(_shifted, factory, PRIMER_OFFSET)  # other messages than the measured ones
                # Each session's first turn is a cold load, slow under callgrind: 4 at a time, so that no
                # store call outlives its timeout behind 31 others.
                primed = await run_each(url, primer, pool_size + 100, concurrency=min(concurrency, 4), stream=stream)
                await counters.take(served_by)  # the primer's instructions, set aside
                result = await run_each(url, factory, count, concurrency=concurrency, stream=stream)
                instructions = await counters.take(served_by)
                if primed.errors or result.errors:
                    raise RuntimeError(f"{target}: {primed.errors + result.errors} errors")
                per_request[target] = instructions / count / 1e6
                print(f"  {target:22s} {per_request[target]:6.3f} M instructions/request", flush=True)
        finally:
            await store.close()
            for name in MEASURED:  # an uninstrumented process stops at its usual speed
                with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                    await counters.instrument(name, on=False)
    return per_request


def report(per_request: dict[str, float], concurrency: int) -> str:
    relay = per_request["b bare relay"]
    lines = [
        f"Instructions per request at c={concurrency} (callgrind; the serving process only):",
        "| target | M instructions/request | vs bare relay |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {value:.3f} | {value / relay:.2f}x |" for name, value in per_request.items()]
    chat = per_request["d proxy delta 50"]
    for door in ("h proxy responses 50", "i proxy messages 50"):
        lines.append(f"| {door} vs a chat turn (d) | | {per_request[door] / chat:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="measured requests a target (default 300)")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent clients (default 32)")
    parser.add_argument("--pool", type=int, default=50, help="sessions of 50 turns a target (default 50)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        parser.error("needs valgrind (the Debian package `valgrind`)")
    per_request = asyncio.run(measure(args.requests, args.concurrency, args.pool))
    print("\n" + report(per_request, args.concurrency))


if __name__ == "__main__":
    main()

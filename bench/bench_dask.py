"""Benchmark: N `sleep 0.05` shell steps through the Dask executor (2 workers) vs the local shell tool.

Usage: python bench/bench_dask.py [--steps 500] [--address tcp://...] [--json]

Drives the executors directly (asyncio + a semaphore standing in for planrun's max_concurrency).
Per-step overhead = makespan * slots / steps - the command's own 0.05 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planrun.executors.dask import DaskExecutor  # noqa: E402
from planrun.tools import builtin_registry  # noqa: E402
from planrun.tools.base import ToolContext  # noqa: E402

SLEEP_S = 0.05
SLOTS = 2  # two workers x one thread, and local concurrency 2


class LocalShell:
    """The local side: planrun's own built-in tools, called in this process."""

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> Any:
        spec = builtin_registry().get(tool)
        assert spec is not None
        return await spec.fn(args, ctx)


async def drive(executor: Any, steps: int, concurrency: int) -> float:
    """Run `steps` shell steps, at most `concurrency` at a time; the makespan in seconds."""
    gate = asyncio.Semaphore(concurrency)
    cwd = os.getcwd()

    async def one(i: int) -> None:
        async with gate:
            ctx = ToolContext(step_id=f"s{i}", cwd=cwd, env=dict(os.environ))
            result = await executor.call("shell", {"cmd": f"sleep {SLEEP_S}"}, ctx)
            assert result["exit_code"] == 0

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for i in range(steps):
            group.create_task(one(i))
    return time.perf_counter() - started


def row(name: str, steps: int, makespan: float) -> dict[str, Any]:
    per_step = makespan * SLOTS / steps
    return {
        "mode": name,
        "steps": steps,
        "makespan_s": round(makespan, 2),
        "per_step_ms": round(per_step * 1000, 1),
        "overhead_ms": round((per_step - SLEEP_S) * 1000, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--address", default=None, help="a running scheduler; default LocalCluster")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()

    rows = []
    local = LocalShell()
    rows.append(
        row("local shell, concurrency 2", opts.steps, await drive(local, opts.steps, SLOTS))
    )

    dask = DaskExecutor(opts.address, local=LocalShell(), cwd=os.getcwd(), n_workers=SLOTS)
    t0 = time.perf_counter()
    await dask.start()
    await dask.client.wait_for_workers(SLOTS)
    startup = time.perf_counter() - t0
    try:
        await drive(dask, 20, SLOTS)  # warm-up: imports and connections on the workers
        for concurrency in (SLOTS, opts.steps):
            makespan = await drive(dask, opts.steps, concurrency)
            rows.append(row(f"dask 2 workers, concurrency {concurrency}", opts.steps, makespan))
    finally:
        t0 = time.perf_counter()
        await dask.aclose()
        shutdown = time.perf_counter() - t0
    if opts.json:
        print(json.dumps({"rows": rows, "dask_start_s": startup, "dask_close_s": shutdown}))
        return
    print(
        f"{opts.steps} x `sleep {SLEEP_S}`, {SLOTS} slots; ideal makespan "
        f"{opts.steps * SLEEP_S / SLOTS:.1f} s"
    )
    print(f"{'mode':34} {'makespan':>9} {'per step':>9} {'overhead':>9}")
    for r in rows:
        print(
            f"{r['mode']:34} {r['makespan_s']:>8.2f}s {r['per_step_ms']:>7.1f}ms "
            f"{r['overhead_ms']:>7.1f}ms"
        )
    print(f"dask cluster start {startup:.2f} s, close {shutdown:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())

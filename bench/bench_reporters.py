"""Cost of the console and JSON-lines reporters per event: 10,000 synthetic steps to /dev/null.

Target: under 20 µs per event for the console reporter. The test suite checks only that both
reporters handle the events; the timing claim lives here (a busy machine makes it flaky there).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planrun.reporters.console import ConsoleReporter  # noqa: E402
from planrun.reporters.jsonl import JsonLinesReporter  # noqa: E402
from planrun.run.events import (  # noqa: E402
    RunEvent,
    RunFinished,
    RunStarted,
    StepStarted,
    StepSucceeded,
)

TARGET_US = 20.0


def synthetic_steps(n: int) -> list[RunEvent]:
    steps = [{"id": f"s{i}", "title": "", "tool": "shell", "depends_on": []} for i in range(n)]
    t = time.time()
    events: list[RunEvent] = [RunStarted("bench", steps=steps, resumed=False, ts=t)]
    for i in range(n):
        t += 0.0003
        events.append(StepStarted("bench", f"s{i}", attempt=1, ts=t))
        done = StepSucceeded("bench", f"s{i}", attempts=1, duration_s=0.0002, output=None, ts=t)
        events.append(done)
    events.append(RunFinished("bench", status="succeeded", duration_s=3.0, ts=time.time()))
    return events


def per_event_us(kind: str, events: list[RunEvent]) -> float:
    with open(os.devnull, "w", encoding="utf-8") as devnull:
        reporter: Any = (
            ConsoleReporter(devnull, color=False, live=False)
            if kind == "console"
            else JsonLinesReporter(os.devnull)
        )
        start = time.perf_counter()
        for event in events:
            reporter.handle(event)
        reporter.close()
        return (time.perf_counter() - start) / len(events) * 1e6


def main() -> None:
    events = synthetic_steps(10_000)
    for kind in ("console", "jsonl"):
        best = min(per_event_us(kind, events) for _ in range(3))
        print(f"{kind:8} {best:6.1f} µs/event (best of 3; target < {TARGET_US:.0f} µs)")


if __name__ == "__main__":
    main()

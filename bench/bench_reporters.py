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
from planrun.run.events import Event  # noqa: E402

TARGET_US = 20.0


def synthetic_steps(n: int) -> list[Event]:
    steps = [{"id": f"s{i}", "title": "", "tool": "shell", "depends_on": []} for i in range(n)]
    t = time.time()
    events = [Event("run.started", "bench", None, {"steps": steps, "resumed": False}, ts=t)]
    for i in range(n):
        t += 0.0003
        events.append(Event("step.started", "bench", f"s{i}", {"attempt": 1}, ts=t))
        done = {"status": "succeeded", "attempts": 1, "duration_s": 0.0002, "output": None}
        events.append(Event("step.succeeded", "bench", f"s{i}", done, ts=t))
    events.append(Event("run.finished", "bench", None, {"status": "succeeded", "duration_s": 3.0}))
    return events


def per_event_us(kind: str, events: list[Event]) -> float:
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

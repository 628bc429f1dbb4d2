"""Cost of MCP tool calls: 200 calls to one stdio server (mcp-server-time) beyond its start-up."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Figure,
    Timing,
    find_tool,
    fmt_s,
    machine_note,
    planrun_cmd,
    print_table,
    profile_planrun,
    report_failures,
    time_command,
    work_dir,
)

TARGET_S = 1.0


def write_plan(d: Path, name: str, n: int, chained: bool, server: str) -> Path:
    lines = [
        f"name: {name}",
        "servers:",
        f"  time: {{command: {server}}}",
        "steps:",
    ]
    for i in range(n):
        lines += [
            f"  - id: t{i}",
            "    tool: time.get_current_time",
            "    args: {timezone: UTC}",
        ]
        if chained and i:
            lines.append(f"    depends_on: [t{i - 1}]")
    path = d / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def calls_after_first(d: Path, plan: Path, planrun: list[str]) -> float | None:
    """From the event stream: seconds from the first call's end to the last call's end.

    That is the cost of calls 2..N with the server already up, measured inside
    planrun, so it is immune to the start-up noise of a busy machine.
    """
    events = d / "events.jsonl"
    events.unlink(missing_ok=True)
    time_command(
        "events",
        [*planrun, "run", plan.name, "--quiet", "--no-state", "--events", events.name],
        cwd=d,
        reps=1,
    )
    if not events.exists():
        return None
    ends = []
    for line in events.read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") == "step.succeeded":
            ends.append(datetime.fromisoformat(ev["ts"].replace("Z", "+00:00")))
    if len(ends) < 2:
        return None
    ends.sort()
    return (ends[-1] - ends[0]).total_seconds()


def main(argv: list[str] | None = None) -> list[Figure]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    opts = parser.parse_args(argv)
    print(f"== bench_mcp ({machine_note()})")
    server = find_tool("mcp-server-time")
    if server is None:
        print("mcp-server-time: skipped (not installed)")
        return [Figure("MCP 200 calls beyond start-up", "skipped (not installed)")]
    planrun = planrun_cmd()
    assert planrun is not None
    d = work_dir("mcp")
    n = opts.steps
    one = write_plan(d, "mcp-one", 1, False, server)
    indep = write_plan(d, "mcp-independent", n, False, server)
    chain = write_plan(d, "mcp-chain", n, True, server)

    def cmd(plan: Path) -> list[str]:
        return [*planrun, "run", plan.name, "--quiet", "--no-state"]

    t_one = time_command("1 call (server start-up)", cmd(one), cwd=d, reps=opts.reps)
    t_ind = time_command(f"{n} independent calls", cmd(indep), cwd=d, reps=opts.reps)
    t_chain = time_command(f"{n} chained calls", cmd(chain), cwd=d, reps=opts.reps)
    timings: list[Timing] = [t_one, t_ind, t_chain]

    inside = {
        t_ind.label: calls_after_first(d, indep, planrun),
        t_chain.label: calls_after_first(d, chain, planrun),
    }
    rows = []
    for t in timings:
        secs = inside.get(t.label)
        in_events = (
            f"{fmt_s(secs)} ({secs / (n - 1) * 1000:.2f} ms/call)" if secs is not None else ""
        )
        beyond = ""
        if t is not t_one and t.ok and t_one.ok:
            extra = t.median - t_one.median
            beyond = f"{fmt_s(extra)} ({extra / (n - 1) * 1000:.2f} ms/call)"
        rows.append(
            [
                t.label,
                fmt_s(t.median) if t.ok else (t.skipped or "FAILED"),
                fmt_s(t.cpu_median),
                f"n={len(t.times)}",
                beyond,
                in_events,
            ]
        )
    print_table(["plan", "wall", "cpu", "runs", "beyond start-up", "calls 2..N (events)"], rows)
    print(f"(target: {n} calls < {TARGET_S:.0f} s beyond start-up; server: {server})")
    report_failures(timings)

    figures = []
    for t, what in ((t_ind, "independent"), (t_chain, "chained")):
        if t.ok and t_one.ok:
            extra = t.median - t_one.median
            secs = inside.get(t.label)
            shown = fmt_s(extra) + (f" (events: {fmt_s(secs)})" if secs is not None else "")
            figures.append(
                Figure(f"MCP {n} {what} calls beyond start-up", shown, "< 1 s", extra < TARGET_S)
            )
        else:
            figures.append(Figure(f"MCP {n} {what} calls", "FAILED", "< 1 s", False))
    slow = any(f.ok is False for f in figures)
    if opts.profile or (slow and t_chain.ok):
        print(f"\n-- cProfile of {n} chained MCP calls --")
        print(profile_planrun(cmd(chain)[1:], cwd=d))
    return figures


if __name__ == "__main__":
    main()

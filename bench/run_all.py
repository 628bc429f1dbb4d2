"""Run every benchmark in bench/ and print one summary of the headline figures against their targets."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_mcp  # noqa: E402
import bench_runners  # noqa: E402
import bench_state  # noqa: E402
import bench_validate  # noqa: E402
from _common import BENCH_DIR, Figure, machine_note, print_table, tail  # noqa: E402

# Scripts written by others: run as they are, output shown, not summarised.
OTHER_SCRIPTS = ("bench_loader.py", "bench_dask.py")


def run_script(name: str, timeout: float) -> Figure:
    path = BENCH_DIR / name
    if not path.exists():
        return Figure(name, "skipped (no such script)")
    print(f"\n== {name}")
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(path)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return Figure(name, f"timed out after {timeout:.0f} s", "finishes", False)
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        print(tail(proc.stderr))
        return Figure(name, f"exit {proc.returncode}", "exit 0", False)
    return Figure(name, f"ran in {time.perf_counter() - start:.1f} s (figures above)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one repetition each (rough figures)")
    parser.add_argument("--skip-others", action="store_true", help="skip bench_loader/bench_dask")
    opts = parser.parse_args(argv)
    reps = ["--reps", "1"] if opts.quick else []

    suites: list[tuple[str, Callable[[list[str]], list[Figure]]]] = [
        ("bench_validate", bench_validate.main),
        ("bench_runners", bench_runners.main),
        ("bench_state", bench_state.main),
        ("bench_mcp", bench_mcp.main),
    ]
    figures: list[Figure] = []
    started = time.perf_counter()
    for name, suite in suites:
        t0 = time.perf_counter()
        try:
            figures.extend(suite(list(reps)))
        except Exception as exc:  # one broken suite must not hide the others' figures
            traceback.print_exc()
            figures.append(Figure(name, f"crashed: {exc}", "runs", False))
        print(f"[{name} took {time.perf_counter() - t0:.0f} s]\n")
    if not opts.skip_others:
        for script in OTHER_SCRIPTS:
            figures.append(run_script(script, timeout=600))

    print(f"\n==== summary ({machine_note()}, total {time.perf_counter() - started:.0f} s)")
    print_table(
        ["figure", "measured", "target", ""],
        [[f.name, f.value, f.target, f.verdict()] for f in figures],
    )
    return 1 if any(f.ok is False for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())

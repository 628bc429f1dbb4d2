"""The remote cache: a second checkout with an empty local cache, served by nginx on 127.0.0.1.

bench_cache.py's tree (100 steps over 5,000 files). Checkout A runs cold with the remote and
uploads every entry; then, timed in turns:

  local no change     A again: every step a local hit
  second checkout     B, a copy of A's sources with no .planrun/ and no out/: every step a
                      remote hit (its local cache and outputs removed before each repetition)
  cold, no remote     B with nothing cached anywhere it looks

Then the remote unreachable, B cold each time: a refused connection, and a black hole that
takes connections and never answers (the default 5 s timeout): the time beyond `cold, no
remote` must stay within one timeout, not one per step.

Checked: every step of B is a remote hit and its outputs are byte-identical to A's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _black_hole import black_hole  # noqa: E402
from _common import (  # noqa: E402
    Timing,
    fmt_s,
    machine_note,
    planrun_cmd,
    print_table,
    report_failures,
    time_command,
    work_dir,
)
from _nginx import free_port, nginx_server  # noqa: E402
from bench_cache import FILES, STEPS, clear, make_tree, settle, write_plan  # noqa: E402

TIMEOUT_S = 5.0  # planrun's default per request


def check_second_checkout(pr: list[str], b: Path, a: Path, url: str) -> list[str]:
    clear(b, ".planrun", "out")
    run = [*pr, "run", "plan.yaml", "--output", "json", "-j", "2", "--remote-cache", url]
    proc = subprocess.run([*run, "--events", "ev.jsonl"], cwd=b, capture_output=True, text=True)
    problems = []
    doc = json.loads(proc.stdout)
    events = [json.loads(line) for line in (b / "ev.jsonl").read_text().splitlines()]
    (b / "ev.jsonl").unlink()
    remote = [e for e in events if e["event"] == "step.cached" and e.get("source") == "remote"]
    if len(remote) != STEPS or doc["status"] != "succeeded":
        problems.append(f"second checkout: {len(remote)} of {STEPS} steps remote hits")
    same = all((b / "out" / p.name).read_bytes() == p.read_bytes() for p in (a / "out").iterdir())
    if not same:
        problems.append("second checkout: outputs differ")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    pr = planrun_cmd()
    assert pr is not None
    print(f"bench_remote: {STEPS} steps x {FILES} files; nginx on 127.0.0.1; {machine_note()}")
    a = work_dir("remote-a")
    make_tree(a, STEPS, FILES)
    write_plan(a, STEPS)
    b = work_dir("remote-b")
    shutil.copytree(a / "src", b / "src")
    shutil.copy(a / "plan.yaml", b / "plan.yaml")
    settle(a / "src")
    settle(b / "src")
    base = [*pr, "run", "plan.yaml", "--quiet", "-j", "2"]
    with nginx_server(work_dir("remote-nginx")) as (url, _data):
        remote = [*base, "--remote-cache", url]
        upload = time_command("A cold, uploading", remote, cwd=a, reps=1)
        settle(a / "out")
        problems = check_second_checkout(pr, b, a, url)
        # in turns, each in its own checkout, so a change of load falls on all alike
        local = Timing("A local no change")
        second = Timing("B second checkout (remote hits)")
        cold = Timing("B cold, no remote")
        for _ in range(args.reps):
            for t, cmd, cwd, setup in (
                (local, remote, a, None),
                (second, remote, b, lambda: clear(b, ".planrun", "out")),
                (cold, base, b, lambda: clear(b, ".planrun", "out")),
            ):
                one = time_command(t.label, cmd, cwd=cwd, reps=1, setup=setup)
                t.times += one.times
                t.cpu += one.cpu
                t.error = t.error or one.error
    refused_url = f"http://127.0.0.1:{free_port()}"
    refused = time_command(
        "B cold, remote refused",
        [*base, "--remote-cache", refused_url],
        cwd=b,
        reps=max(1, args.reps // 2),
        setup=lambda: clear(b, ".planrun", "out"),
    )
    with black_hole() as (hole_url, _taken):
        hole = time_command(
            "B cold, remote never answers",
            [*base, "--remote-cache", str(hole_url)],
            cwd=b,
            reps=max(1, args.reps // 2),
            setup=lambda: clear(b, ".planrun", "out"),
        )
    all_timings = [upload, local, second, cold, refused, hole]
    print_table(
        ["run", "median", "CPU"],
        [[t.label, fmt_s(t.median), fmt_s(t.cpu_median)] for t in all_timings if t.ok],
    )
    report_failures(all_timings)
    print("checks: " + ("; ".join(problems) if problems else "all steps remote hits, identical"))
    ratio = second.median / local.median if second.ok and local.ok else float("inf")
    grow_refused = refused.median - cold.median
    grow_hole = hole.median - cold.median
    goals = [
        ("second checkout: all remote hits, identical outputs", not problems, ""),
        ("second checkout <= 2x local no change", ratio <= 2.0, f"{ratio:.2f}x"),
        (
            "second checkout far below cold",
            second.median < cold.median / 2,
            f"{second.median / cold.median:.2f}x cold",
        ),
        ("refused: grows by <= one timeout", grow_refused <= TIMEOUT_S, f"+{grow_refused:.2f} s"),
        ("black hole: grows by <= one timeout", grow_hole <= TIMEOUT_S + 1, f"+{grow_hole:.2f} s"),
    ]
    print("\ngoals:")
    print_table(
        ["goal", "", "measured"],
        [[name, "met" if ok else "NOT MET", note] for name, ok, note in goals],
    )
    return 0 if all(ok for _, ok, _ in goals) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Incremental runs: planrun's cache against go-task's `sources`/`generates` (checksum).

The same tree for both: 100 steps, each over its own folder of 50 files x 4 KB (5,000 files,
20 MB), each writing one output (`cksum` of its folder into out/dNN.txt). Timed side by side:

  cold          nothing recorded yet (.planrun/ and .task/ removed, out/ removed)
  no change     everything up to date
  one changed   one file of one folder changed (a different one each repetition; both tools
                run after the same change)

planrun and go-task are timed in turns (planrun, go-task, planrun, ...), and so are the two
planrun-only runs, so that changes in the machine's load fall on both alike.

Checked: exactly one planrun step runs after one file changes; after `rm -rf out` a
planrun run restores every output byte-identical. Then planrun alone: one step whose
`sources` are 10,000 files, no change, against a one-step plan without sources (start-up):
the difference should stay under 50 ms (stat only, nothing re-read: the stat-record file is
not rewritten by such a run). Each goal is printed with "met" or "NOT MET" at the end.

Generated files are left to settle for 2 s before they are timed: planrun does not trust
the stat of a file written within the last 2 s (it could change again within the same clock
tick) and hashes it again, which a build tree edited by hand never meets.

`--profile` prints cProfile's view of planrun's no-change run and of the 10,000-file run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
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

STEPS, FILES, SIZE = 100, 50, 4096
BIG_FILES = 10_000
BIG_TARGET_S = 0.050
RACY_S = 2.1  # planrun re-hashes files younger than 2 s (see planrun.cache.statcache)


def settle(root: Path) -> None:
    """Wait until every file under `root` is older than planrun's racy window (a condition on
    the files' own times, not a fixed sleep)."""
    newest = max(
        (max(p.stat().st_mtime, p.stat().st_ctime) for p in root.rglob("*") if p.is_file()),
        default=0.0,
    )
    while time.time() < newest + RACY_S:
        time.sleep(0.05)


def make_tree(root: Path, steps: int, files: int) -> None:
    for i in range(steps):
        d = root / "src" / f"d{i:02d}"
        d.mkdir(parents=True)
        for j in range(files):
            (d / f"f{j:02d}.txt").write_bytes(os.urandom(SIZE // 2).hex().encode())


def write_plan(root: Path, steps: int) -> None:
    lines = ["name: bench-cache", "steps:"]
    for i in range(steps):
        lines += [
            f"  - id: d{i:02d}",
            "    tool: shell",
            f'    args: {{cmd: "mkdir -p out && cksum src/d{i:02d}/* > out/d{i:02d}.txt"}}',
            f'    sources: ["src/d{i:02d}"]',
            f'    outputs: ["out/d{i:02d}.txt"]',
        ]
    (root / "plan.yaml").write_text("\n".join(lines) + "\n")


def write_taskfile(root: Path, steps: int) -> None:
    lines = ["version: '3'", "tasks:", "  default:", "    deps:"]
    lines += [f"      - d{i:02d}" for i in range(steps)]
    for i in range(steps):
        lines += [
            f"  d{i:02d}:",
            "    method: checksum",
            f"    sources: ['src/d{i:02d}/**/*']",
            f"    generates: ['out/d{i:02d}.txt']",
            "    cmds:",
            f"      - mkdir -p out && cksum src/d{i:02d}/* > out/d{i:02d}.txt",
        ]
    (root / "Taskfile.yml").write_text("\n".join(lines) + "\n")


def clear(root: Path, *names: str) -> None:
    for name in names:
        shutil.rmtree(root / name, ignore_errors=True)


def changer(root: Path) -> Callable[[], None]:
    """Each call changes one file of a different folder (so every repetition has work)."""
    count = [0]

    def change() -> None:
        count[0] += 1
        f = root / "src" / f"d{(count[0] * 7) % STEPS:02d}" / "f00.txt"
        f.write_bytes(os.urandom(SIZE // 2).hex().encode())

    return change


def compare(root: Path, reps: int) -> list[Timing]:
    pr = planrun_cmd()
    task = find_tool("task")
    assert pr is not None
    run = [*pr, "run", "plan.yaml", "--quiet", "-j", "2"]
    go = [task, "--silent", "-C", "2", "default"] if task else None
    settle(root / "src")
    timings = [
        time_command(
            "planrun cold", run, cwd=root, reps=1, setup=lambda: clear(root, ".planrun", "out")
        ),
        time_command(
            "go-task cold", go, cwd=root, reps=1, setup=lambda: clear(root, ".task", "out")
        ),
    ]
    settle(root / "out")  # the outputs both tools just wrote
    timings += interleaved(
        [("planrun no change", run, None), ("go-task no change", go, None)], root, reps
    )
    # One change before each pair of runs: each tool finds exactly that one folder changed.
    change = changer(root)
    timings += interleaved(
        [("planrun one changed", run, change), ("go-task one changed", go, None)], root, reps
    )
    return timings


def interleaved(
    commands: list[tuple[str, list[str] | None, Callable[[], None] | None]], cwd: Path, reps: int
) -> list[Timing]:
    """Time the commands in turns (A B A B ...), so that a change in the machine's load
    during the measurement falls on all of them alike."""
    out = [Timing(label) for label, _, _ in commands]
    for _ in range(reps):
        for t, (label, cmd, setup) in zip(out, commands, strict=True):
            if t.error or t.skipped:
                continue
            one = time_command(label, cmd, cwd=cwd, reps=1, setup=setup)
            t.times += one.times
            t.cpu += one.cpu
            t.error, t.skipped = one.error, one.skipped
    return out


def check_one_rerun_and_restore(root: Path) -> list[str]:
    pr = planrun_cmd()
    assert pr is not None
    base = [*pr, "run", "plan.yaml", "--output", "json", "-j", "2"]
    problems = []
    subprocess.run(base, cwd=root, capture_output=True, check=False)
    changer(root)()
    doc = json.loads(subprocess.run(base, cwd=root, capture_output=True, text=True).stdout)
    ran = [s["id"] for s in doc["steps"] if s["status"] == "succeeded"]
    if len(ran) != 1:
        problems.append(f"after one file changed, {len(ran)} steps ran: {ran[:5]}")
    saved = {p.name: p.read_bytes() for p in (root / "out").iterdir()}
    shutil.rmtree(root / "out")
    doc = json.loads(subprocess.run(base, cwd=root, capture_output=True, text=True).stdout)
    cached = sum(1 for s in doc["steps"] if s["status"] == "cached")
    restored = {p.name: p.read_bytes() for p in (root / "out").iterdir()}
    if cached != STEPS or restored != saved:
        problems.append(f"restore: {cached} cached, identical: {restored == saved}")
    return problems


def big_tree() -> Path:
    root = work_dir("cache-big")
    for k in range(BIG_FILES // 100):
        d = root / "big" / f"p{k:03d}"
        d.mkdir(parents=True)
        for j in range(100):
            (d / f"f{j:02d}.txt").write_text(f"{k}-{j}\n")
    (root / "big.yaml").write_text(
        'steps:\n  - {id: hash, tool: echo, args: {value: 1}, sources: ["big"]}\n'
    )
    (root / "bare.yaml").write_text("steps:\n  - {id: hash, tool: echo, args: {value: 1}}\n")
    return root


def big_source_set(root: Path, reps: int) -> tuple[Timing, Timing, bool]:
    """(start-up, 10,000 sources no change, whether such a run left the stat records alone)."""
    pr = planrun_cmd()
    assert pr is not None
    settle(root / "big")
    for _ in range(2):  # record the files, then remember the walk
        subprocess.run(
            [*pr, "run", "big.yaml", "--quiet"], cwd=root, check=True, capture_output=True
        )
    records = root / ".planrun" / "stat-records"
    before = records.stat()
    bare, big = interleaved(
        [
            ("1 step, no sources", [*pr, "run", "bare.yaml", "--quiet"], None),
            (
                f"1 step, {BIG_FILES:,} sources, no change",
                [*pr, "run", "big.yaml", "--quiet"],
                None,
            ),
        ],
        root,
        reps,
    )
    after = records.stat()
    untouched = (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    return bare, big, untouched


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="print cProfile's view")
    args = parser.parse_args()
    print(f"bench_cache: {STEPS} steps x {FILES} files x {SIZE // 1024} KB; {machine_note()}")
    root = work_dir("cache")
    make_tree(root, STEPS, FILES)
    write_plan(root, STEPS)
    write_taskfile(root, STEPS)
    timings = compare(root, args.reps)
    by = {t.label: t for t in timings}
    rows = []
    for what in ("cold", "no change", "one changed"):
        p, g = by[f"planrun {what}"], by[f"go-task {what}"]
        ratio = f"{p.median / g.median:.2f}x" if p.ok and g.ok else "-"
        cpu = f"{p.cpu_median / g.cpu_median:.2f}x" if p.ok and g.ok else "-"
        rows.append(
            [
                what,
                fmt_s(p.median),
                fmt_s(g.median),
                ratio,
                fmt_s(p.cpu_median),
                fmt_s(g.cpu_median),
                cpu,
            ]
        )
    print_table(
        ["run", "planrun", "go-task", "ratio", "planrun CPU", "go-task CPU", "CPU ratio"], rows
    )
    report_failures(timings)
    problems = check_one_rerun_and_restore(root)
    print(
        "checks: "
        + ("; ".join(problems) if problems else "one step re-ran; outputs restored byte-identical")
    )
    big_root = big_tree()
    bare, big, untouched = big_source_set(big_root, args.reps)
    extra = big.median - bare.median
    extra_cpu = big.cpu_median - bare.cpu_median
    print_table(
        ["run", "median", "CPU", "beyond start-up (wall / CPU)"],
        [
            [bare.label, fmt_s(bare.median), fmt_s(bare.cpu_median), ""],
            [
                big.label,
                fmt_s(big.median),
                fmt_s(big.cpu_median),
                f"{extra * 1000:.0f} ms / {extra_cpu * 1000:.0f} ms (target < {BIG_TARGET_S * 1000:.0f} ms)",
            ],
        ],
    )
    report_failures([bare, big])
    if args.profile:
        for where, plan in ((root, "plan.yaml"), (big_root, "big.yaml")):
            print(f"\n--- profile: planrun run {plan}, no change ---")
            print(profile_planrun(["run", plan, "--quiet", "-j", "2"], cwd=where, top=30))
    pn, gn = by["planrun no change"], by["go-task no change"]
    nochange = pn.median / gn.median if pn.ok and gn.ok else float("inf")
    nochange_cpu = pn.cpu_median / gn.cpu_median if pn.ok and gn.ok else float("inf")
    one_rerun = not any(p.startswith("after one file changed") for p in problems)
    restored = not any(p.startswith("restore") for p in problems)
    goals = [
        (
            "no change <= 1.0x go-task (wall)",
            nochange <= 1.0,
            f"{nochange:.2f}x wall, {nochange_cpu:.2f}x CPU",
        ),
        ("one file changed: exactly one step re-runs", one_rerun, ""),
        ("outputs restored byte-identical after rm -rf out", restored, ""),
        (
            f"{BIG_FILES:,} sources, no change: < {BIG_TARGET_S * 1000:.0f} ms beyond start-up",
            big.ok and bare.ok and extra < BIG_TARGET_S,
            f"{extra * 1000:.0f} ms wall, {extra_cpu * 1000:.0f} ms CPU",
        ),
        ("... stat only, nothing re-read (stat records not rewritten)", untouched, ""),
    ]
    print("\ngoals:")
    print_table(["goal", "", "measured"], [[name, verdict(ok), note] for name, ok, note in goals])
    return 0 if all(ok for _, ok, _ in goals) else 1


if __name__ == "__main__":
    sys.exit(main())

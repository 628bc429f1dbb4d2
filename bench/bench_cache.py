"""Incremental runs: planrun's cache against go-task's `sources`/`generates` (checksum).

The same tree for both: 100 steps, each over its own folder of 50 files x 4 KB (5,000 files,
20 MB), each writing one output (`cksum` of its folder into out/dNN.txt). Timed side by side:

  cold          nothing recorded yet (.planrun/ and .task/ removed, out/ removed)
  no change     everything up to date
  one changed   one file of one folder changed (a different one each repetition)

Checked: exactly one planrun step runs after one file changes; after `rm -rf out` a
planrun run restores every output byte-identical. Then planrun alone: one step whose
`sources` are 10,000 files, no change, against a one-step plan without sources (start-up):
the difference should stay under 50 ms (stat only, nothing re-read).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Timing,
    find_tool,
    fmt_s,
    machine_note,
    planrun_cmd,
    print_table,
    report_failures,
    time_command,
    work_dir,
)

STEPS, FILES, SIZE = 100, 50, 4096
BIG_FILES = 10_000
BIG_TARGET_S = 0.050


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


def changer(root: Path) -> object:
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
    timings = [
        time_command(
            "planrun cold", run, cwd=root, reps=1, setup=lambda: clear(root, ".planrun", "out")
        ),
        time_command(
            "go-task cold", go, cwd=root, reps=1, setup=lambda: clear(root, ".task", "out")
        ),
        time_command("planrun no change", run, cwd=root, reps=reps),
        time_command("go-task no change", go, cwd=root, reps=reps),
    ]
    change = changer(root)
    timings.append(time_command("planrun one changed", run, cwd=root, reps=reps, setup=change))  # type: ignore[arg-type]
    timings.append(time_command("go-task one changed", go, cwd=root, reps=reps, setup=change))  # type: ignore[arg-type]
    return timings


def check_one_rerun_and_restore(root: Path) -> list[str]:
    pr = planrun_cmd()
    assert pr is not None
    base = [*pr, "run", "plan.yaml", "--output", "json", "-j", "2"]
    problems = []
    subprocess.run(base, cwd=root, capture_output=True, check=False)
    changer(root)()  # type: ignore[operator]
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


def big_source_set(reps: int) -> tuple[Timing, Timing]:
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
    pr = planrun_cmd()
    assert pr is not None
    for _ in range(2):  # record, then trust the stat records (files older than the racy window)
        subprocess.run([*pr, "run", "big.yaml", "--quiet"], cwd=root, check=True)
    old = 1_000_000_000
    for p in (root / "big").rglob("*.txt"):
        os.utime(p, (old, old))
    subprocess.run([*pr, "run", "big.yaml", "--quiet"], cwd=root, check=True)
    bare = time_command(
        "1 step, no sources", [*pr, "run", "bare.yaml", "--quiet"], cwd=root, reps=reps
    )
    big = time_command(
        f"1 step, {BIG_FILES:,} sources, no change",
        [*pr, "run", "big.yaml", "--quiet"],
        cwd=root,
        reps=reps,
    )
    return bare, big


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
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
    bare, big = big_source_set(args.reps)
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
    nochange = by["planrun no change"].median / by["go-task no change"].median
    ok = not problems and extra < BIG_TARGET_S and nochange <= 1.0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

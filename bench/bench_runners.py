"""Compare planrun with make, go-task, just and doit on the same shell work, in one run.

Scenarios (each tool's own way of running a shell command per step: planrun and just start
`/bin/sh -c CMD`, make execs a plain command without a shell, go-task's built-in shell runs
`true` in-process without starting anything):

  s) start-up: a one-step `true` plan, start to finish, with `.planrun/` present (its plan
     cache warm) and in a fresh checkout (no `.planrun/`: deleted before each run, as in CI);
     `planrun --help` and `planrun validate` of a 5-step plan, now and with the code of a
     baseline revision
  a) 1,000 independent `true` steps at -j 2
  p) 1,000 independent `/bin/true` steps at -j 2: a real process per step (no goal)
  b) a chain of 200 `true` steps
  c) layers 1-8-8-8-8-1 of `sleep 0.2`, each step depending on the whole
     previous layer, at -j 4 (best possible: 6 x 0.2 = 1.2 s... of sleeping,
     but 8 steps on 4 slots take two rounds: 0.2 + 4 x 0.4 + 0.2 = 2.0 s)
  d) dry run of the 1,000-step plan (each tool's nearest equivalent)
  e) planrun's own per-step overhead: 10,000 independent `echo` steps with
     --events on, (total - start-up) / 10,000

At the end, every goal of issue 15 is printed with its figure and whether it is met, by wall
time (what the goals say) and by CPU time (steadier on a shared machine). Byte-code caches
are on (PYTHONDONTWRITEBYTECODE is dropped for the children) and warmed before timing, and
so is planrun's plan cache (one untimed `planrun validate` of each plan): what a user's
second call of the same plan finds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    OUT_DIR,
    Figure,
    Timing,
    find_tool,
    fmt_s,
    machine_note,
    planrun_cmd,
    print_table,
    profile_planrun,
    report_failures,
    tail,
    time_command,
    work_dir,
)

STEP_OVERHEAD_TARGET_US = 100.0
NO_LIMIT = float("nan")  # a Goal row that is a reference figure, not a goal


@dataclass(frozen=True)
class Graph:
    """A step graph in tool-neutral form: ordered ids, each with its command and dependencies."""

    name: str
    steps: list[tuple[str, str, list[str]]]  # (id, shell command, depends_on)
    jobs: int


def independent(n: int, jobs: int) -> Graph:
    return Graph(f"independent-{n}", [(f"s{i}", "true", []) for i in range(n)], jobs)


def chain(n: int) -> Graph:
    steps = [(f"s{i}", "true", [f"s{i - 1}"] if i else []) for i in range(n)]
    return Graph(f"chain-{n}", steps, 2)


def layers(widths: list[int], cmd: str, jobs: int) -> Graph:
    steps: list[tuple[str, str, list[str]]] = []
    previous: list[str] = []
    for k, width in enumerate(widths):
        current = [f"l{k}_{i}" for i in range(width)]
        steps.extend((sid, cmd, list(previous)) for sid in current)
        previous = current
    return Graph("layers-" + "-".join(map(str, widths)), steps, jobs)


def sinks(graph: Graph) -> list[str]:
    """Steps nothing depends on: the targets an 'all' rule must name."""
    used = {d for _, _, deps in graph.steps for d in deps}
    return [sid for sid, _, _ in graph.steps if sid not in used]


# --- generators: one file per tool, written into the scenario's directory ----


def write_planrun(graph: Graph, d: Path) -> Path:
    lines = [f"name: {graph.name}", "steps:"]
    for sid, cmd, deps in graph.steps:
        lines.append(f"  - id: {sid}")
        lines.append("    tool: shell")
        lines.append(f"    args: {{cmd: {json.dumps(cmd)}}}")
        if deps:
            lines.append(f"    depends_on: [{', '.join(deps)}]")
    path = d / "plan.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_make(graph: Graph, d: Path) -> Path:
    ids = [sid for sid, _, _ in graph.steps]
    lines = [f".PHONY: all {' '.join(ids)}", f"all: {' '.join(sinks(graph))}", ""]
    for sid, cmd, deps in graph.steps:
        lines.append(f"{sid}: {' '.join(deps)}".rstrip())
        lines.append(f"\t@{cmd}")
    path = d / "Makefile"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_task(graph: Graph, d: Path) -> Path:
    # run: once — otherwise go-task re-runs a shared dependency for every dependent.
    lines = [
        "version: '3'",
        "run: once",
        "tasks:",
        "  all:",
        f"    deps: {json.dumps(sinks(graph))}",
    ]
    for sid, cmd, deps in graph.steps:
        lines.append(f"  {sid}:")
        if deps:
            lines.append(f"    deps: {json.dumps(deps)}")
        lines.append(f"    cmds: [{json.dumps(cmd)}]")
    path = d / "Taskfile.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_just(graph: Graph, d: Path) -> Path:
    # [parallel] runs a recipe's dependencies concurrently (just >= 1.42), --jobs caps them.
    lines = ["set quiet", "", "[parallel]", f"all: {' '.join(sinks(graph))}", ""]
    for sid, cmd, deps in graph.steps:
        if len(deps) > 1:
            lines.append("[parallel]")
        lines.append(f"{sid}: {' '.join(deps)}".rstrip())
        lines.append(f"    {cmd}")
        lines.append("")
    path = d / "justfile"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_doit(graph: Graph, d: Path) -> Path:
    spec = [(sid, cmd, deps) for sid, cmd, deps in graph.steps]
    src = f'''"""Generated by bench_runners.py."""

DOIT_CONFIG = {{"dep_file": ".doit.db", "verbosity": 0, "default_tasks": ["all"]}}
SPEC = {spec!r}


def task_all():
    return {{"actions": None, "task_dep": {sinks(graph)!r}}}


def task_gen():
    for sid, cmd, deps in SPEC:
        # No file_dep/targets: doit treats the task as never up to date, so it always runs.
        yield {{"basename": sid, "actions": [cmd], "task_dep": deps, "verbosity": 0}}
'''
    path = d / "dodo.py"
    path.write_text(src)
    return path


def write_all(graph: Graph) -> Path:
    d = work_dir(graph.name)
    for write in (write_planrun, write_make, write_task, write_just, write_doit):
        write(graph, d)
    return d


# --- commands ------------------------------------------------------------


def clear_state(d: Path) -> Callable[[], None]:
    """Before each repetition: no run state (a fresh run, not a resume). The plan cache in
    `.planrun/plans` stays, as it does for a user running a plan again."""

    def setup() -> None:
        shutil.rmtree(d / ".planrun" / "state", ignore_errors=True)

    return setup


def fresh_checkout(d: Path) -> Callable[[], None]:
    """Before each repetition: no `.planrun/` at all, as in a fresh checkout (every CI run): no
    plan cache, so the plan is read and checked; no state."""

    def setup() -> None:
        shutil.rmtree(d / ".planrun", ignore_errors=True)

    return setup


def warm_plan_cache(d: Path, *plans: str) -> None:
    """One untimed `planrun validate` of each plan: planrun's plan cache (`.planrun/plans/`)
    then holds it, as it does from the second call on for a user, like byte-code caches."""
    planrun = planrun_cmd()
    assert planrun is not None
    for plan in plans:
        subprocess.run([*planrun, "validate", plan], cwd=d, capture_output=True, timeout=300)


def run_rows(graph: Graph, d: Path, reps: int) -> list[Timing]:
    """Time every tool on one generated scenario."""
    planrun = planrun_cmd()
    assert planrun is not None
    warm_plan_cache(d, "plan.yaml")
    make, task, just, doit = (find_tool(n) for n in ("make", "task", "just", "doit"))
    j = str(graph.jobs)
    base = [*planrun, "run", "plan.yaml", "-j", j, "--quiet"]
    return [
        time_command("planrun --no-state", [*base, "--no-state"], cwd=d, reps=reps),
        time_command("planrun (state)", base, cwd=d, reps=reps, setup=clear_state(d)),
        time_command("make -j", make and [make, "-s", "-j", j, "all"], cwd=d, reps=reps),
        time_command("go-task -C", task and [task, "--silent", "-C", j, "all"], cwd=d, reps=reps),
        time_command("just --jobs", just and [just, "--jobs", j, "all"], cwd=d, reps=reps),
        time_command("doit -n", doit and [doit, "-n", j, "all"], cwd=d, reps=reps),
    ]


def dry_rows(d: Path, reps: int) -> list[Timing]:
    planrun = planrun_cmd()
    assert planrun is not None
    warm_plan_cache(d, "plan.yaml")
    make, task, just, doit = (find_tool(n) for n in ("make", "task", "just", "doit"))
    return [
        time_command(
            "planrun --dry-run", [*planrun, "run", "plan.yaml", "--dry-run"], cwd=d, reps=reps
        ),
        time_command(
            "planrun --dry-run --output json",
            [*planrun, "run", "plan.yaml", "--dry-run", "--output", "json"],
            cwd=d,
            reps=reps,
        ),
        time_command("make -n", make and [make, "-n", "all"], cwd=d, reps=reps),
        time_command("go-task --dry", task and [task, "--dry", "all"], cwd=d, reps=reps),
        time_command("just --dry-run", just and [just, "--dry-run", "all"], cwd=d, reps=reps),
        time_command(
            "doit list (not a dry run)", doit and [doit, "list", "--all"], cwd=d, reps=reps
        ),
    ]


def print_rows(title: str, timings: list[Timing], best: float | None = None) -> None:
    print(f"\n-- {title} --")
    ref = next((t for t in timings if t.ok and t.label.startswith("planrun")), None)
    rows = []
    for t in timings:
        if not t.ok:
            rows.append([t.label, t.skipped or "FAILED", "", "", ""])
            continue
        ratio = f"{t.median / ref.median:.2f}x" if ref else "-"
        rows.append([t.label, fmt_s(t.median), fmt_s(t.cpu_median), f"n={len(t.times)}", ratio])
    print_table(["tool", "wall", "cpu", "runs", "vs planrun"], rows)
    if best is not None:
        print(f"(best possible: {best:.1f} s)")
    report_failures(timings)


def write_echo_plan(d: Path, n: int) -> Path:
    lines = [f"name: echo-{n}", "steps:"]
    for i in range(n):
        lines += [f"  - id: e{i}", "    tool: echo", f"    args: {{value: {i}}}"]
    path = d / f"echo-{n}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def step_overhead(reps: int, profile: bool, timeout: float) -> tuple[Timing, Timing, int, float]:
    """N independent echo steps with --events on vs a 1-step plan: µs per step.

    N is 10,000; if that run exceeds `timeout`, 1,000 is measured instead (and said so),
    so a slow planrun still yields a figure without blowing the time budget.
    """
    d = work_dir("echo")
    one = write_echo_plan(d, 1)
    planrun = planrun_cmd()
    assert planrun is not None

    def args(plan: Path) -> list[str]:
        return ["run", plan.name, "--quiet", "--no-state", "--events", "events.jsonl"]

    def clean() -> None:
        (d / "events.jsonl").unlink(missing_ok=True)

    warm_plan_cache(d, one.name)
    t_one = time_command("1-step echo plan", [*planrun, *args(one)], cwd=d, reps=reps, setup=clean)
    n = 10_000
    big = write_echo_plan(d, n)
    warm_plan_cache(d, big.name)
    t_big = time_command(
        f"{n:,} echo steps", [*planrun, *args(big)], cwd=d, reps=reps, setup=clean, timeout=timeout
    )
    if t_big.error and t_big.error.startswith("timed out"):
        print(f"(10,000 echo steps timed out after {timeout:.0f} s; measuring 1,000 instead)")
        n = 1_000
        big = write_echo_plan(d, n)
        t_big = time_command(
            f"{n:,} echo steps", [*planrun, *args(big)], cwd=d, reps=reps, setup=clean
        )
    per_step = (t_big.median - t_one.median) / n * 1e6 if t_one.ok and t_big.ok else float("nan")
    if profile or (per_step == per_step and per_step >= STEP_OVERHEAD_TARGET_US):
        # A slow miss is profiled at 2,000 steps (enough to show anything quadratic) unless
        # --profile asks for the full size: a profiled 10,000-step run can then take minutes.
        if not profile and n > 2_000 and t_big.median > 10:
            big = write_echo_plan(d, 2_000)
        clean()
        print(f"\n-- cProfile of {big.stem} (--no-state --events) --")
        print(profile_planrun(args(big), cwd=d))
    return t_one, t_big, n, per_step


BASELINE_REV = "16ffb00"  # main before this session's start-up work (issue 15): "today's time"


def baseline_tree(rev: str) -> Path | None:
    """planrun's package at `rev`, exported once under bench/out/ (None when git cannot)."""
    root = Path(__file__).resolve().parent.parent
    dest = OUT_DIR / f"baseline-{rev}"
    if (dest / "planrun" / "__init__.py").exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    try:
        archive = subprocess.run(
            ["git", "-C", str(root), "archive", rev, "planrun"], capture_output=True, timeout=60
        )
        if archive.returncode != 0:
            return None
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return dest


def cli_startup(d: Path, reps: int, baseline: Path | None, rev: str) -> list[Timing]:
    """`planrun --help` and `planrun validate` of a 5-step chain: what every call costs, now
    and (same run, same machine) with the baseline tree's code."""
    planrun = planrun_cmd()
    assert planrun is not None
    five = d / "five.yaml"
    write_planrun(Graph("five", chain(5).steps, 1), d).rename(five)
    write_planrun(independent(1, 1), d)  # plan.yaml back to the one-step plan
    trees: list[tuple[str, dict[str, str] | None]] = [("", None)]
    if baseline is not None:
        trees.append((f" [{rev}]", {**os.environ, "PYTHONPATH": str(baseline)}))
    warm_plan_cache(d, five.name)
    rows = []
    for args, label in (([], "--help"), (["validate", five.name], "validate (5 steps)")):
        for suffix, env in trees:
            argv = [*planrun, *(args or ["--help"])]
            rows.append(time_command(f"planrun {label}{suffix}", argv, cwd=d, reps=reps, env=env))
    print_rows("s) start-up: --help and validate", rows)
    if baseline is None:
        print(f"(baseline {rev} not available: no ratio to today's code)")
    return rows


def imported_modules(argv: list[str], *, cwd: Path) -> list[str]:
    """The modules `planrun ARGV...` imports (interpreter start-up's own included), each
    before the modules it imports, read from `python -X importtime`."""
    cmd = [sys.executable, "-X", "importtime", "-m", "planrun", *argv]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    # importtime prints a module when its import ends, indented by depth: its imports come
    # first. Importing in that order would start a module inside a cycle (genericpath before
    # os) where the run never does; so each subtree is put back parents first.
    subtrees: list[tuple[int, list[str]]] = []  # (depth, its modules parents first)
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        column = line.rsplit("|", 1)[1]
        name, depth = column.strip(), len(column) - len(column.lstrip())
        if name == "imported package":
            continue
        below: list[str] = []
        while subtrees and subtrees[-1][0] > depth:
            below[:0] = subtrees.pop()[1]
        subtrees.append((depth, [name, *below]))
    return [name for _, names in subtrees for name in names]


FLOOR_SCRIPT = """import importlib
for name in {names!r}:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
"""


def floor_rows(d: Path, argv: list[str], reps: int) -> list[Timing]:
    """What no planrun can go below: the interpreter, and the interpreter importing every
    module a warm run of `argv` imports (the standard library, click), planrun's own left
    out. The list is taken from `-X importtime` of a warm run now, so it follows the code."""
    clear_state(d)()
    names = imported_modules(argv, cwd=d)
    others = [n for n in names if n != "planrun" and not n.startswith("planrun.")]
    script = d / "floor.py"
    script.write_text(FLOOR_SCRIPT.format(names=others))
    label = f"floor: the {len(others)} modules a warm run imports, planrun's own excluded"
    return [
        time_command(label, [sys.executable, script.name], cwd=d, reps=reps),
        time_command("floor: python -c pass", [sys.executable, "-c", "pass"], cwd=d, reps=reps),
    ]


def verify() -> bool:
    """Check every tool really runs every step once, in dependency order (small graphs)."""
    planrun = planrun_cmd()
    assert planrun is not None
    all_ok = True
    for g in (independent(50, 2), chain(20), layers([1, 3, 3, 1], "true", 4)):
        steps = [(sid, f"echo {sid} >> log.txt", deps) for sid, _, deps in g.steps]
        g2 = Graph(g.name + "-verify", steps, g.jobs)
        d = write_all(g2)
        j = str(g.jobs)
        tools = {
            "planrun": [*planrun, "run", "plan.yaml", "-j", j, "--quiet", "--no-state"],
            "make": (m := find_tool("make")) and [m, "-s", "-j", j, "all"],
            "go-task": (t := find_tool("task")) and [t, "--silent", "-C", j, "all"],
            "just": (ju := find_tool("just")) and [ju, "--jobs", j, "all"],
            "doit": (do := find_tool("doit")) and [do, "-n", j, "all"],
        }
        for name, cmd in tools.items():
            if not cmd:
                print(f"verify {g.name} {name}: skipped (not installed)")
                continue
            (d / "log.txt").unlink(missing_ok=True)
            proc = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=120)
            log = d / "log.txt"
            ran = log.read_text().split() if log.exists() else []
            pos = {sid: i for i, sid in enumerate(ran)}
            late = [s for s, _, deps in steps for x in deps if pos.get(x, -1) > pos.get(s, 1 << 30)]
            ok = proc.returncode == 0 and sorted(ran) == sorted(s for s, _, _ in steps) and not late
            all_ok &= ok
            print(f"verify {g.name} {name}: {'ok' if ok else 'WRONG'}", end="")
            print(
                "" if ok else f" (exit {proc.returncode}, ran {len(ran)}, out of order {late[:3]})"
            )
            if proc.returncode:
                print(tail(proc.stderr))
    return all_ok


@dataclass
class Goal:
    """One goal of issue 15: planrun's figure against a reference, met or not (wall and CPU)."""

    name: str
    target: str
    wall: float  # planrun's figure divided by the reference (or the figure, for absolute goals)
    cpu: float
    limit: float
    shown: str

    @property
    def met(self) -> bool:
        return self.wall == self.wall and self.wall <= self.limit

    @property
    def met_cpu(self) -> bool:
        return self.cpu == self.cpu and self.cpu <= self.limit

    @property
    def ok(self) -> bool | None:
        """Met or not; None for a reference row (no limit)."""
        return None if self.limit != self.limit else self.met

    def verdict(self, met: bool) -> str:
        return "-" if self.ok is None else "met" if met else "NOT met"


def ratio_goal(name: str, target: str, ours: Timing, ref: Timing | None, limit: float) -> Goal:
    """planrun / reference, wall and CPU; not met when either could not be measured."""
    if ref is None or not ours.ok or not ref.ok:
        return Goal(name, target, float("nan"), float("nan"), limit, "not measured")
    wall, cpu = ours.median / ref.median, ours.cpu_median / ref.cpu_median
    shown = (
        f"{fmt_s(ours.median)} / {fmt_s(ref.median)} = {wall:.2f}x "
        f"(CPU {fmt_s(ours.cpu_median)} / {fmt_s(ref.cpu_median)} = {cpu:.2f}x)"
    )
    return Goal(name, target, wall, cpu, limit, shown)


def find(timings: list[Timing], prefix: str) -> Timing | None:
    return next((t for t in timings if t.label.startswith(prefix)), None)


def print_goals(goals: list[Goal]) -> None:
    print(f"\n==== issue 15 goals ({machine_note()})")
    rows = [
        [
            g.name,
            g.target,
            g.shown,
            g.verdict(g.met),
            g.verdict(g.met_cpu),
        ]
        for g in goals
    ]
    print_table(["goal", "target", "measured", "wall", "by CPU"], rows)
    print("(the goals are wall times; on a busy machine the CPU column is the steadier one)")


def warm_up() -> None:
    """One untimed run of each planrun path, so byte-code caches exist before any timing."""
    planrun = planrun_cmd()
    assert planrun is not None
    d = write_all(independent(3, 1))
    for args in (["run", "plan.yaml", "--no-state", "-q"], ["run", "plan.yaml", "--dry-run"]):
        subprocess.run([*planrun, *args], cwd=d, capture_output=True, timeout=120)
    subprocess.run([*planrun, "validate", "plan.yaml"], cwd=d, capture_output=True, timeout=120)


def main(argv: list[str] | None = None) -> list[Figure]:
    parser = argparse.ArgumentParser(description="planrun vs make/go-task/just/doit")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", choices=list("sapbcde"), action="append", help="scenarios")
    parser.add_argument("--profile", action="store_true", help="cProfile planrun in scenario e")
    parser.add_argument("--e-timeout", type=float, default=30.0, help="seconds for the 10k run")
    parser.add_argument("--verify", action="store_true", help="only check each tool runs all steps")
    parser.add_argument("--baseline", default=BASELINE_REV, help="git revision for `--help` 0.5x")
    opts = parser.parse_args(argv)
    # Byte-code caches on, as users have them: a child without them recompiles every module.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if opts.verify:
        ok = verify()
        return [Figure("runners verified", "ok" if ok else "WRONG", "all tools correct", ok)]
    which = set(opts.only or "sapbcde")
    print(f"== bench_runners ({machine_note()})")
    for name in ("planrun", "make", "task", "just", "doit"):
        print(f"   {name}: {find_tool(name) or 'not installed'}")
    code = "import planrun, os; print(os.path.dirname(planrun.__file__))"
    where = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    print(f"   planrun's code: {where.strip()}")
    warm_up()
    figures: list[Figure] = []
    goals = run_scenarios(which, opts, figures)
    if goals:
        print_goals(goals)
        figures += [Figure(f"goal {g.name}", g.shown, g.target, g.ok) for g in goals]
    return figures


def run_scenarios(which: set[str], opts: argparse.Namespace, figures: list[Figure]) -> list[Goal]:
    """Every scenario asked for, its table printed; the goals they measure."""
    goals: list[Goal] = []

    def ratio_figure(label: str, timings: list[Timing]) -> None:
        """One summary line: planrun's median, then each other tool's median and its ratio."""
        ref = timings[0]
        parts = [f"planrun {fmt_s(ref.median)}" if ref.ok else "planrun FAILED"]
        for t in timings[2:]:
            name = t.label.split()[0]
            if t.ok and ref.ok:
                parts.append(f"{name} {fmt_s(t.median)} ({t.median / ref.median:.2f}x)")
            elif not t.ok:
                parts.append(f"{name} {'skipped' if t.skipped else 'FAILED'}")
        figures.append(Figure(label, ", ".join(parts)))

    if "s" in which:
        goals += scenario_s(opts, ratio_figure)
    if "a" in which or "d" in which:
        g = independent(1000, 2)
        d = write_all(g)
        if "a" in which:
            ta = run_rows(g, d, opts.reps)
            print_rows("a) 1,000 independent `true` steps, -j 2", ta)
            ratio_figure("a) 1000 independent, -j2", ta)
            goals.append(
                ratio_goal(
                    "a) 1,000 × true, -j 2", "≤ 0.8× go-task", ta[0], find(ta, "go-task"), 0.8
                )
            )
        if "d" in which:
            td = dry_rows(d, opts.reps)
            print_rows("d) dry run of the 1,000-step plan", td)
            print(
                "(make -n / just --dry-run / go-task --dry print the commands; planrun also\n"
                " validates and prints waves with resolved args; doit has no dry run: `list`\n"
                " only loads dodo.py and lists task names)"
            )
            ratio_figure("d) dry run, 1000 steps", td[:1] + [td[0]] + td[2:])
            goals.append(
                ratio_goal(
                    "d) dry run, 1,000 steps",
                    "≤ 0.8× go-task --dry",
                    td[0],
                    find(td, "go-task"),
                    0.8,
                )
            )
    if "p" in which:
        # Not a goal: a program every tool has to start (go-task's shell runs `true` itself).
        g = Graph("process-1000", [(f"s{i}", "/bin/true", []) for i in range(1000)], 2)
        d = write_all(g)
        tp = run_rows(g, d, opts.reps)
        print_rows("p) 1,000 independent `/bin/true` steps (a process per step), -j 2", tp)
        ratio_figure("p) 1000 × /bin/true, -j2", tp)
    if "b" in which:
        g = chain(200)
        d = write_all(g)
        tb = run_rows(g, d, opts.reps)
        print_rows("b) chain of 200 `true` steps", tb)
        ratio_figure("b) chain of 200", tb)
    if "c" in which:
        g = layers([1, 8, 8, 8, 8, 1], "sleep 0.2", 4)
        d = write_all(g)
        tc = run_rows(g, d, opts.reps)
        print_rows("c) layers 1-8-8-8-8-1 of `sleep 0.2`, -j 4", tc, best=2.0)
        ratio_figure("c) layers 1-8-8-8-8-1, -j4 (best 2.0 s)", tc)
        bound = Timing("the 2.0 s bound", [2.0], [2.0])
        goal = ratio_goal("c) layers of sleep 0.2, -j 4", "wall ≤ 1.05× 2.0 s", tc[0], bound, 1.05)
        goal.cpu, goal.shown = float("nan"), f"{fmt_s(tc[0].median)} = {goal.wall:.2f}x 2.0 s"
        goals.append(goal)
    if "e" in which:
        goals.append(scenario_e(opts, figures))
    return goals


def scenario_s(
    opts: argparse.Namespace, ratio_figure: Callable[[str, list[Timing]], None]
) -> list[Goal]:
    g = independent(1, 1)
    d = write_all(g)
    ts = run_rows(g, d, opts.reps)
    planrun = planrun_cmd()
    assert planrun is not None
    argv = [*planrun, "run", "plan.yaml", "-j", "1", "--quiet"]
    fresh = time_command(
        "planrun fresh checkout", argv, cwd=d, reps=opts.reps, setup=fresh_checkout(d)
    )
    floor = floor_rows(d, argv[len(planrun) :], opts.reps)
    print_rows("s) start-up: a one-step `true` plan", [*ts, fresh, *floor])
    ratio_figure("s) one-step plan", ts)
    go_task, doit = find(ts, "go-task"), find(ts, "doit")
    with_state = find(ts, "planrun (state)") or ts[0]
    goals = [
        ratio_goal("s) one-step plan, fresh checkout", "≤ 1.5× go-task", fresh, go_task, 1.5),
        ratio_goal(
            "s) one-step plan, .planrun/ present", "≤ 1.2× go-task", with_state, go_task, 1.2
        ),
        *(ratio_goal(f"s) {t.label}", "(reference: no goal)", t, go_task, NO_LIMIT) for t in floor),
        ratio_goal("s) one-step plan vs doit", "< 1× doit", ts[0], doit, 0.999),
    ]
    baseline = baseline_tree(opts.baseline)
    rows = cli_startup(d, opts.reps, baseline, opts.baseline)
    for what in ("--help", "validate (5 steps)"):
        now, before = find(rows, f"planrun {what}"), find(rows, f"planrun {what} [")
        if now is not None:
            goals.append(
                ratio_goal(f"`planrun {what}`", f"≤ 0.5× {opts.baseline}", now, before, 0.5)
            )
    return goals


def scenario_e(opts: argparse.Namespace, figures: list[Figure]) -> Goal:
    t_one, t_big, n, per_step = step_overhead(opts.reps, opts.profile, opts.e_timeout)
    print(f"\n-- e) planrun per-step overhead: {n:,} independent echo steps, --events on --")
    rows = [
        [t.label, fmt_s(t.median) if t.ok else "FAILED", fmt_s(t.cpu_median), f"n={len(t.times)}"]
        for t in (t_one, t_big)
    ]
    print_table(["run", "wall", "cpu", "runs"], rows)
    per_cpu = (
        (t_big.cpu_median - t_one.cpu_median) / n * 1e6 if t_big.ok and t_one.ok else float("nan")
    )
    ok = per_step == per_step and per_step < STEP_OVERHEAD_TARGET_US
    shown = f"{per_step:.0f} µs" if per_step == per_step else "n/a"
    print(
        f"per step: {shown} wall, {per_cpu:.0f} µs CPU (target < {STEP_OVERHEAD_TARGET_US:.0f} µs)"
    )
    report_failures([t_one, t_big])
    label = "e) per-step overhead" + ("" if n == 10_000 else f" (at {n:,} steps)")
    figures.append(Figure(label, shown, "< 100 µs", ok))
    limit = STEP_OVERHEAD_TARGET_US
    return Goal(
        label, "< 100 µs a step", per_step, per_cpu, limit, f"{shown} wall, {per_cpu:.0f} µs CPU"
    )


if __name__ == "__main__":
    main()

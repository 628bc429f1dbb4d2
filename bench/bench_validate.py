"""Time `planrun validate` on a generated 10,000-step plan and `planrun --help` (start-up)."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
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
    run_capture,
    tail,
    time_command,
    work_dir,
)

VALIDATE_TARGET_S = 1.0
HELP_TARGET_S = 0.150


def make_plan(n_steps: int, seed: int = 1234) -> dict[str, object]:
    """A random DAG: ~2 depends_on per step on earlier steps, a `${...}` in most steps.

    Every step is an `echo` that binds `v<i>` to `{x: ..., i: <i>}`, so
    `${v<j>.x}` is a valid reference to an earlier step's result (a data-flow
    edge). Mix: ~65% plain result refs, ~15% plan-variable templates, ~5%
    Jinja expressions (`${n + 1}`, filters), ~15% constants.
    """
    rng = random.Random(seed)
    steps: list[dict[str, object]] = []
    for i in range(n_steps):
        deps: list[str] = []
        if i > 0:
            k = min(i, rng.choice((1, 2, 2, 2, 3)))
            deps = [f"s{j}" for j in sorted(rng.sample(range(i), k))] if i > 3 else [f"s{i - 1}"]
        roll = rng.random()
        x: object
        if i == 0 or roll < 0.15:
            x = f"constant {i}"
        elif roll < 0.80:
            x = f"${{v{rng.randrange(i)}.x}}"
        elif roll < 0.95:
            x = f"item ${{base}}-{i} on ${{api.host}}"
        else:
            x = rng.choice(
                (
                    "${n + 1}",
                    f"${{v{rng.randrange(i)}.i * 2}}",
                    "${base | upper}",
                    f"${{v{rng.randrange(i)}.x | default('none')}}",
                )
            )
        steps.append(
            {
                "id": f"s{i}",
                "title": f"Step {i}",
                "tool": "echo",
                "args": {"value": {"x": x, "i": i}},
                "depends_on": deps,
                "result_variable": f"v{i}",
            }
        )
    return {
        "version": 1,
        "name": "bench-validate",
        "variables": {"n": 41, "base": "alpha", "api": {"host": "api.example.com"}},
        "steps": steps,
    }


def to_yaml(plan: dict[str, object]) -> str:
    """Block-style YAML as a person writes it, flow style for small values (JSON is valid YAML)."""
    lines = ["version: 1", f"name: {plan['name']}", "variables:"]
    for key, value in plan["variables"].items():  # type: ignore[attr-defined]
        lines.append(f"  {key}: {json.dumps(value)}")
    lines.append("steps:")
    for step in plan["steps"]:  # type: ignore[attr-defined]
        lines.append(f"  - id: {step['id']}")
        lines.append(f"    title: {step['title']}")
        lines.append(f"    tool: {step['tool']}")
        lines.append("    args:")
        lines.append("      value:")
        lines.append(f"        x: {json.dumps(step['args']['value']['x'])}")
        lines.append(f"        i: {step['args']['value']['i']}")
        lines.append(f"    depends_on: [{', '.join(step['depends_on'])}]")
        lines.append(f"    result_variable: {step['result_variable']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> list[Figure]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--help-reps", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="cProfile one validate run")
    opts = parser.parse_args(argv)

    planrun = planrun_cmd()
    assert planrun is not None
    wd = work_dir("validate")
    plan = make_plan(opts.steps)
    yaml_path = wd / "plan.yaml"
    json_path = wd / "plan.json"
    yaml_path.write_text(to_yaml(plan))
    json_path.write_text(json.dumps(plan))
    print(f"== bench_validate: {opts.steps} steps, files in {wd}")

    # One checked run first: a benchmark of a failing validate means nothing.
    check = run_capture([*planrun, "validate", str(yaml_path)], cwd=wd)
    if check.returncode != 0:
        print(f"planrun validate failed (exit {check.returncode}):")
        print(tail(check.stdout + "\n" + check.stderr, 20))

    t_yaml = time_command(
        f"validate {opts.steps} steps (YAML)",
        [*planrun, "validate", str(yaml_path)],
        cwd=wd,
        reps=opts.reps,
    )
    t_json = time_command(
        f"validate {opts.steps} steps (JSON)",
        [*planrun, "validate", str(json_path)],
        cwd=wd,
        reps=opts.reps,
    )
    # The same without planrun's plan cache: the checks themselves, as a changed plan gets them.
    cold_env = {**os.environ, "PLANRUN_NO_PLAN_CACHE": "1"}
    t_yaml_cold, t_json_cold = (
        time_command(
            f"validate {opts.steps} steps ({kind}, no plan cache)",
            [*planrun, "validate", str(path)],
            cwd=wd,
            reps=opts.reps,
            env=cold_env,
        )
        for kind, path in (("YAML", yaml_path), ("JSON", json_path))
    )
    t_help = time_command("planrun --help", [*planrun, "--help"], cwd=wd, reps=opts.help_reps)
    on_path = shutil.which("planrun")
    t_shim = None
    if on_path and on_path != planrun[0]:
        # What a user typing `planrun` gets when PATH holds a wrapper (pyenv shim): informational.
        t_shim = time_command(
            "planrun --help via PATH (shim)", [on_path, "--help"], cwd=wd, reps=opts.help_reps
        )
    t_python = time_command(
        "python -c pass (floor)", [sys.executable, "-c", "pass"], cwd=wd, reps=opts.help_reps
    )
    shim = find_tool("planrun")
    timings = [t_yaml, t_json, t_yaml_cold, t_json_cold, t_help, t_python]
    rows = []
    measured: list[tuple[Timing, float | None]] = [
        (t_yaml, VALIDATE_TARGET_S),
        (t_json, None),
        (t_yaml_cold, VALIDATE_TARGET_S),
        (t_json_cold, None),
        (t_help, HELP_TARGET_S),
    ]
    if t_shim is not None:
        timings.append(t_shim)
        measured.append((t_shim, None))
    measured.append((t_python, None))
    for t, target in measured:
        status = t.skipped or ("FAILED" if t.error else "")
        verdict = ""
        if t.ok and target is not None:
            verdict = "OK" if t.median < target else "MISSED"
        rows.append(
            [
                t.label,
                status or fmt_s(t.median),
                fmt_s(t.cpu_median),
                f"n={len(t.times)}",
                f"< {fmt_s(target)}" if target else "",
                verdict,
            ]
        )
    print_table(["what", "wall", "cpu", "runs", "target", ""], rows)
    print(f"(planrun = {shim}; medians per subprocess; {machine_note()})")
    report_failures(timings)

    if opts.profile or any(t.ok and t.median >= VALIDATE_TARGET_S for t in (t_yaml, t_yaml_cold)):
        print("\n-- cProfile of `planrun validate` (YAML, no plan cache) --")
        os.environ["PLANRUN_NO_PLAN_CACHE"] = "1"  # inherited by the profiled child
        try:
            print(profile_planrun(["validate", str(yaml_path)], cwd=wd))
        finally:
            del os.environ["PLANRUN_NO_PLAN_CACHE"]

    return [
        Figure(
            "validate 10k steps (YAML)",
            fmt_s(t_yaml.median) if t_yaml.ok else (t_yaml.error or "failed").splitlines()[0],
            "< 1 s",
            t_yaml.ok and t_yaml.median < VALIDATE_TARGET_S,
        ),
        Figure("validate 10k steps (JSON)", fmt_s(t_json.median) if t_json.ok else "failed"),
        Figure(
            "validate 10k steps (YAML, no plan cache)",
            fmt_s(t_yaml_cold.median) if t_yaml_cold.ok else "failed",
            "< 1 s",
            t_yaml_cold.ok and t_yaml_cold.median < VALIDATE_TARGET_S,
        ),
        Figure(
            "planrun --help",
            fmt_s(t_help.median) if t_help.ok else "failed",
            "< 150 ms",
            t_help.ok and t_help.median < HELP_TARGET_S,
        ),
    ]


if __name__ == "__main__":
    main()

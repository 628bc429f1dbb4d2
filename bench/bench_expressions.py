"""What planrun's plain-reference path (`${a.b[0]}` evaluated without Jinja2) saves.

1. Evaluation: N distinct plain references over a scope, parsed and evaluated the first time
   (each expression new: the Jinja2 path parses and compiles it) and again (parsed already),
   with the plain path and with every expression sent through Jinja2's sandbox.
2. A run: a 1,000-step plan whose steps read variables and earlier results by plain
   references, `planrun run` with and without the plain path (CPU time of the process).

    python3 bench/bench_expressions.py [--refs 2000] [--steps 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planrun import expressions  # noqa: E402

# Run in place of `python3 -m planrun` to send every expression through Jinja2.
NO_PLAIN_PATH = (
    "import runpy, sys, planrun.plan.expressions as e; e.PLAIN_REFERENCES = False; "
    "sys.argv[0] = 'planrun'; runpy.run_module('planrun', run_name='__main__')"
)


def _scope(n: int) -> dict[str, object]:
    return {
        "steps": {f"s{i}": {"result": {"out": [f"line {i}", i]}} for i in range(n)},
        **{f"v{i}": f"value {i}" for i in range(n)},
    }


def _sources(n: int) -> list[str]:
    return [f"steps.s{i}.result.out[0]" if i % 2 else f"v{i}" for i in range(n)]


def evaluation(n: int, plain: bool) -> tuple[float, float]:
    """Microseconds per reference: (first time: parse + evaluate, again: evaluate)."""
    expressions.PLAIN_REFERENCES = plain
    expressions.parse_expr.cache_clear()
    scope, sources = _scope(n), _sources(n)
    expressions.parse_expr("warm_up | default(1)").evaluate({})  # Jinja2 imported, not timed
    start = time.process_time()
    parsed = [expressions.parse_expr(s) for s in sources]
    for e in parsed:
        e.evaluate(scope)
    first = time.process_time() - start
    start = time.process_time()
    for _ in range(5):
        for e in parsed:
            e.evaluate(scope)
    again = (time.process_time() - start) / 5
    expressions.PLAIN_REFERENCES = True
    expressions.parse_expr.cache_clear()
    return first / n * 1e6, again / n * 1e6


def write_plan(directory: Path, n: int) -> Path:
    """n echo steps; each reads two variables and the step before it by plain references."""
    steps = [{"id": "s0", "tool": "echo", "args": {"value": {"a": "${v0}"}}}]
    for i in range(1, n):
        value = {"a": f"${{v{i % 50}}}", "b": f"x ${{steps.s{i - 1}.result.a}} y"}
        steps.append({"id": f"s{i}", "tool": "echo", "args": {"value": value}})
    plan = {"variables": {f"v{k}": f"value {k}" for k in range(50)}, "steps": steps}
    path = directory / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def run_cpu(plan: Path, plain: bool) -> float:
    """CPU seconds (user + system) of one `planrun run` of the plan."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    argv = [sys.executable, "-m", "planrun"] if plain else [sys.executable, "-c", NO_PLAIN_PATH]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        [*argv, "run", str(plan), "--no-state", "-j", "1"],
        cwd=plan.parent,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--refs", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    for plain in (True, False):
        first, again = min(evaluation(opts.refs, plain) for _ in range(opts.repeat))
        label = "plain path" if plain else "Jinja2 only"
        print(f"{label:12} first {first:8.1f} us/ref   again {again:6.2f} us/ref")
    with tempfile.TemporaryDirectory() as tmp:
        plan = write_plan(Path(tmp), opts.steps)
        run_cpu(plan, True)  # byte code and plan cache written, not timed
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(opts.repeat):  # interleaved: the machine's load hits both alike
            for plain in (True, False):
                times[plain].append(run_cpu(plan, plain))
        for plain in (True, False):
            label = "plain path" if plain else "Jinja2 only"
            print(f"{label:12} run of {opts.steps} steps: {min(times[plain]) * 1000:6.0f} ms CPU")


if __name__ == "__main__":
    main()

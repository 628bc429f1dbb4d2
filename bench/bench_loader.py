"""Generate a 10,000-step plan (YAML and JSON) and print how long planrun's loader takes on it."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planrun.plan.loader import load_document  # noqa: E402


def make_plan(n_steps: int) -> dict[str, object]:
    """A plan shaped like real ones: ~6 keys a step, an args dict, two deps, a `${...}` string."""
    steps = []
    for i in range(n_steps):
        step: dict[str, object] = {
            "id": f"step_{i}",
            "title": f"Step number {i}",
            "tool": "shell",
            "args": {"command": f"echo ${{input_{i % 50}}} > out/{i}.txt", "cwd": "work"},
            "depends_on": [f"step_{max(i - 1, 0)}", f"step_{max(i - 2, 0)}"] if i >= 2 else [],
            "timeout": "30s",
        }
        steps.append(step)
    variables = {f"input_{k}": f"value {k}" for k in range(50)}
    return {"version": 1, "name": "bench", "variables": variables, "steps": steps}


def to_yaml(plan: dict[str, object]) -> str:
    """Block-style YAML as a person writes it (flow lists for depends_on)."""
    lines = ["version: 1", "name: bench", "variables:"]
    for key, value in plan["variables"].items():  # type: ignore[attr-defined]
        lines.append(f"  {key}: {value}")
    lines.append("steps:")
    for step in plan["steps"]:  # type: ignore[attr-defined]
        lines.append(f"  - id: {step['id']}")
        lines.append(f"    title: {step['title']}")
        lines.append(f"    tool: {step['tool']}")
        lines.append("    args:")
        lines.append(f'      command: "{step["args"]["command"]}"')
        lines.append(f"      cwd: {step['args']['cwd']}")
        lines.append(f"    depends_on: [{', '.join(step['depends_on'])}]")
        lines.append(f"    timeout: {step['timeout']}")
    return "\n".join(lines) + "\n"


def best_of(path: Path, repeat: int) -> tuple[float, float]:
    """Best wall-clock and CPU seconds of `repeat` loads (CPU time resists a busy machine)."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        load_document(path)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    plan = make_plan(opts.steps)
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path = Path(tmp, "plan.yaml")
        json_path = Path(tmp, "plan.json")
        # The same plan with one YAML feature outside the fast reader's subset (an
        # anchor), which sends the whole file through libyaml.
        libyaml_path = Path(tmp, "plan-libyaml.yaml")
        yaml_path.write_text(to_yaml(plan), encoding="utf-8")
        json_path.write_text(json.dumps(plan, indent=2), encoding="utf-8")
        libyaml_path.write_text("defaults: &d {timeout: 30s}\n" + to_yaml(plan), encoding="utf-8")
        assert load_document(yaml_path).data == plan, "YAML plan did not load back equal"
        assert load_document(json_path).data == plan, "JSON plan did not load back equal"
        assert load_document(libyaml_path).data == {"defaults": {"timeout": "30s"}, **plan}
        for path in (yaml_path, json_path, libyaml_path):
            size = path.stat().st_size / 1e6
            wall, cpu = best_of(path, opts.repeat)
            print(
                f"{path.name}: {opts.steps} steps, {size:.1f} MB, load {wall * 1000:.0f} ms wall,"
                f" {cpu * 1000:.0f} ms CPU (best of {opts.repeat})"
            )


if __name__ == "__main__":
    main()

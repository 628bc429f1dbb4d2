"""Cost of planrun's state file: 10,000 echo steps with state vs --no-state, and a 1 MB result round trip."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Figure,
    Timing,
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

RATIO_TARGET = 1.5
BIG_CHARS = 1_000_000


def write_echo_plan(d: Path, n: int) -> Path:
    lines = [f"name: state-echo-{n}", "steps:"]
    for i in range(n):
        lines += [f"  - id: e{i}", "    tool: echo", f"    args: {{value: {i}}}"]
    path = d / f"echo-{n}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def big_string(n: int, seed: int = 7) -> str:
    """n characters that a careless writer would damage: quotes, backslashes, newlines, non-ASCII."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \"'\\\n\t$%{}[]:,#é€😀"
    return "".join(rng.choice(alphabet) for _ in range(n)).replace("${", "$ {")


def state_overhead(reps: int, timeout: float, profile: bool) -> tuple[Timing, Timing, int]:
    """10,000 echo steps (falls back to 1,000 if a run exceeds `timeout`)."""
    planrun = planrun_cmd()
    assert planrun is not None
    d = work_dir("state")

    def clear() -> None:
        # The state only: removing all of .planrun would also drop planrun's plan cache, and
        # charge a full validation of the plan to the state runs alone.
        shutil.rmtree(d / ".planrun" / "state", ignore_errors=True)

    for n in (10_000, 1_000):
        plan = write_echo_plan(d, n)
        base = [*planrun, "run", plan.name, "--quiet"]
        off = time_command(
            f"{n:,} echo steps --no-state", [*base, "--no-state"], cwd=d, reps=reps, timeout=timeout
        )
        on = time_command(
            f"{n:,} echo steps, state on", base, cwd=d, reps=reps, setup=clear, timeout=timeout
        )
        timed_out = any(t.error and t.error.startswith("timed out") for t in (off, on))
        if not timed_out or n == 1_000:
            break
        print(f"({n:,} steps timed out after {timeout:.0f} s; measuring 1,000 instead)")
    if profile or (on.ok and off.ok and on.median / off.median > RATIO_TARGET):
        if not profile and n > 2_000 and on.median > 10:  # profiling 10k slow steps takes minutes
            plan = write_echo_plan(d, 2_000)
        clear()
        print(f"\n-- cProfile of {plan.stem} with state on --")
        print(profile_planrun(["run", plan.name, "--quiet"], cwd=d))
    return off, on, n


def round_trip() -> tuple[bool, str, float]:
    """A step returns a 1,000,000-char string; the state file must hold it exactly."""
    planrun = planrun_cmd()
    assert planrun is not None
    d = work_dir("state-big")
    value = big_string(BIG_CHARS)
    # ensure_ascii=False: planrun reads a JSON vars file with a YAML parser, which turns
    # \ud83d\ude00-style escapes into lone surrogates (see escaped_vars_file()).
    (d / "vars.json").write_text(json.dumps({"big": value}, ensure_ascii=False), encoding="utf-8")
    (d / "big.yaml").write_text(
        "name: big\nsteps:\n  - id: produce\n    tool: echo\n"
        '    args: {value: "${big}"}\n    result_variable: out\n'
    )
    t = time_command(
        "1 MB result",
        [*planrun, "run", "big.yaml", "--vars-file", "vars.json", "--quiet"],
        cwd=d,
        reps=1,
    )
    if not t.ok:
        return False, f"run failed: {t.error}", float("nan")
    state_path = d / ".planrun" / "state" / "big.json"
    if not state_path.exists():
        found = list((d / ".planrun").rglob("*.json")) if (d / ".planrun").exists() else []
        return False, f"no state file at {state_path} (found: {found})", t.median
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return False, f"state file is not JSON: {exc}", t.median
    steps = state.get("steps")
    record = steps.get("produce") if isinstance(steps, dict) else None
    if record is None and isinstance(steps, list):
        record = next((s for s in steps if isinstance(s, dict) and s.get("id") == "produce"), None)
    if record is None:
        return False, "state has no record for step 'produce'", t.median
    problems = []
    if record.get("result") != value:
        got = record.get("result")
        size = len(got) if isinstance(got, str) else type(got).__name__
        problems.append(f"steps.produce.result differs (got {size})")
    if (state.get("variables") or {}).get("out") != value:
        problems.append("variables.out differs")
    size = state_path.stat().st_size
    detail = f"state file {size / 1e6:.2f} MB; result and variable identical"
    return not problems, "; ".join(problems) or detail, t.median


def escaped_vars_file() -> tuple[bool, str]:
    """A JSON vars file as json.dumps writes it by default (non-BMP chars as surrogate escapes)."""
    planrun = planrun_cmd()
    assert planrun is not None
    d = work_dir("state-escape")
    (d / "vars.json").write_text(json.dumps({"big": "ab\U0001f600cd"}))  # "ab\ud83d\ude00cd"
    (d / "p.yaml").write_text(
        'name: esc\nsteps:\n  - id: a\n    tool: echo\n    args: {value: "${big}"}\n'
    )
    proc = run_capture([*planrun, "run", "p.yaml", "--vars-file", "vars.json", "--quiet"], cwd=d)
    if proc.returncode != 0:
        return False, f"exit {proc.returncode}: {tail(proc.stderr, 3)}"
    state = json.loads((d / ".planrun" / "state" / "esc.json").read_text(encoding="utf-8"))
    got = state["steps"]["a"]["result"]
    return got == "ab\U0001f600cd", f"result {got!r}"


def main(argv: list[str] | None = None) -> list[Figure]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per 10k run")
    parser.add_argument("--profile", action="store_true")
    opts = parser.parse_args(argv)
    print(f"== bench_state ({machine_note()})")

    off, on, n = state_overhead(opts.reps, opts.timeout, opts.profile)
    rows = [
        [t.label, fmt_s(t.median) if t.ok else "FAILED", fmt_s(t.cpu_median), f"n={len(t.times)}"]
        for t in (off, on)
    ]
    print_table(["run", "wall", "cpu", "runs"], rows)
    ratio = on.median / off.median if on.ok and off.ok else float("nan")
    ratio_ok = ratio == ratio and ratio <= RATIO_TARGET
    shown = f"{ratio:.3f}x" if ratio == ratio else "n/a"
    print(
        f"state on / --no-state: {shown} (target <= {RATIO_TARGET}x) {'OK' if ratio_ok else 'MISSED'}"
    )
    report_failures([off, on])

    ok, detail, secs = round_trip()
    print(f"\n1 MB result round trip: {'OK' if ok else 'FAILED'} - {detail} (run {fmt_s(secs)})")
    if not ok and detail.startswith("run failed"):
        print(tail(detail))

    esc_ok, esc_detail = escaped_vars_file()
    print(
        f"JSON vars file with \\ud83d\\ude00 escapes: {'OK' if esc_ok else 'FAILED'} - {esc_detail}"
    )

    label = "state on / off, 10k echo" if n == 10_000 else f"state on / off (at {n:,} steps)"
    return [
        Figure(label, f"{shown} ({fmt_s(on.median)} vs {fmt_s(off.median)})", "<= 1.5x", ratio_ok),
        Figure("1 MB result in state file", "exact" if ok else detail.splitlines()[0], "exact", ok),
        Figure("vars.json with surrogate escapes", "ok" if esc_ok else "FAILED", "runs", esc_ok),
    ]


if __name__ == "__main__":
    main()

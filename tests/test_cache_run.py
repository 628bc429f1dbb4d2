"""Incremental runs end to end: real plans, real files, real `planrun` processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from tests.conftest import assert_no_traceback, planrun
from tests.testkit import (
    bounded_planrun,
    cache_entry_files,
    one_line_error,
    run_plan,
    write_indented_plan,
)

BUILD = """
steps:
  - id: build
    tool: shell
    args: {cmd: "mkdir -p out && cat src/*.py > out/app.txt && chmod 750 out/app.txt && echo built ${flavour}"}
    sources: ["src/*.py"]
    outputs: ["out/app.txt"]
    result_variable: build
  - id: pack
    tool: shell
    args: {cmd: "echo packed"}
    depends_on: [build]
    cache: true
  - id: show
    tool: echo
    args: {value: "${build.stdout}"}
variables: {flavour: plain}
"""


def project(root: Path, plan: str = BUILD, files: int = 3) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    for n in range(files):
        (root / "src" / f"m{n}.py").write_text(f"print({n})\n")
    (root / "plan.yaml").write_text(plan.lstrip())
    return root


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def statuses(result: Any) -> dict[str, str]:
    return {s["id"]: s["status"] for s in result.json["steps"]}


def started_reasons(path: Path) -> dict[str, str]:
    return {e["step"]: e.get("reason") for e in events(path) if e["event"] == "step.started"}


def go(cwd: Path, *args: str, **kw: Any) -> Any:
    r = planrun("run", "plan.yaml", *args, cwd=cwd, **kw)
    assert_no_traceback(r)
    return r


@pytest.mark.e2e  # a real `python -m planrun` process
def test_second_run_hits_restores_outputs_and_replays_output(tmp_path: Path) -> None:
    project(tmp_path)
    first = go(tmp_path, "--output", "json", "--events", "e1.jsonl")
    assert first.code == 0, first
    assert statuses(first) == {"build": "succeeded", "pack": "succeeded", "show": "succeeded"}
    assert started_reasons(tmp_path / "e1.jsonl")["build"] == "no cache entry"
    original = (tmp_path / "out/app.txt").read_bytes()
    shutil.rmtree(tmp_path / "out")

    second = go(tmp_path, "--output", "json", "--events", "e2.jsonl", "--junit", "j.xml")
    assert second.code == 0, second
    assert statuses(second) == {"build": "cached", "pack": "cached", "show": "succeeded"}
    assert (tmp_path / "out/app.txt").read_bytes() == original
    assert (tmp_path / "out/app.txt").stat().st_mode & 0o777 == 0o750
    docs = {s["id"]: s for s in second.json["steps"]}
    assert docs["show"]["result"] == "built plain\n"  # result variable bound from the entry
    assert second.json["variables"]["build"]["stdout"] == "built plain\n"
    cached = [e for e in events(tmp_path / "e2.jsonl") if e["event"] == "step.cached"]
    assert [e["step"] for e in cached] == ["build", "pack"]
    assert all(len(e["key"]) == 64 for e in cached)
    assert "build cached" in second.err and "replayed" in second.err and "built plain" in second.err
    junit = (tmp_path / "j.xml").read_text()
    assert 'failures="0"' in junit and 'errors="0"' in junit and 'skipped="0"' in junit
    status = planrun("status", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert {s["id"]: s["status"] for s in status.json["steps"]}["build"] == "cached"
    text = planrun("status", "plan.yaml", cwd=tmp_path)
    assert "cached" in text.out


def test_restore_only_what_differs_and_keep_identical_files(tmp_path: Path) -> None:
    project(tmp_path)
    assert go(tmp_path).code == 0
    out = tmp_path / "out/app.txt"
    out.write_text("tampered")
    assert go(tmp_path, "--output", "json").json["steps"][0]["status"] == "cached"
    assert out.read_text() == "print(0)\nprint(1)\nprint(2)\n"
    os.chmod(out, 0o600)
    ino = out.stat().st_ino
    go(tmp_path)
    assert out.stat().st_mode & 0o777 == 0o750 and out.stat().st_ino == ino  # mode only


def test_each_miss_says_why(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    for n in range(3):
        (tmp_path / f"src/m{n}.py").write_text(f"print({n + 10})\n")
    r = go(tmp_path, "--events", "a.jsonl")
    assert started_reasons(tmp_path / "a.jsonl") == {
        "build": "sources changed: src/m0.py (+2 more)",
        "pack": "upstream changed: build",
        "show": "cache off",
    }
    assert "build started [shell]: sources changed: src/m0.py (+2 more)" in r.err
    go(tmp_path, "--var", "flavour=spicy", "--events", "b.jsonl")
    assert started_reasons(tmp_path / "b.jsonl")["build"] == "args changed"
    go(tmp_path, "--var", "flavour=spicy", "--force", "--events", "c.jsonl")
    assert set(started_reasons(tmp_path / "c.jsonl").values()) == {"forced", "cache off"}
    r = go(tmp_path, "--var", "flavour=spicy", "--force=pack", "--explain", "--output", "json")
    assert statuses(r) == {"build": "cached", "pack": "succeeded", "show": "succeeded"}
    assert "pack started [shell]: forced" in r.err and "build cached" in r.err
    assert "show started [echo]: cache off" in r.err  # --explain: every step
    r = go(tmp_path, "--no-cache", "--events", "d.jsonl", "--output", "json")
    assert set(started_reasons(tmp_path / "d.jsonl").values()) == {"cache off"}


def test_force_takes_step_ids_and_rejects_unknown_ones(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    r = go(tmp_path, "--force=build", "--force=pack", "--output", "json")
    assert statuses(r) == {"build": "succeeded", "pack": "succeeded", "show": "succeeded"}
    r = go(tmp_path, "--force=biuld")
    assert r.code == 2 and "biuld" in r.err and "did you mean 'build'" in r.err


def test_no_cache_neither_reads_nor_writes(tmp_path: Path) -> None:
    project(tmp_path)
    r = go(tmp_path, "--no-cache", "--output", "json")
    assert statuses(r)["build"] == "succeeded"
    assert not (tmp_path / ".planrun/cache/entries").exists()
    go(tmp_path)
    r = go(tmp_path, "--no-cache", "--output", "json")
    assert statuses(r)["build"] == "succeeded"


def test_dry_run_shows_hits_and_misses_and_writes_nothing(tmp_path: Path) -> None:
    project(tmp_path)
    r = go(tmp_path, "--dry-run")
    assert r.code == 0 and "cache: miss (no cache entry)" in r.out
    assert not (tmp_path / ".planrun/cache").exists()
    go(tmp_path)
    r = go(tmp_path, "--dry-run", "--output", "json")
    caches = {s["id"]: s["cache"] for s in r.json["steps"]}
    assert caches["build"] == {"status": "hit", "reason": "cached"}
    assert caches["pack"]["status"] == "hit"
    assert caches["show"] == {"status": "off", "reason": "cache off"}
    (tmp_path / "src/m1.py").write_text("changed\n")
    before = sorted(p.name for p in (tmp_path / ".planrun/cache/entries").iterdir())
    r = go(tmp_path, "--dry-run")
    assert "cache: miss (sources changed: src/m1.py)" in r.out
    assert "cache: miss (upstream changed: build)" in r.out
    assert sorted(p.name for p in (tmp_path / ".planrun/cache/entries").iterdir()) == before


def test_an_earlier_state_of_the_sources_hits(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    (tmp_path / "src/m0.py").write_text("print('new')\n")
    assert statuses(go(tmp_path, "--output", "json"))["build"] == "succeeded"
    (tmp_path / "src/m0.py").write_text("print(0)\n")
    r = go(tmp_path, "--output", "json")
    assert statuses(r)["build"] == "cached"
    assert (tmp_path / "out/app.txt").read_text().startswith("print(0)")


def test_a_second_checkout_shares_the_cache_directory(tmp_path: Path) -> None:
    shared = tmp_path / "shared-cache"
    one = project(tmp_path / "one")
    two = project(tmp_path / "two")
    assert go(one, "--cache-dir", str(shared)).code == 0
    r = go(two, "--output", "json", env={"PLANRUN_CACHE_DIR": str(shared)})
    assert statuses(r)["build"] == "cached"
    assert (two / "out/app.txt").read_bytes() == (one / "out/app.txt").read_bytes()
    info = planrun("cache", "info", "--output", "json", "--cache-dir", str(shared), cwd=two)
    assert info.json["dir"] == str(shared) and info.json["entries"] == 2


def test_a_corrupt_store_is_a_miss_with_a_warning(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    entries = tmp_path / ".planrun/cache/entries"
    for e in entries.iterdir():
        e.write_bytes(e.read_bytes()[:40])
    r = go(tmp_path, "--output", "json")
    assert r.code == 0 and statuses(r)["build"] == "succeeded"
    assert "corrupt" in r.err
    blobs = tmp_path / ".planrun/cache/blobs"
    for b in blobs.iterdir():
        b.write_bytes(b"garbage")
    shutil.rmtree(tmp_path / "out")
    r = go(tmp_path, "--output", "json")
    assert r.code == 0 and statuses(r)["build"] == "succeeded", r
    assert (tmp_path / "out/app.txt").read_text().startswith("print(0)")
    shutil.rmtree(tmp_path / ".planrun/cache")
    (tmp_path / ".planrun/cache").write_text("not a directory")
    r = go(tmp_path, "--output", "json")
    assert r.code == 0 and statuses(r)["build"] == "succeeded"


@pytest.mark.slow  # real processes racing
def test_concurrent_runs_share_one_store(tmp_path: Path) -> None:
    shared = tmp_path / "cache"
    dirs = [project(tmp_path / f"c{n}") for n in range(4)]
    env = {**os.environ, "PLANRUN_CACHE_DIR": str(shared), "NO_COLOR": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "planrun", "run", "plan.yaml", "--output", "json"],
            cwd=d,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for d in dirs
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "Traceback" not in err, err
    for d in dirs:
        r = go(d, "--output", "json", env={"PLANRUN_CACHE_DIR": str(shared)})
        assert statuses(r)["build"] == "cached" and "corrupt" not in r.err


def test_declared_output_not_produced_fails_the_step(tmp_path: Path) -> None:
    plan = """
    steps:
      - id: wheel
        tool: shell
        args: {cmd: "echo no wheel"}
        outputs: ["dist/*.whl"]
    """
    project(tmp_path, plan.replace("\n    ", "\n"))
    r = go(tmp_path, "--output", "json")
    assert r.code == 1
    assert r.json["steps"][0]["error"] == "declared output not produced: dist/*.whl"
    assert planrun("cache", "info", "--output", "json", cwd=tmp_path).json["entries"] == 0


def test_outputs_inside_sources_warn(tmp_path: Path) -> None:
    plan = """
    steps:
      - id: gen
        tool: shell
        args: {cmd: "echo x > src/gen.py"}
        sources: ["src"]
        outputs: ["src/gen.py"]
    """
    project(tmp_path, plan.replace("\n    ", "\n"))
    r = go(tmp_path)
    assert r.code == 0 and "outputs are also its sources (src/gen.py)" in r.err


def test_hits_are_not_charged_to_budgets(tmp_path: Path) -> None:
    plan = BUILD + "limits: {max_steps: 3}\n"
    project(tmp_path, plan)
    assert go(tmp_path).code == 0
    (tmp_path / "plan.yaml").write_text(BUILD + "limits: {max_steps: 1}\n")
    r = go(tmp_path, "--output", "json")
    assert r.code == 0, r
    assert statuses(r) == {"build": "cached", "pack": "cached", "show": "succeeded"}


def test_results_holding_a_secret_are_not_stored(tmp_path: Path) -> None:
    plan = """
    variables: {token: s3cr3t-value}
    secrets: [token]
    steps:
      - {id: leak, tool: shell, args: {cmd: "echo ${token}"}, cache: true}
      - {id: safe, tool: shell, args: {cmd: "echo fine"}, cache: true}
    """
    project(tmp_path, plan.replace("\n    ", "\n"))
    go(tmp_path)
    r = go(tmp_path, "--output", "json")
    assert statuses(r) == {"leak": "succeeded", "safe": "cached"}
    for path in (tmp_path / ".planrun").rglob("*"):
        if path.is_file():
            assert b"s3cr3t-value" not in path.read_bytes(), path


def test_resume_counts_cached_steps_as_done(tmp_path: Path) -> None:
    plan = BUILD.replace(
        "  - id: show\n",
        '  - id: flaky\n    tool: shell\n    args: {cmd: "test -f ok"}\n  - id: show\n',
    )
    project(tmp_path, plan)
    assert go(tmp_path).code == 1
    assert go(tmp_path).code == 1  # build and pack now come from the cache
    (tmp_path / "ok").write_text("")
    r = planrun("resume", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r)["flaky"] == "succeeded" and statuses(r)["build"] in ("cached", "succeeded")


def test_cache_info_clean_and_prune(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    info = planrun("cache", "info", "--output", "json", cwd=tmp_path)
    assert info.json["entries"] == 2 and info.json["bytes"] > 0
    assert planrun("cache", "info", cwd=tmp_path).out.startswith(str(tmp_path))
    r = planrun("cache", "prune", "--older-than", "1h", cwd=tmp_path)
    assert r.code == 0
    assert planrun("cache", "info", "--output", "json", cwd=tmp_path).json["entries"] == 2
    r = planrun("cache", "prune", "--max-size", "1K", cwd=tmp_path)
    assert r.code == 0 and "removed 2 entries" in r.err
    after = planrun("cache", "info", "--output", "json", cwd=tmp_path).json
    assert after["entries"] == 0
    assert planrun("cache", "prune", "--max-size", "lots", cwd=tmp_path).code == 2
    assert planrun("cache", "prune", cwd=tmp_path).code == 2
    go(tmp_path)
    r = planrun("cache", "clean", cwd=tmp_path)
    assert r.code == 0
    assert planrun("cache", "info", "--output", "json", cwd=tmp_path).json["entries"] == 0


def test_validation_of_cache_fields_has_positions(tmp_path: Path) -> None:
    plan = """
    steps:
      - id: a
        tool: echo
        sources: "src"
      - id: b
        tool: echo
        outputs: ["ok/*", "../escape"]
        cache: "yes"
      - id: c
        tool: echo
        sources: ["/abs/path", "!"]
    """
    project(tmp_path, plan.replace("\n    ", "\n"))
    r = planrun("validate", "plan.yaml", cwd=tmp_path)
    assert r.code == 3
    assert "plan.yaml:4:14: error: step 'a': sources" in r.out
    assert "plan.yaml:7:23: error: step 'b': outputs[1]" in r.out and "inside the working" in r.out
    assert "plan.yaml:8:12: error: step 'b': cache" in r.out
    assert "plan.yaml:11:15: error: step 'c': sources[0]" in r.out
    assert "plan.yaml:11:28: error: step 'c': sources[1]" in r.out
    schema = planrun("schema", cwd=tmp_path).json
    props = schema["$defs"]["Step"]["properties"]
    assert {"sources", "outputs", "cache"} <= set(props)


def test_dotenv_contents_and_env_read_by_args_are_in_the_key(tmp_path: Path) -> None:
    plan = """
    dotenv: [.env, .env.local?]
    steps:
      - {id: greet, tool: shell, args: {cmd: "echo $GREETING ${env.WHO}"}, cache: true}
    """
    project(tmp_path, plan.replace("\n    ", "\n"))
    (tmp_path / ".env").write_text("GREETING=hello\n")
    env = {"WHO": "world"}
    assert statuses(go(tmp_path, "--output", "json", env=env))["greet"] == "succeeded"
    assert statuses(go(tmp_path, "--output", "json", env=env))["greet"] == "cached"
    (tmp_path / ".env").write_text("GREETING=bye\n")
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl", env=env)
    assert r.json["steps"][0]["result"]["stdout"] == "bye world\n"
    assert started_reasons(tmp_path / "e.jsonl")["greet"] == "sources changed: .env"
    r = go(tmp_path, "--output", "json", "--events", "f.jsonl", env={"WHO": "you"})
    assert r.json["steps"][0]["result"]["stdout"] == "bye you\n"
    assert started_reasons(tmp_path / "f.jsonl")["greet"] == "args changed"


def test_force_with_the_default_plan_forces_the_target_after_it(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / "plan.yaml").rename(tmp_path / "planrun.yaml")
    assert planrun("run", cwd=tmp_path).code == 0
    r = planrun("run", "--force", "pack", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "cached", "pack": "succeeded"}  # a flag: `pack` a target


def test_fifos_where_cache_files_belong_neither_hang_nor_break_the_run(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    planrun_dir = tmp_path / ".planrun"
    for name in ("stat-records", "cache-recent.json", "listings"):
        (planrun_dir / name).unlink(missing_ok=True)
        os.mkfifo(planrun_dir / name)
    for entry in (planrun_dir / "cache/entries").iterdir():
        entry.unlink()
        os.mkfifo(entry)
    r = go(tmp_path, "--output", "json", timeout=60)
    assert r.code == 0 and statuses(r)["build"] == "succeeded", r
    assert planrun("cache", "prune", "--max-size", "1", cwd=tmp_path, timeout=60).code == 0


def test_a_cached_step_counts_as_succeeded_for_when(tmp_path: Path) -> None:
    plan = BUILD.replace(
        "variables:",
        "  - id: notify\n    tool: echo\n    args: {value: ok}\n    depends_on: [build]\n"
        "    when: \"${steps.build.status == 'succeeded'}\"\nvariables:",
    )
    project(tmp_path, plan)
    assert statuses(go(tmp_path, "--output", "json"))["notify"] == "succeeded"
    r = go(tmp_path, "--output", "json")
    assert statuses(r)["build"] == "cached" and statuses(r)["notify"] == "succeeded"


def test_force_before_the_plan_file_is_a_bare_force(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    r = planrun("run", "--force", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "pack": "succeeded", "show": "succeeded"}


def test_foreach_caches_each_instance(tmp_path: Path) -> None:
    plan = """
    variables: {pkgs: [a, b]}
    steps:
      - id: lint
        tool: shell
        foreach: "${pkgs}"
        as: pkg
        args: {cmd: "echo linting ${pkg}"}
        cache: true
        result_variable: lints
    """
    project(tmp_path, plan.replace("\n    ", "\n"))
    go(tmp_path)
    r = go(tmp_path, "--output", "json", "--var", "pkgs=[a, c]")
    assert statuses(r) == {"lint": "succeeded", "lint[0]": "cached", "lint[1]": "succeeded"}
    assert r.json["variables"]["lints"][0]["stdout"] == "linting a\n"


def test_the_environment_overriding_a_dotenv_name_is_in_the_key(tmp_path: Path) -> None:
    plan = """
    dotenv: [.env]
    steps:
      - {id: api, tool: shell, args: {cmd: "echo $API_URL"}, cache: true}
      - id: pinned
        tool: shell
        args: {cmd: "echo $API_URL", env: {API_URL: fixed}}
        cache: true
    """
    project(tmp_path, plan.replace("\n    ", "\n"))
    (tmp_path / ".env").write_text("API_URL=staging\n")
    r = go(tmp_path, "--output", "json")
    assert r.json["steps"][0]["result"]["stdout"] == "staging\n", r
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl", env={"API_URL": "prod"})
    assert statuses(r) == {"api": "succeeded", "pinned": "cached"}, r
    assert r.json["steps"][0]["result"]["stdout"] == "prod\n"
    assert started_reasons(tmp_path / "e.jsonl")["api"] == "args changed"
    assert statuses(go(tmp_path, "--output", "json", env={"API_URL": "prod"}))["api"] == "cached"
    r = go(tmp_path, "--output", "json")  # back to the dotenv value: the entry made then
    assert statuses(r)["api"] == "cached" and r.json["steps"][0]["result"]["stdout"] == "staging\n"


def test_a_run_after_a_resume_hits_the_steps_the_resume_ran(tmp_path: Path) -> None:
    plan = """
    steps:
      - id: a
        tool: shell
        args: {cmd: "mkdir -p out && cat src/*.py > out/a.txt && echo a"}
        sources: ["src/*.py"]
        outputs: ["out/a.txt"]
      - {id: gate, tool: shell, args: {cmd: "test -f ok"}, depends_on: [a]}
      - {id: b, tool: shell, args: {cmd: "echo b"}, depends_on: [a, gate], cache: true}
    """
    project(tmp_path, plan.replace("\n    ", "\n"))
    assert go(tmp_path).code == 1  # the gate fails
    (tmp_path / "ok").write_text("")
    r = planrun("resume", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert_no_traceback(r)
    assert r.code == 0 and statuses(r)["b"] == "succeeded", r
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl", "--explain")
    assert statuses(r) == {"a": "cached", "gate": "succeeded", "b": "cached"}, r
    assert "upstream changed" not in r.err + r.out
    # and once more through a resume of a run that kept a cached step
    assert go(tmp_path, "--output", "json").code == 0
    (tmp_path / "ok").unlink()
    assert go(tmp_path, "--force=gate").code == 1
    (tmp_path / "ok").write_text("")
    assert planrun("resume", "plan.yaml", cwd=tmp_path).code == 0
    assert statuses(go(tmp_path, "--output", "json"))["b"] == "cached"


AFTER_SETUP = """
steps:
  - id: setup
    tool: shell
    args: {cmd: "mkdir -p build/tmp"}
  - id: test
    tool: shell
    args: {cmd: "cat src/*.py > build/tmp/all.txt"}
    depends_on: [setup]
    sources: ["src/*.py"]
    outputs: ["build/tmp/all.txt"]
  - id: wheel
    tool: shell
    args: {cmd: "cp build/tmp/all.txt build/wheel.txt"}
    depends_on: [test]
    sources: ["build/tmp/all.txt"]
    outputs: ["build/wheel.txt"]
"""


def test_the_dry_run_says_unknown_after_an_uncached_step_and_predicts_no_miss(
    tmp_path: Path,
) -> None:
    """A cached step after an uncached one (a `mkdir` setup) hits when that step's result is
    the same as last time, which only the run knows: the dry-run says `unknown`, not `miss`."""
    project(tmp_path, AFTER_SETUP)
    dry = go(tmp_path, "--dry-run", "--output", "json")
    caches = {s["id"]: s["cache"] for s in dry.json["steps"]}
    assert caches["test"] == {"status": "miss", "reason": "no cache entry"}  # never stored
    go(tmp_path)
    dry = go(tmp_path, "--dry-run", "--output", "json")
    caches = {s["id"]: s["cache"] for s in dry.json["steps"]}
    assert caches["setup"]["status"] == "off"
    assert caches["test"] == {"status": "unknown", "reason": "unknown: runs after setup"}
    assert caches["wheel"] == {"status": "unknown", "reason": "unknown: runs after setup"}
    text = go(tmp_path, "--dry-run")
    assert "cache: unknown (runs after setup)" in text.out and "cache: miss" not in text.out
    r = go(tmp_path, "--output", "json")
    assert statuses(r) == {"setup": "succeeded", "test": "cached", "wheel": "cached"}
    (tmp_path / "src/m1.py").write_text("changed\n")  # a certain miss is still said
    dry = go(tmp_path, "--dry-run", "--output", "json")
    caches = {s["id"]: s["cache"] for s in dry.json["steps"]}
    assert caches["test"]["status"] == "unknown"  # its sources changed, but after setup


# ---- the key -------------------------------------------------------------------------------

GLOBS = """
    steps:
      - id: wheel
        tool: shell
        args: {cmd: "echo wheel"}
        sources: ["src/**/*.py", "pyproject.toml", "!src/**/test_*.py", "missing/**"]
"""


def test_globs_cross_directories_exclude_and_a_pattern_matching_nothing_is_fine(
    tmp_path: Path,
) -> None:
    write_indented_plan(tmp_path, GLOBS)
    (tmp_path / "src/pkg/deep").mkdir(parents=True)
    (tmp_path / "src/pkg/deep/mod.py").write_text("a\n")
    (tmp_path / "src/pkg/test_mod.py").write_text("t\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    assert run_plan(tmp_path).code == 0  # `missing/**` matches nothing: an empty set, no error
    (tmp_path / "src/pkg/test_mod.py").write_text("changed test\n")  # excluded
    (tmp_path / "src/pkg/notes.txt").write_text("not a .py\n")
    assert statuses(run_plan(tmp_path, "--output", "json")) == {"wheel": "cached"}
    (tmp_path / "src/pkg/deep/mod.py").write_text("b\n")  # `**` reaches it
    r = run_plan(tmp_path, "--events", "e.jsonl")
    assert started_reasons(tmp_path / "e.jsonl") == {
        "wheel": "sources changed: src/pkg/deep/mod.py"
    }
    (tmp_path / "pyproject.toml").unlink()  # a removed source is a change too
    run_plan(tmp_path, "--events", "f.jsonl")
    assert started_reasons(tmp_path / "f.jsonl") == {"wheel": "sources changed: pyproject.toml"}
    assert r.code == 0


def test_a_directory_source_matches_every_file_below_it(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo s"}, sources: ["src"]}
    """,
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.txt").write_text("a")
    run_plan(tmp_path)
    (tmp_path / "src/x/y").mkdir(parents=True)
    (tmp_path / "src/x/y/new.bin").write_bytes(b"\0\1")
    run_plan(tmp_path, "--events", "e.jsonl")
    assert started_reasons(tmp_path / "e.jsonl") == {"s": "sources changed: src/x/y/new.bin"}


def test_an_upstream_result_reached_by_a_data_flow_edge_is_in_the_key(tmp_path: Path) -> None:
    """No `depends_on`: the step reads `${up.exit_code}` (unchanged) of a step whose result
    (its stdout) changes; the key holds that step's result, so the step runs again."""
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: up, tool: shell, args: {cmd: "cat word.txt"}, result_variable: up}
      - {id: down, tool: shell, args: {cmd: "echo ${up.exit_code}"}, cache: true}
    """,
    )
    (tmp_path / "word.txt").write_text("one")
    run_plan(tmp_path)
    assert statuses(run_plan(tmp_path, "--output", "json"))["down"] == "cached"
    (tmp_path / "word.txt").write_text("two")
    r = run_plan(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r)["down"] == "succeeded"
    assert started_reasons(tmp_path / "e.jsonl")["down"] == "upstream changed: up"


def test_the_first_reason_is_args_then_upstream_then_sources(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    variables: {flag: a}
    steps:
      - {id: up, tool: shell, args: {cmd: "cat up.txt"}}
      - id: s
        tool: shell
        args: {cmd: "echo ${flag}"}
        sources: ["src"]
        depends_on: [up]
    """,
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.py").write_text("1")
    (tmp_path / "up.txt").write_text("1")
    run_plan(tmp_path)
    # all three changed: args wins
    (tmp_path / "src/a.py").write_text("2")
    (tmp_path / "up.txt").write_text("2")
    run_plan(tmp_path, "--var", "flag=b", "--events", "a.jsonl")
    assert started_reasons(tmp_path / "a.jsonl")["s"] == "args changed"
    # upstream and sources changed: upstream wins
    (tmp_path / "src/a.py").write_text("3")
    (tmp_path / "up.txt").write_text("3")
    run_plan(tmp_path, "--var", "flag=b", "--events", "b.jsonl")
    assert started_reasons(tmp_path / "b.jsonl")["s"] == "upstream changed: up"
    # forced wins over a change; cache off wins over forced (nothing is looked up)
    (tmp_path / "src/a.py").write_text("4")
    run_plan(tmp_path, "--var", "flag=b", "--force", "s", "--events", "c.jsonl")
    assert started_reasons(tmp_path / "c.jsonl")["s"] == "forced"
    run_plan(tmp_path, "--var", "flag=b", "--force", "--no-cache", "--events", "d.jsonl")
    assert started_reasons(tmp_path / "d.jsonl")["s"] == "cache off"


def test_going_back_compares_with_the_most_recent_entry(tmp_path: Path) -> None:
    """The reason compares with the step's most recent entry, not the first one stored."""
    project(tmp_path)
    run_plan(tmp_path)
    (tmp_path / "src/m1.py").write_text("print('b')\n")
    run_plan(tmp_path)
    (tmp_path / "src/m2.py").write_text("print('c')\n")  # m1 as the most recent entry saw it
    run_plan(tmp_path, "--events", "e.jsonl")
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed: src/m2.py"


# ---- hits and misses -----------------------------------------------------------------------


def test_failed_and_ignored_failures_are_never_stored(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: bad, tool: shell, args: {cmd: "exit 3"}, cache: true, on_failure: ignore}
      - {id: worse, tool: shell, args: {cmd: "exit 4"}, cache: true, on_failure: continue}
    """,
    )
    assert run_plan(tmp_path).code == 1
    assert not cache_entry_files(tmp_path)
    r = run_plan(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r) == {"bad": "ignored", "worse": "failed"}
    assert started_reasons(tmp_path / "e.jsonl") == {
        "bad": "no cache entry",
        "worse": "no cache entry",
    }


def test_a_hit_replays_stderr_too_and_counts_as_a_passed_junit_case(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: warn, tool: shell, args: {cmd: "echo to-out; echo to-err >&2"}, cache: true}
    """,
    )
    run_plan(tmp_path)
    r = run_plan(tmp_path, "--junit", "j.xml", "--output", "json")
    assert statuses(r) == {"warn": "cached"}
    assert "(replayed from the cache)" in r.err and "to-err" in r.err and "to-out" in r.err
    suite = ElementTree.parse(tmp_path / "j.xml").getroot()
    (case,) = suite.iter("testcase")
    assert case.get("name") == "warn"
    assert [child.tag for child in case if child.tag in ("failure", "error", "skipped")] == []
    assert suite.get("tests") == "1" and suite.get("failures") == "0"


def test_outputs_in_nested_directories_come_back_with_their_directories(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - id: gen
        tool: shell
        args: {cmd: "mkdir -p out/a/b && printf x > out/a/b/one.txt && printf y > out/two.txt"}
        outputs: ["out/**/*.txt"]
    """,
    )
    run_plan(tmp_path)
    shutil.rmtree(tmp_path / "out")
    r = run_plan(tmp_path, "--output", "json")
    assert statuses(r) == {"gen": "cached"}
    assert (tmp_path / "out/a/b/one.txt").read_text() == "x"
    assert (tmp_path / "out/two.txt").read_text() == "y"


def test_the_unproduced_pattern_is_named_when_another_matched(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - id: two
        tool: shell
        args: {cmd: "mkdir -p dist && touch dist/a.tar.gz"}
        outputs: ["dist/*.tar.gz", "dist/*.whl"]
    """,
    )
    r = run_plan(tmp_path, "--output", "json")
    assert r.code == 1
    assert r.json["steps"][0]["error"] == "declared output not produced: dist/*.whl"


def test_cache_true_alone_keys_on_tool_args_and_upstream_and_false_turns_it_off(
    tmp_path: Path,
) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: pure, tool: shell, args: {cmd: "echo pure"}, cache: true}
      - {id: off, tool: shell, args: {cmd: "echo off"}, sources: ["src"], cache: false}
      - {id: plain, tool: shell, args: {cmd: "echo plain"}}
    """,
    )
    (tmp_path / "src").mkdir()
    run_plan(tmp_path)
    r = run_plan(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r) == {"pure": "cached", "off": "succeeded", "plain": "succeeded"}
    assert started_reasons(tmp_path / "e.jsonl") == {"off": "cache off", "plain": "cache off"}


def test_status_and_resume_agree_on_cached_steps(tmp_path: Path) -> None:
    """A run that failed after hits: resume keeps the cached steps as done, and `status`,
    `--output json` and JUnit say `cached` for them, never `pending`."""
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: a, tool: shell, args: {cmd: "echo a"}, cache: true}
      - {id: gate, tool: shell, args: {cmd: "test -f ok"}, depends_on: [a]}
    """,
    )
    assert run_plan(tmp_path).code == 1
    assert run_plan(tmp_path).code == 1  # a is cached this time
    status = planrun("status", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert {s["id"]: s["status"] for s in status.json["steps"]} == {"a": "cached", "gate": "failed"}
    (tmp_path / "ok").write_text("")
    r = planrun("resume", "plan.yaml", "--output", "json", "--events", "e.jsonl", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"a": "cached", "gate": "succeeded"}
    assert "a" not in started_reasons(tmp_path / "e.jsonl")  # not run again
    status = planrun("status", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert {s["id"]: s["status"] for s in status.json["steps"]} == {
        "a": "cached",
        "gate": "succeeded",
    }


# ---- dry-run -------------------------------------------------------------------------------


def test_a_dry_run_restores_nothing_and_records_nothing(tmp_path: Path) -> None:
    project(tmp_path)
    run_plan(tmp_path)
    shutil.rmtree(tmp_path / "out")
    state = tmp_path / ".planrun/state/plan.json"
    state_before = state.read_bytes()
    recent = tmp_path / ".planrun/cache-recent.json"
    recent_before = recent.read_bytes()
    hour_ago = time.time() - 3600
    for e in cache_entry_files(tmp_path):
        os.utime(e, (hour_ago, hour_ago))
    r = run_plan(tmp_path, "--dry-run", "--output", "json")
    assert r.code == 0, r
    assert {s["id"]: s["cache"]["status"] for s in r.json["steps"]}["build"] == "hit"
    assert not (tmp_path / "out").exists()  # a hit in a dry-run restores nothing
    assert state.read_bytes() == state_before and recent.read_bytes() == recent_before
    assert all(abs(e.stat().st_mtime - hour_ago) < 1 for e in cache_entry_files(tmp_path))


def test_dry_run_json_gives_every_step_a_cache_status_and_reason(tmp_path: Path) -> None:
    project(tmp_path)
    r = run_plan(tmp_path, "--dry-run", "--output", "json")
    caches = {s["id"]: s["cache"] for s in r.json["steps"]}
    assert caches == {
        "build": {"status": "miss", "reason": "no cache entry"},
        "pack": {"status": "miss", "reason": "no cache entry"},  # never stored: says so
        "show": {"status": "off", "reason": "cache off"},
    }
    r = run_plan(tmp_path, "--dry-run", "--output", "json", "--no-cache")
    assert {s["cache"]["status"] for s in r.json["steps"]} == {"off"}
    r = run_plan(tmp_path, "--dry-run", "--output", "json", "--force=build")
    assert {s["id"]: s["cache"] for s in r.json["steps"]}["build"] == {
        "status": "miss",
        "reason": "forced",
    }


# ---- flags -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("plan.yaml", "--force", "--output", "json"),  # followed by another option
        ("plan.yaml", "--output", "json", "--force"),  # last
    ],
)
def test_a_bare_force_runs_every_step(tmp_path: Path, args: tuple[str, ...]) -> None:
    project(tmp_path)
    run_plan(tmp_path)
    r = planrun("run", *args, cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "pack": "succeeded", "show": "succeeded"}


def test_force_equals_takes_the_id_and_a_following_target_stays_a_target(tmp_path: Path) -> None:
    project(tmp_path)
    run_plan(tmp_path)
    r = planrun("run", "plan.yaml", "--force=build", "pack", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "pack": "cached"}  # `pack` is the target
    r = planrun("run", "plan.yaml", "--force", "build", "pack", "--output", "json", cwd=tmp_path)
    assert statuses(r) == {"build": "succeeded", "pack": "succeeded"}  # two forced targets


def test_no_cache_writes_no_stat_records_and_no_recent_entries(tmp_path: Path) -> None:
    project(tmp_path)
    old = time.time() - 3600
    for f in (tmp_path / "src").iterdir():
        os.utime(f, (old, old))  # old enough to be recorded by a run that records
    run_plan(tmp_path, "--no-cache")
    names = {p.name for p in (tmp_path / ".planrun").iterdir()}
    assert not names & {"cache", "stat-records", "listings", "cache-recent.json"}, names


def test_stat_records_stay_in_the_working_directory_with_a_cache_dir(tmp_path: Path) -> None:
    work = project(tmp_path / "work")
    old = time.time() - 3600
    for f in (work / "src").iterdir():
        os.utime(f, (old, old))
    shared = tmp_path / "shared"
    assert run_plan(work, "--cache-dir", str(shared)).code == 0
    assert (work / ".planrun/stat-records").is_file()
    assert not (work / ".planrun/cache").exists()
    assert sorted(p.name for p in shared.iterdir()) == ["CACHEDIR.TAG", "blobs", "entries"]


def test_a_relative_cache_dir_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    work = project(tmp_path / "work")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = planrun("-C", str(work), "run", "plan.yaml", "--cache-dir", "ci-cache", cwd=elsewhere)
    assert r.code == 0, r
    assert len(list((work / "ci-cache/entries").iterdir())) == 2
    assert not (elsewhere / "ci-cache").exists()
    info = planrun(
        "-C",
        str(work),
        "cache",
        "info",
        "--output",
        "json",
        "--cache-dir",
        "ci-cache",
        cwd=elsewhere,
    )
    assert info.json == {
        "dir": info.json["dir"],
        "entries": 2,
        "bytes": info.json["bytes"],
    }
    assert Path(info.json["dir"]).resolve() == (work / "ci-cache").resolve()


def test_an_overlap_warning_names_an_odd_output_on_one_line(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - id: gen
        tool: shell
        args: {cmd: "printf x > 'src/new\\nline.py'"}
        sources: ["src"]
        outputs: ["src/*.py"]
    """,
    )
    (tmp_path / "src").mkdir()
    r = run_plan(tmp_path)
    assert r.code == 0, r
    (line,) = [ln for ln in r.err.splitlines() if "outputs are also its sources" in ln]
    assert "src/new\\nline.py" in line


# ---- foreach -------------------------------------------------------------------------------

FANNED = """
    variables: {pkgs: [a, b]}
    steps:
      - {id: lint, tool: shell, foreach: "${pkgs}", args: {cmd: "echo ${item}"}, cache: true}
      - {id: other, tool: shell, args: {cmd: "echo other"}, cache: true}
"""


def test_force_on_a_foreach_step_runs_each_of_its_instances(tmp_path: Path) -> None:
    write_indented_plan(tmp_path, FANNED)
    run_plan(tmp_path)
    r = run_plan(tmp_path, "--force=lint", "--output", "json", "--events", "e.jsonl")
    assert r.code == 0, r
    assert statuses(r) == {
        "lint": "succeeded",
        "lint[0]": "succeeded",
        "lint[1]": "succeeded",
        "other": "cached",
    }
    reasons = started_reasons(tmp_path / "e.jsonl")
    assert reasons["lint[0]"] == reasons["lint[1]"] == "forced"
    r = run_plan(tmp_path, "--force=lint[1]", "--output", "json")
    assert r.code == 0, r
    assert statuses(r)["lint[0]"] == "cached" and statuses(r)["lint[1]"] == "succeeded"
    r = run_plan(tmp_path, "--force=other[0]")
    assert r.code == 2 and "other[0]" in one_line_error(r)


# ---- cache off: each step that runs says why -------------------------------------------------


def test_no_cache_says_cache_off_on_the_console_and_in_the_dry_run(tmp_path: Path) -> None:
    """With `--no-cache` every step runs because the cache is off, and says so (chosen: the
    console and the text dry-run show `cache off` only under --no-cache or --explain, so that
    plans that cache a few steps do not print it under every other one)."""
    project(tmp_path)
    run_plan(tmp_path)
    r = run_plan(tmp_path, "--no-cache")
    assert "build started [shell]: cache off" in r.err, r
    assert "show started [echo]: cache off" in r.err
    plain = run_plan(tmp_path, "--force")
    assert "show started [echo]" in plain.err
    assert "show started [echo]: cache off" not in plain.err  # not asked for
    dry = run_plan(tmp_path, "--dry-run", "--no-cache")
    assert dry.out.count("cache: miss (cache off)") == 3, dry
    dry = run_plan(tmp_path, "--dry-run")
    assert "cache: hit" in dry.out and "cache off" not in dry.out
    dry = run_plan(tmp_path, "--dry-run", "--explain")
    assert dry.out.count("cache: miss (cache off)") == 1  # `show`, which caches nothing


def test_a_hit_under_stream_replays_its_output_as_streamed_lines(tmp_path: Path) -> None:
    """`--stream` shows a running step's output as `[ID] line`; a hit's recorded output is
    shown the same way, marked as replayed."""
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: warn, tool: shell, args: {cmd: "echo to-out; echo to-err >&2"}, cache: true}
    """,
    )
    ran = run_plan(tmp_path, "--stream")
    assert "[warn] to-out" in ran.err, ran
    hit = run_plan(tmp_path, "--stream")
    assert "warn cached" in hit.err
    assert "[warn] (replayed from the cache)\n[warn] to-out\n[warn] to-err\n" in hit.err, hit


def test_sources_and_a_relative_cache_dir_variable_follow_minus_c(tmp_path: Path) -> None:
    """Globs, `.planrun/` and a relative PLANRUN_CACHE_DIR are relative to the working
    directory, which `-C DIR` sets."""
    work = project(tmp_path / "work")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PLANRUN_CACHE_DIR": "ci"}

    def run(*args: str) -> Any:
        r = planrun("-C", str(work), "run", "plan.yaml", *args, cwd=elsewhere, env=env)
        assert_no_traceback(r)
        return r

    assert run().code == 0
    assert (work / "ci/entries").is_dir() and not (elsewhere / "ci").exists()
    assert statuses(run("--output", "json"))["build"] == "cached"
    (work / "src/m2.py").write_text("print('two')\n")
    run("--events", str(tmp_path / "e.jsonl"))
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed: src/m2.py"
    info = planrun("-C", str(work), "cache", "info", "--output", "json", cwd=elsewhere, env=env)
    assert Path(info.json["dir"]).resolve() == (work / "ci").resolve()
    assert info.json["entries"] == 4  # build and pack, before and after the change


def test_a_dry_run_previews_each_foreach_instance(tmp_path: Path) -> None:
    write_indented_plan(tmp_path, FANNED)
    run_plan(tmp_path)
    r = run_plan(tmp_path, "--dry-run", "--output", "json", "--var", "pkgs=[a, c]")
    caches = {s["id"]: s["cache"] for s in r.json["steps"]}
    assert caches["lint[0]"] == {"status": "hit", "reason": "cached"}
    assert caches["lint[1]"]["status"] == "miss"


def test_a_renamed_source_with_the_same_content_changes_the_key(tmp_path: Path) -> None:
    """The key covers each source's path as well as its content."""
    project(tmp_path)
    run_plan(tmp_path)
    (tmp_path / "src/m0.py").rename(tmp_path / "src/z0.py")
    r = run_plan(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r)["build"] == "succeeded"
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed: src/m0.py (+1 more)"


def test_outputs_alone_make_a_step_cached(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: gen, tool: shell, args: {cmd: "mkdir -p o && echo x > o/f"}, outputs: ["o/f"]}
    """,
    )
    run_plan(tmp_path)
    (tmp_path / "o/f").unlink()
    r = run_plan(tmp_path, "--output", "json")
    assert statuses(r) == {"gen": "cached"} and (tmp_path / "o/f").read_text() == "x\n"


def test_hits_are_not_charged_to_tool_caps(tmp_path: Path) -> None:
    steps = """
    steps:
      - {id: a, tool: shell, args: {cmd: "echo a"}, cache: true}
      - {id: b, tool: shell, args: {cmd: "echo b"}, cache: true}
      - {id: c, tool: shell, args: {cmd: "echo c"}}
    """
    write_indented_plan(tmp_path, "\n    limits: {tool_caps: {shell: 3}}" + steps)
    assert run_plan(tmp_path).code == 0
    write_indented_plan(tmp_path, "\n    limits: {tool_caps: {shell: 1}}" + steps)
    r = run_plan(tmp_path, "--output", "json")
    assert r.code == 0, r
    assert statuses(r) == {"a": "cached", "b": "cached", "c": "succeeded"}


def test_env_read_with_get_is_in_the_key(tmp_path: Path) -> None:
    """`env.get('FLAG')` reads FLAG: its value is in the key even when the resolved args do
    not show it (here only whether it is set)."""
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo ${'on' if env.get('FLAG') else 'off'}"}, cache: true}
    """,
    )
    run_plan(tmp_path, env={"FLAG": "1"})
    assert statuses(run_plan(tmp_path, "--output", "json", env={"FLAG": "1"})) == {"s": "cached"}
    r = run_plan(tmp_path, "--output", "json", "--events", "e.jsonl", env={"FLAG": "2"})
    assert statuses(r) == {"s": "succeeded"}
    assert started_reasons(tmp_path / "e.jsonl") == {"s": "args changed"}


def test_the_dry_run_agrees_with_the_run_on_a_step_reading_a_hits_status(tmp_path: Path) -> None:
    """A hit counts as succeeded for expressions: `steps.build.status` is `succeeded` in the
    run, so the dry-run's preview (which resolves args the same way) says hit too."""
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: build, tool: shell, args: {cmd: "echo b"}, cache: true}
      - {id: c, tool: shell, args: {cmd: "echo ${steps.build.status}"}, depends_on: [build], cache: true}
    """,
    )
    run_plan(tmp_path)
    r = run_plan(tmp_path, "--output", "json")
    assert statuses(r) == {"build": "cached", "c": "cached"}
    assert r.json["steps"][1]["result"]["stdout"] == "succeeded\n"
    dry = run_plan(tmp_path, "--dry-run", "--output", "json")
    assert {s["id"]: s["cache"]["status"] for s in dry.json["steps"]} == {
        "build": "hit",
        "c": "hit",
    }


@pytest.mark.parametrize(
    "flags, cache", [(("--no-cache",), ""), ((), ", cache: false")], ids=["no-cache", "false"]
)
def test_a_declared_output_is_checked_with_the_cache_off_too(
    tmp_path: Path, flags: tuple[str, ...], cache: str
) -> None:
    """Whether a step produced what it declares does not depend on the cache: a CI job that
    runs `--no-cache` fails on a missing artifact like any other run."""
    (tmp_path / "plan.yaml").write_text(
        "steps:\n"
        f'  - {{id: w, tool: shell, args: {{cmd: "true"}}, outputs: ["dist/*.whl"]{cache}}}\n'
    )
    r = run_plan(tmp_path, "--output", "json", *flags)
    assert r.code == 1, r
    assert r.json["steps"][0]["error"] == "declared output not produced: dist/*.whl"
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist/a.whl").write_text("")
    assert run_plan(tmp_path, *flags).code == 0


@pytest.mark.parametrize("recent", ["a\u0000b", "../../../../outside", "x" * 5000, "", 7])
def test_a_hostile_recent_entry_file_only_costs_the_reason(tmp_path: Path, recent: Any) -> None:
    """`.planrun/cache-recent.json` may come with a repository: a key in it that is not a
    SHA-256 names no entry (`no cache entry`), never a file elsewhere, never an error."""
    project(tmp_path)
    run_plan(tmp_path)
    (tmp_path / ".planrun/cache-recent.json").write_text(
        json.dumps({"plan": {"build": recent, "pack": recent}})
    )
    (tmp_path / "src/m0.py").write_text("print('changed')\n")
    dry = run_plan(tmp_path, "--dry-run")
    assert dry.code == 0 and "cache: miss (no cache entry)" in dry.out, dry
    r = run_plan(tmp_path, "--events", "e.jsonl")
    assert r.code == 0, r
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "no cache entry"


@pytest.mark.slow  # a 100 MB result
def test_a_result_too_large_for_an_entry_is_said_not_to_be_stored(tmp_path: Path) -> None:
    """An entry is at most 96 MiB (store.MAX_ENTRY_BYTES): a step whose result is larger runs,
    succeeds, and is said not to be stored, each time it runs."""
    (tmp_path / "big.py").write_text("def big():\n    return 'x' * (100 << 20)\n")
    (tmp_path / "plan.yaml").write_text(
        "steps:\n  - {id: big, tool: python, args: {function: 'big:big'}, cache: true}\n"
    )
    for _ in range(2):
        r = run_plan(tmp_path, "--no-state", "-q")
        assert r.code == 0, r
        assert "step 'big': not stored in the cache (its entry would be 100 MiB, over the" in r.err
    assert cache_entry_files(tmp_path) == []


def test_a_huge_file_in_place_of_a_source_manifest_is_not_read(tmp_path: Path) -> None:
    """The reason of a miss reads the previous entry's list of sources from the shared cache
    directory: a file of gigabytes put under that blob's name is not read (it is not what its
    name says, whatever it holds), and the run, its memory capped, only loses the file names."""
    project(tmp_path)
    run_plan(tmp_path)
    (entry,) = [e for e in cache_entry_files(tmp_path) if '"step": "build"' in e.read_text()]
    doc = json.loads(entry.read_bytes().partition(b"\n")[2])
    manifest = tmp_path / ".planrun/cache/blobs" / doc["material"]["sources"]
    manifest.unlink()
    with manifest.open("wb") as f:  # sparse: no disk, but 1 GiB to read
        f.truncate(1 << 30)
    (tmp_path / "src/m0.py").write_text("print('changed')\n")
    r = bounded_planrun(tmp_path, "run", "plan.yaml", "--events", "e.jsonl")
    assert r.code == 0, r
    assert_no_traceback(r)
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed", r


def test_content_not_mtime_decides(tmp_path: Path) -> None:
    """A touched source (new mtime, same bytes) still hits; same size and mtime with other
    bytes is a change."""
    project(tmp_path)
    run_plan(tmp_path)
    src = tmp_path / "src/m0.py"
    later = time.time() + 5
    os.utime(src, (later, later))
    assert statuses(run_plan(tmp_path, "--output", "json"))["build"] == "cached"
    st = src.stat()
    src.write_text("print(9)\n")  # same length as "print(0)\n"
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = run_plan(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r)["build"] == "succeeded"
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed: src/m0.py"


def test_a_dry_run_previews_a_foreach_over_a_hits_result(tmp_path: Path) -> None:
    """The list of a foreach over a cached step's result is known in a dry-run once that step
    hits: its `ID[*]` line says hit when every instance would, else the first miss's reason."""
    write_indented_plan(
        tmp_path,
        """
    variables: {extra: ""}
    steps:
      - {id: list, tool: shell, args: {cmd: "echo a b ${extra}"}, result_variable: files, cache: true}
      - {id: lint, tool: shell, foreach: "${files.stdout.split()}", args: {cmd: "echo ${item}"}, cache: true}
    """,
    )
    run_plan(tmp_path)
    dry = run_plan(tmp_path, "--dry-run", "--output", "json")
    assert {s["id"]: s["cache"] for s in dry.json["steps"]}["lint[*]"] == {
        "status": "hit",
        "reason": "cached",
    }
    assert statuses(run_plan(tmp_path, "--output", "json"))["lint[1]"] == "cached"
    dry = run_plan(tmp_path, "--dry-run", "--output", "json", "--var", "extra=c")
    caches = {s["id"]: s["cache"] for s in dry.json["steps"]}
    assert caches["list"]["status"] == "miss"
    assert caches["lint[*]"] == {"status": "miss", "reason": "upstream changed: list"}


def test_streamed_lines_of_foreach_instances_carry_their_bare_id(tmp_path: Path) -> None:
    write_indented_plan(tmp_path, FANNED)
    ran = run_plan(tmp_path, "--stream")
    assert "[lint[0]] a\n" in ran.err and "[  lint" not in ran.err, ran
    hit = run_plan(tmp_path, "--stream")
    assert "[lint[1]] (replayed from the cache)\n[lint[1]] b\n" in hit.err, hit


def test_a_source_edited_while_its_step_ran_stores_nothing(tmp_path: Path) -> None:
    # The key is made from the sources as they were before the step ran; an edit saved while it
    # ran (here by the step itself, when `edit` exists) makes outputs of other bytes. Stored
    # under the key of the old bytes, they would come back, wrong, once the source is reverted.
    (tmp_path / "in.txt").write_text("A\n")
    (tmp_path / "edit").write_text("")
    (tmp_path / "plan.yaml").write_text(
        """
steps:
  - id: build
    run: "if [ -f edit ]; then echo B > in.txt; fi; cat in.txt > out.txt"
    sources: [in.txt]
    outputs: [out.txt]
""".lstrip()
    )
    r = go(tmp_path, "--output", "json")
    assert r.code == 0 and statuses(r)["build"] == "succeeded"
    assert "in.txt changed while it ran: not stored in the cache" in r.err
    assert (tmp_path / "out.txt").read_text() == "B\n"
    (tmp_path / "edit").unlink()
    (tmp_path / "in.txt").write_text("A\n")  # back to the bytes the key was made of
    r = go(tmp_path, "--output", "json")
    assert statuses(r)["build"] == "succeeded"
    assert (tmp_path / "out.txt").read_text() == "A\n"
    r = go(tmp_path, "--output", "json")
    assert statuses(r)["build"] == "cached" and "changed while it ran" not in r.err


def test_a_dotenv_file_edited_while_a_step_ran_stores_nothing(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FLAVOUR=a\n")
    (tmp_path / "plan.yaml").write_text(
        """
dotenv: [.env]
steps:
  - id: build
    run: "echo FLAVOUR=b > .env; echo $FLAVOUR > out.txt"
    outputs: [out.txt]
""".lstrip()
    )
    r = go(tmp_path, "--output", "json")
    assert r.code == 0 and statuses(r)["build"] == "succeeded"
    assert ".env changed while it ran: not stored in the cache" in r.err
    assert not cache_entry_files(tmp_path)


MCP_STEP = """
servers:
  h: {command: %s, args: [%s], env: {FLAVOUR: "%s"}}
steps:
  - id: say
    tool: h.say
    args: {text: hi}
    cache: true
"""


def test_the_server_an_mcp_tool_comes_from_is_part_of_its_key(tmp_path: Path) -> None:
    # `h.say` names a tool of whatever server `h` is: another program, other arguments or
    # another environment is another tool, which may answer otherwise.
    server = Path(__file__).parent / "mcp_servers" / "hostile_server.py"
    other = tmp_path / "other_server.py"
    shutil.copy(server, other)

    def plan(script: Path, flavour: str) -> None:
        (tmp_path / "plan.yaml").write_text(MCP_STEP % (sys.executable, script, flavour))

    plan(server, "${env.FLAVOUR_GIVEN}")
    env = {"FLAVOUR_GIVEN": "a"}
    assert statuses(go(tmp_path, "--output", "json", env=env))["say"] == "succeeded"
    assert statuses(go(tmp_path, "--output", "json", env=env))["say"] == "cached"
    r = go(tmp_path, "--output", "json", env={"FLAVOUR_GIVEN": "b"})
    assert statuses(r)["say"] == "succeeded" and "say started [h.say]: args changed" in r.err, r
    plan(server, "b")
    assert statuses(go(tmp_path, "--output", "json"))["say"] == "succeeded"
    assert statuses(go(tmp_path, "--output", "json"))["say"] == "cached"
    plan(other, "b")
    r = go(tmp_path, "--output", "json")
    assert statuses(r)["say"] == "succeeded" and "args changed" in r.err, r

"""Incremental runs end to end: real plans, real files, real `planrun` processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_no_traceback, planrun

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
    r = go(tmp_path, "--var", "flavour=spicy", "--force", "pack", "--explain", "--output", "json")
    assert statuses(r) == {"build": "cached", "pack": "succeeded", "show": "succeeded"}
    assert "pack started [shell]: forced" in r.err and "build cached" in r.err
    assert "show started [echo]: cache off" in r.err  # --explain: every step
    r = go(tmp_path, "--no-cache", "--events", "d.jsonl", "--output", "json")
    assert set(started_reasons(tmp_path / "d.jsonl").values()) == {"cache off"}


def test_force_takes_step_ids_and_rejects_unknown_ones(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    r = go(tmp_path, "--force", "build", "--force", "pack", "--output", "json")
    assert statuses(r) == {"build": "succeeded", "pack": "succeeded", "show": "succeeded"}
    r = go(tmp_path, "--force", "biuld")
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


def test_force_with_the_default_plan_takes_the_step_id(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / "plan.yaml").rename(tmp_path / "planrun.yaml")
    assert planrun("run", cwd=tmp_path).code == 0
    r = planrun("run", "--force", "pack", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "cached", "pack": "succeeded", "show": "succeeded"}


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

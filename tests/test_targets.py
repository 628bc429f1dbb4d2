"""What a run selects: `default`, `aliases`, `internal`, `--force` as a flag, and resume hints
and resumes that repeat the selection."""

from __future__ import annotations

import json
import shlex
import textwrap

import pytest

from tests.conftest import (
    assert_no_traceback,
)

PLAN = """
    default: [test]
    steps:
      - id: setup
        internal: true
        tool: shell
        args: {cmd: "echo x >> setup.log"}
      - id: build
        tool: shell
        depends_on: [setup]
        cache: true
        args: {cmd: "echo x >> build.log"}
      - id: test
        aliases: [t, check]
        tool: shell
        depends_on: [build]
        cache: true
        args: {cmd: "echo x >> test.log"}
      - id: docs
        tool: shell
        cache: true
        args: {cmd: "echo x >> docs.log"}
"""


def statuses(result) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {s["id"]: s["status"] for s in result.json["steps"]}


# ---- default ---------------------------------------------------------------------------------


def test_default_runs_its_steps_and_what_they_depend_on(run, write, tmp_path):
    write("planrun.yaml", PLAN)
    r = run("run", "--output", "json")
    assert r.code == 0, r
    assert statuses(r) == {"setup": "succeeded", "build": "succeeded", "test": "succeeded"}
    assert not (tmp_path / "docs.log").exists()


def test_without_default_every_step_runs_internal_ones_included(run, write):
    write("planrun.yaml", PLAN.replace("default: [test]\n", ""))
    r = run("run", "--output", "json")
    assert r.code == 0, r
    assert set(statuses(r)) == {"setup", "build", "test", "docs"}


def test_an_unknown_id_in_default_is_invalid_at_its_position(run, write):
    write("planrun.yaml", PLAN.replace("default: [test]", "default: [docs, tset]"))
    r = run("validate")
    assert r.code == 3, r
    assert "planrun.yaml:1:17: error: default: no step 'tset'" in r.out, r
    assert "did you mean 'test'?" in r.out


def test_an_empty_default_is_invalid_rather_than_running_nothing(run, write, tmp_path):
    write("planrun.yaml", PLAN.replace("default: [test]", "default: []"))
    r = run("validate")
    assert r.code == 3, r
    assert "planrun.yaml:1:10: error: default names no step" in r.out, r
    r = run("run")
    assert r.code == 3 and "default names no step" in r.out, r
    assert_no_traceback(r)
    assert not list(tmp_path.glob("*.log"))


def test_default_may_name_an_alias_but_not_an_internal_step(run, write):
    write("planrun.yaml", PLAN.replace("default: [test]", "default: [t]"))
    assert run("validate").code == 0
    write("planrun.yaml", PLAN.replace("default: [test]", "default: [setup]"))
    r = run("validate")
    assert r.code == 3 and "default: step 'setup' is internal" in r.out, r


def test_the_schema_describes_the_new_keys(run):
    schema = run("schema").json
    step = schema["$defs"]["Step"]["properties"]
    assert "target" in schema["properties"]["default"]["description"]
    assert "alias" in step["aliases"]["description"].lower()
    assert "list" in step["internal"]["description"]


# ---- aliases ---------------------------------------------------------------------------------


@pytest.mark.parametrize("how", [("t",), ("--only", "check")])
def test_an_alias_is_a_target(run, write, how):
    write("planrun.yaml", PLAN)
    r = run("run", *how, "--output", "json")
    assert r.code == 0, r
    assert list(statuses(r)) == ["setup", "build", "test"]


@pytest.mark.parametrize(
    ("aliases", "message"),
    [
        ("[docs]", "alias 'docs' of step 'test' is the id of a step"),
        ("[t, d]", "alias 'd' of step 'docs' is also an alias of step 'test'"),
    ],
)
def test_an_alias_that_clashes_is_invalid(run, write, aliases, message):
    plan = PLAN.replace("aliases: [t, check]", f"aliases: {aliases}")
    plan = plan.replace("- id: docs\n", "- id: docs\n        aliases: [d]\n")
    write("planrun.yaml", plan)
    r = run("validate")
    assert r.code == 3, r
    assert message in r.out and "planrun.yaml:" in r.out, r


def test_an_unknown_key_near_aliases_gets_a_hint(run, write):
    write("planrun.yaml", PLAN.replace("aliases:", "alias:"))
    r = run("validate")
    assert r.code == 3 and "did you mean 'aliases'?" in r.out, r


# ---- internal --------------------------------------------------------------------------------


def test_list_hides_internal_steps_and_list_all_shows_them(run, write):
    write("planrun.yaml", PLAN)
    shown = run("list", "planrun.yaml", "--output", "json")
    assert shown.code == 0, shown
    rows = {s["id"]: s for s in shown.json["steps"]}
    assert set(rows) == {"build", "test", "docs"}
    assert rows["build"]["depends_on"] == ["setup"]  # still named as a dependency
    assert rows["test"]["aliases"] == ["t", "check"]
    text = run("list", "planrun.yaml")
    assert "setup  " not in text.out and "after: setup" in text.out, text
    every = run("list", "planrun.yaml", "--all", "--output", "json")
    assert {s["id"] for s in every.json["steps"]} == {"setup", "build", "test", "docs"}


def test_list_all_marks_the_internal_steps(run, write):
    write("planrun.yaml", PLAN)
    every = run("list", "planrun.yaml", "--all", "--output", "json")
    assert every.code == 0, every
    marked = {s["id"]: s.get("internal", False) for s in every.json["steps"]}
    assert marked == {"setup": True, "build": False, "test": False, "docs": False}
    text = run("list", "planrun.yaml", "--all")
    setup = next(line for line in text.out.splitlines() if line.strip().startswith("setup "))
    assert setup.endswith("(internal)"), text
    assert "(internal)" not in run("list", "planrun.yaml").out


@pytest.mark.parametrize("how", [("setup",), ("--only", "setup")])
def test_an_internal_step_is_refused_as_a_target(run, write, tmp_path, how):
    write("planrun.yaml", PLAN)
    r = run("run", *how)
    assert r.code == 2, r
    assert "step 'setup' is internal" in r.err
    assert not (tmp_path / "setup.log").exists()
    assert_no_traceback(r)


def test_an_internal_step_named_by_its_alias_is_refused_under_its_id(run, write, tmp_path):
    write("planrun.yaml", PLAN.replace("internal: true", "internal: true\n        aliases: [su]"))
    r = run("run", "su")
    assert r.code == 2, r
    assert "step 'setup' is internal" in r.err, r.err
    assert not (tmp_path / "setup.log").exists()


# ---- --force is a flag -----------------------------------------------------------------------


def test_force_before_a_target_forces_only_the_target(run, write, tmp_path):
    write("planrun.yaml", PLAN)
    assert run("run", "test", "--no-state").code == 0
    for args in (("--force", "test"), ("test", "--force")):
        r = run("run", *args, "--no-state", "--output", "json")
        assert r.code == 0, r
        assert statuses(r) == {"setup": "succeeded", "build": "cached", "test": "succeeded"}
    assert (tmp_path / "test.log").read_text().count("x") == 3
    assert not (tmp_path / "docs.log").exists()  # --force took no step as its value


def test_bare_force_forces_the_default_steps(run, write):
    write("planrun.yaml", PLAN)
    assert run("run", "--no-state").code == 0
    r = run("run", "--force", "--no-state", "--output", "json")
    assert statuses(r) == {"setup": "succeeded", "build": "cached", "test": "succeeded"}, r


def test_bare_force_without_default_forces_every_step(run, write):
    write("planrun.yaml", PLAN.replace("default: [test]\n", ""))
    assert run("run", "--no-state").code == 0
    r = run("run", "--force", "--no-state", "--output", "json")
    assert set(statuses(r).values()) == {"succeeded"}, r


def test_force_equals_id_forces_a_selected_step_and_selects_nothing(run, write, tmp_path):
    write("planrun.yaml", PLAN)
    assert run("run", "test", "--no-state").code == 0
    r = run("run", "t", "--force=build", "--force=docs", "--no-state", "--output", "json")
    assert r.code == 0, r
    assert statuses(r) == {"setup": "succeeded", "build": "succeeded", "test": "cached"}
    assert not (tmp_path / "docs.log").exists()
    r = run("run", "test", "--force=t", "--no-state", "--output", "json")  # an alias
    assert statuses(r) == {"setup": "succeeded", "build": "cached", "test": "succeeded"}, r
    r = run("run", "test", "--force=biuld", "--no-state")
    assert r.code == 2 and "did you mean 'build'?" in r.err, r


def test_force_before_the_plan_file_is_a_flag(run, write):
    write("ci.yaml", PLAN)
    r = run("run", "--force", "ci.yaml", "--no-state", "--output", "json")
    assert r.code == 0 and "test" in statuses(r), r


# ---- resume hints and resumes repeat the selection ---------------------------------------------

GATED = """
    secrets: [token]
    variables: {token: none, flavour: plain}
    steps:
      - id: test
        tool: shell
        args: {cmd: "echo ${flavour} >> test.log"}
      - id: wheel
        tool: shell
        depends_on: [test]
        args: {cmd: "test -e fixed"}
      - id: publish
        tool: shell
        approval: true
        depends_on: [test, wheel]
        args: {cmd: "echo published"}
"""


def test_the_resume_hint_repeats_the_selection_and_resumes_it(run, write, tmp_path):
    write("my plan.yaml", GATED)
    r = run("run", "my plan.yaml", "test", "wheel", "--var", "flavour=it's", "--var", "token=s3")
    assert r.code == 1, r
    hint = next(line for line in r.err.splitlines() if line.startswith("resume with: "))
    command = hint.removeprefix("resume with: ")
    assert command.startswith("planrun resume 'my plan.yaml' test wheel --var "), hint
    assert "s3" not in r.err and "# and --var token=...: secrets are not repeated" in command
    words = shlex.split(command, comments=True)
    assert words[words.index("--var") + 1] == "flavour=it's"
    (tmp_path / "fixed").touch()
    again = run(*words[1:], "--var", "token=s3", "--output", "json")
    assert again.code == 0, again  # not blocked by publish: the same selection
    assert statuses(again) == {"test": "succeeded", "wheel": "succeeded"}, again
    assert (tmp_path / "test.log").read_text() == "it's\n"  # test kept, not run again


def test_resume_without_targets_resumes_the_targeted_selection(run, write, tmp_path):
    write("planrun.yaml", GATED)
    assert run("run", "test", "wheel").code == 1
    (tmp_path / "fixed").touch()
    r = run("resume", "--output", "json")
    assert r.code == 0, r
    assert statuses(r) == {"test": "succeeded", "wheel": "succeeded"}
    state = json.loads((tmp_path / ".planrun/state/planrun.json").read_text())
    assert state["targets"] == ["test", "wheel"]


def test_a_hint_names_the_state_file_it_resumes(run, write):
    write("planrun.yaml", GATED)
    r = run("run", "wheel", "--state", "s.json")
    assert "resume with: planrun resume planrun.yaml wheel --state s.json" in r.err, r


def test_the_resume_hint_repeats_the_remote_cache_options_never_its_password(run, write, tmp_path):
    """A resume of a CI job shares the cache the run shared: the remote, read-only (a
    pull-request build resumed must not upload) and its timeout are repeated; a URL with a
    password is left out and named in the comment, as a secret `--var` is."""
    from bench._nginx import free_port

    write("planrun.yaml", GATED)
    url = f"http://127.0.0.1:{free_port()}/cache"  # nothing listens: one warning, the run goes on
    r = run(
        "run",
        "wheel",
        "--remote-cache",
        url,
        "--remote-cache-read-only",
        "--remote-cache-timeout",
        "0.5",
    )
    assert r.code == 1, r
    words = _hint_words(r)
    assert words[words.index("--remote-cache") + 1] == url, words
    assert "--remote-cache-read-only" in words
    assert words[words.index("--remote-cache-timeout") + 1] == "0.5", words
    (tmp_path / "fixed").touch()
    again = run(*words[1:], "--output", "json")
    assert again.code == 0 and statuses(again) == {"test": "succeeded", "wheel": "succeeded"}
    secret = url.replace("http://", "http://ci:pa55@")
    (tmp_path / "fixed").unlink()
    r = run("run", "wheel", "--remote-cache", secret, "--remote-cache-timeout", "0.5")
    assert r.code == 1, r
    hint = next(line for line in r.err.splitlines() if line.startswith("resume with: "))
    assert "pa55" not in hint and "--remote-cache" not in _hint_words(r), hint
    assert "# and --remote-cache URL: its password is not repeated" in hint, hint


def test_the_resume_hint_repeats_the_cache_directory(run, write, tmp_path):
    """A CI job keeps its step cache in a directory of its own (`--cache-dir`): its resume
    uses that cache too, the path as given (relative to where planrun started)."""
    write(
        "planrun.yaml",
        """
        steps:
          - {id: build, run: "echo x > out.txt", outputs: [out.txt]}
          - {id: test, run: "test -f fixed", depends_on: [build]}
        """,
    )
    r = run("run", "--cache-dir", "ci cache")
    assert r.code == 1, r
    words = _hint_words(r)
    assert words[words.index("--cache-dir") + 1] == "ci cache", words
    assert (tmp_path / "ci cache").is_dir()
    (tmp_path / "fixed").touch()
    again = run(*words[1:], "--output", "json")
    assert again.code == 0 and statuses(again) == {"build": "succeeded", "test": "succeeded"}
    assert not (tmp_path / ".planrun" / "cache").exists()
    # from a directory below, where the plan is found: the path stays as it was given there
    (tmp_path / "fixed").unlink()
    here = tmp_path / "sub"
    here.mkdir()
    r = run("run", "--cache-dir", "../ci cache", cwd=here)
    assert r.code == 1, r
    words = _hint_words(r)
    assert words[words.index("--cache-dir") + 1] == "../ci cache", words


def test_the_resume_hint_repeats_no_cache(run, write, tmp_path):
    """A run kept off the cache (`--no-cache`) is resumed off it too: the steps still to run
    are not taken from an earlier run's entries."""
    write(
        "planrun.yaml",
        """
        steps:
          - {id: build, run: "date +%s%N > out.txt", outputs: [out.txt], sources: [src.txt]}
          - {id: test, run: "test -f fixed", depends_on: [build]}
        """,
    )
    (tmp_path / "src.txt").write_text("1\n")
    assert run("run", "build").code == 0  # an entry for build in the cache
    r = run("run", "--no-cache")
    assert r.code == 1, r
    words = _hint_words(r)
    assert "--no-cache" in words, words
    (tmp_path / "fixed").touch()
    again = run(*words[1:], "--output", "json")
    assert again.code == 0, again


def test_completion_offers_aliases_and_no_internal_step(tmp_path):
    from tests.test_completion import complete

    (tmp_path / "planrun.yaml").write_text(textwrap.dedent(PLAN))
    assert complete(tmp_path, "run --force ") == ["build", "test", "t", "check", "docs"]
    assert complete(tmp_path, "run --only c") == ["check"]


def _hint_words(r):  # type: ignore[no-untyped-def]
    hint = next(line for line in r.err.splitlines() if line.startswith("resume with: "))
    return shlex.split(hint.removeprefix("resume with: "), comments=True)


def test_the_resume_hint_of_a_plan_found_in_a_parent_directory_works_where_it_was_run(
    run, write, tmp_path
):
    write(
        "planrun.yaml",
        """
        steps:
          - {id: a, run: "test -f fixed"}
        """,
    )
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    here = tmp_path / "sub" / "deeper"
    r = run("run", "a", cwd=here)
    assert r.code == 1, r
    words = _hint_words(r)
    (tmp_path / "fixed").touch()
    again = run(*words[1:], "--output", "json", cwd=here)
    assert again.code == 0 and statuses(again) == {"a": "succeeded"}, (words, again)


def test_the_resume_hint_gives_a_param_back_its_value(run, write, tmp_path):
    write(
        "p.yaml",
        """
        params:
          version: {required: true}
          n: {type: integer, default: 1}
          flags: {type: list, default: []}
        steps:
          - {id: a, tool: echo, args: {value: ["${version}", "${n}", "${flags}"]}}
          - {id: b, run: "test -f fixed", depends_on: [a]}
        """,
    )
    r = run("run", "p.yaml", "--var", "version=1", "--var", "n=2", "--var", "flags=[x, '3']")
    assert r.code == 1, r
    words = _hint_words(r)
    (tmp_path / "fixed").touch()
    again = run(*words[1:], "--force=a", "--output", "json")
    assert again.code == 0, (words, again)
    assert again.json["steps"][0]["result"] == ["1", 2, ["x", "3"]], words


# ---- --only --------------------------------------------------------------------------------------


def test_only_repeated_runs_every_target_and_what_they_depend_on(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}, result_variable: ra}
          - {id: b, tool: echo, args: {value: "${ra}"}}
          - {id: c, tool: echo, args: {value: 1}}
          - {id: d, tool: echo, args: {value: 1}, depends_on: [c]}
          - {id: e, tool: echo, args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "--only", "b", "--only", "d", "--output", "json")
    assert r.code == 0, r
    assert sorted(s["id"] for s in r.json["steps"]) == ["a", "b", "c", "d"]
    dry = run("run", "p.yaml", "--only", "b", "--only", "d", "--dry-run", "--output", "json")
    assert sorted(s["id"] for s in dry.json["steps"]) == ["a", "b", "c", "d"], dry


def test_targets_add_to_only_and_one_unknown_target_runs_nothing(run, write, tmp_path):
    write(
        "ci.yaml",
        """
        steps:
          - {id: build, tool: shell, args: {cmd: "touch built"}}
          - {id: docs, tool: shell, args: {cmd: "touch docs"}}
          - {id: test, tool: shell, args: {cmd: "touch tested"}}
        """,
    )
    r = run("run", "ci.yaml", "docs", "--only", "build", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["build", "docs"]
    for f in ("built", "docs"):
        (tmp_path / f).unlink()
    r = run("run", "ci.yaml", "docs", "tset", "--no-state")
    assert r.code == 2 and "no step 'tset'" in r.err and "did you mean 'test'?" in r.err, r
    r = run("run", "ci.yaml", "--only", "bulid", "--no-state")
    assert r.code == 2 and "no step 'bulid'" in r.err and "did you mean 'build'?" in r.err, r
    assert not any((tmp_path / f).exists() for f in ("built", "docs", "tested"))


def test_a_bad_alias_or_dependency_name_says_what_a_step_name_may_hold(run, write):
    write(
        "plan.yaml",
        """
        default: ["a b"]
        steps:
          - {id: a, run: echo, aliases: ["x y"], depends_on: ["c d"]}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    rule = "use letters, digits, '_', '.', '-'"
    assert f"plan.yaml:1:11: error: default[0]: bad step name 'a b': {rule}" in r.out, r.out
    assert f"plan.yaml:3:34: error: step 'a': aliases[0]: bad step name 'x y': {rule}" in r.out
    assert f"plan.yaml:3:55: error: step 'a': depends_on[0]: bad step name 'c d': {rule}" in r.out
    assert "pattern" not in r.out


def test_an_alias_in_depends_on_is_named_as_the_alias_of_its_step(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - {id: test, run: echo, aliases: [t]}
          - {id: after, run: echo, depends_on: [t]}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert (
        "step 'after' depends on unknown step 't' (did you mean 'test'? 't' is its alias" in r.out
    )


def test_a_hint_gives_a_text_that_reads_as_nan_back_as_text():
    # A variable given as a value (an MCP client's, not typed on a command line) holding the
    # text `.nan`: repeated quoted, as `--var v=.nan` is refused (YAML reads it as NaN).
    from planrun.run.request import RunRequest
    from planrun.run.resumehint import resume_hint

    hint = resume_hint(RunRequest(plan="p.yaml", variables={"v": ".nan", "w": "x"}), None, ())
    assert shlex.split(hint) == ["planrun", "resume", "p.yaml", "--var", 'v=".nan"', "--var", "w=x"]

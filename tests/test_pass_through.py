"""`planrun run [PLAN] [TARGET...] -- ARGS...`: the words after `--` are the list `cli_args`."""

from __future__ import annotations

import shlex

PLAN = """
steps:
  - id: test
    tool: shell
    args: {cmd: "printf '<%s>' ${cli_args} > got"}
    sources: [src.txt]
  - {id: other, tool: echo, args: {value: 1}}
"""


def test_words_after_the_separator_are_cli_args(run, write, tmp_path):
    write("plan.yaml", PLAN)
    write("src.txt", "x")
    r = run("run", "plan.yaml", "test", "--", "-k", "foo bar", "$(touch pwned)", "'q'")
    assert r.code == 0, r
    assert (tmp_path / "got").read_text() == "<-k><foo bar><$(touch pwned)><'q'>"
    assert not (tmp_path / "pwned").exists()


def test_without_the_separator_cli_args_is_empty(run, write, tmp_path):
    write("plan.yaml", PLAN)
    write("src.txt", "x")
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    assert (tmp_path / "got").read_text() == "<>"  # printf with no argument
    assert r.json["variables"]["cli_args"] == []


def test_cli_args_are_in_the_key_of_a_step_that_reads_them(run, write, tmp_path):
    write("plan.yaml", PLAN)
    write("src.txt", "x")
    assert run("run", "plan.yaml", "test", "--", "-k", "a").code == 0
    r = run("run", "plan.yaml", "test", "--output", "json", "--", "-k", "b")
    assert r.code == 0, r
    assert r.json["steps"][0]["status"] == "succeeded", r
    assert (tmp_path / "got").read_text() == "<-k><b>"
    r = run("run", "plan.yaml", "test", "--output", "json", "--", "-k", "b")
    assert r.json["steps"][0]["status"] == "cached", r


def test_validate_and_dry_run_know_cli_args(run, write):
    write("plan.yaml", PLAN)
    write("src.txt", "x")
    assert run("validate", "plan.yaml").code == 0
    r = run("run", "plan.yaml", "--dry-run", "--", "-x")
    assert r.code == 0, r
    assert "-x" in r.out


def test_the_resume_hint_repeats_the_words_after_the_separator(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, run: "printf '<%s>' ${cli_args} > got"}
          - {id: b, run: exit 1, depends_on: [a]}
        """,
    )
    r = run("run", "plan.yaml", "--", "-k", "a b", "$(id)")
    assert r.code == 1, r
    hint = r.err.split("resume with: ", 1)[1].splitlines()[0]
    assert hint == "planrun resume plan.yaml -- -k 'a b' '$(id)'", hint
    again = run(*shlex.split(hint)[1:])
    assert again.code == 1, again
    assert (tmp_path / "got").read_text() == "<-k><a b><$(id)>"
    assert "resume with: planrun resume plan.yaml -- -k 'a b' '$(id)'" in again.err, again

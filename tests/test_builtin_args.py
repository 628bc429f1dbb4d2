"""`validate` checks the literal arguments of built-in tools against their input schemas."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from planrun.plan.validate import validate_plan


@pytest.fixture
def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)

    def _check(text: str) -> list[str]:
        (tmp_path / "plan.yaml").write_text(textwrap.dedent(text).lstrip())
        return [d.render() for d in validate_plan("plan.yaml")]

    return _check


def test_unknown_arguments_have_a_did_you_mean(check):
    out = check("""
        steps:
          - id: a
            tool: shell
            args: {command: "make", cwdd: src}
    """)
    assert out == [
        "plan.yaml:4:12: error: step 'a': shell: unknown argument 'command' (did you mean 'cmd'?)",
        "plan.yaml:4:29: error: step 'a': shell: unknown argument 'cwdd' (did you mean 'cwd'?)",
    ]


def test_missing_required_arguments(check):
    out = check("""
        steps:
          - {id: a, tool: read_file}
          - {id: b, tool: write_file, args: {path: out.txt}}
          - {id: c, tool: plan, args: {variables: {}}}
    """)
    assert out == [
        "plan.yaml:2:5: error: step 'a': read_file: missing argument 'path'",
        "plan.yaml:3:37: error: step 'b': write_file: missing argument 'content'",
        "plan.yaml:4:31: error: step 'c': plan: missing argument 'path'",
    ]


def test_wrong_types(check):
    out = check("""
        steps:
          - {id: a, tool: shell, args: {cmd: 5, check: "yes", env: {A: [1]}}}
          - {id: b, tool: sleep, args: {seconds: "5"}}
          - {id: c, tool: http, args: {url: "ftp://x", expect_status: [200, "ok"]}}
          - {id: d, tool: python, args: {function: "no_colon", kwargs: []}}
          - {id: e, tool: shell, args: {cmd: []}}
          - {id: f, tool: sleep, args: {seconds: -1}}
    """)
    assert out == [
        "plan.yaml:2:38: error: step 'a': shell: args.cmd: expected a string or a list, got 5",
        "plan.yaml:2:48: error: step 'a': shell: args.check: expected true or false, got \"yes\"",
        "plan.yaml:2:64: error: step 'a': shell: args.env.A: expected a string, a number, "
        "true or false or null, got [1]",
        "plan.yaml:3:42: error: step 'b': sleep: args.seconds: expected a number, got \"5\"",
        "plan.yaml:4:37: error: step 'c': http: args.url: \"ftp://x\" does not match "
        "'^[Hh][Tt][Tt][Pp][Ss]?://'",
        "plan.yaml:4:69: error: step 'c': http: args.expect_status[1]: expected a whole number, "
        'got "ok"',
        "plan.yaml:5:44: error: step 'd': python: args.function: \"no_colon\" does not match "
        "'^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$'",
        "plan.yaml:5:64: error: step 'd': python: args.kwargs: expected a mapping, got []",
        "plan.yaml:6:38: error: step 'e': shell: args.cmd: expected at least 1 item, got []",
        "plan.yaml:7:42: error: step 'f': sleep: args.seconds: expected 0 or more, got -1",
    ]


def test_templated_values_are_checked_only_for_what_is_known(check):
    assert (
        check("""
        variables: {flag: true, dir: src, n: 1, url: "http://x"}
        steps:
          - {id: a, tool: shell, args: {cmd: "${dir}", check: "${flag}", cwd: "${dir}/sub"}}
          - {id: b, tool: sleep, args: {seconds: "${n}"}}
          - {id: c, tool: http, args: {url: "${url}/path"}}
          - {id: d, tool: echo, args: {value: "${n}"}}
    """)
        == []
    )
    out = check("""
        variables: {n: 1}
        steps:
          - {id: b, tool: sleep, args: {seconds: "${n} s"}}
    """)
    assert out == [
        "plan.yaml:3:42: error: step 'b': sleep: args.seconds: expected a number, "
        'got a string ("${n} s")'
    ]


def test_run_refuses_before_any_step(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        steps:
          - {id: first, tool: shell, args: {cmd: "touch ran"}}
          - {id: a, tool: shell, args: {command: "make"}, depends_on: [first]}
        """,
    )
    r = run("run", "plan.yaml")
    assert r.code == 3, r
    assert "unknown argument 'command' (did you mean 'cmd'?)" in r.out
    assert not (tmp_path / "ran").exists()
    v = run("validate", "plan.yaml", "--check-tools")
    assert v.code == 3 and "unknown argument 'command'" in v.out, v

"""CI logs on GitHub Actions: with GITHUB_ACTIONS=true each step's output is a collapsible
group (`::group::ID — title` … `::endgroup::`) and a failed step adds an `::error` annotation,
escaped as GitHub's toolkit escapes workflow commands."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import planrun

PLAN = """
variables: {token: "tok-SECRET-7"}
secrets: [token]
steps:
  - id: build
    title: Build the ${token} wheel
    tool: shell
    args: {cmd: "echo compiling; echo ::endgroup::"}
  - id: quiet
    tool: shell
    args: {cmd: "true"}
    depends_on: [build]
  - id: check
    tool: python
    args: {function: "failing:broken", kwargs: {token: "${token}"}}
    depends_on: [quiet]
"""


def unescape(text: str) -> str:
    return (
        text.replace("%0A", "\n")
        .replace("%0D", "\r")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def groups(log: str) -> dict[str, list[str]]:
    """{group title: its lines}, checking that groups neither nest nor stay open."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in log.splitlines():
        if line.startswith("::group::"):
            assert current is None, f"nested group in:\n{log}"
            current = line[len("::group::") :]
            found[current] = []
        elif line == "::endgroup::":
            assert current is not None, f"endgroup without group in:\n{log}"
            current = None
        elif current is not None:
            found[current].append(line)
    assert current is None, f"group left open in:\n{log}"
    return found


FAILING = """
def broken(token):
    print("checking")
    raise RuntimeError(f"100% broken: a, b\\nsecond line with {token}")
"""


def project(root: Path) -> None:
    (root / "plan.yaml").write_text(PLAN.lstrip())
    (root / "failing.py").write_text(FAILING)


def test_github_actions_groups_each_steps_output_and_annotates_failures(tmp_path: Path) -> None:
    project(tmp_path)
    r = planrun("run", "plan.yaml", cwd=tmp_path, env={"GITHUB_ACTIONS": "true"})
    assert r.code == 1, r
    assert "planrun/" not in r.err  # the only traceback is the function's own, in its output
    found = groups(r.err)
    assert set(found) == {"build — Build the *** wheel", "check"}, r.err  # `quiet` printed nothing
    # output lines keep their `  │ ` prefix: a line of output is never a workflow command
    assert found["build — Build the *** wheel"] == ["  │ compiling", "  │ ::endgroup::"]
    errors = re.findall(r"^::error (.*?)::(.*)$", r.err, re.M)
    assert len(errors) == 1, r.err
    props, message = errors[0]
    assert props == "title=check"
    assert "\n" not in message  # one line (a newline would be escaped as %0A)
    assert unescape(message).startswith("RuntimeError: 100% broken: a, b")
    assert "tok-SECRET-7" not in r.err


def test_without_github_actions_no_workflow_commands(tmp_path: Path) -> None:
    project(tmp_path)
    for env in ({}, {"GITHUB_ACTIONS": "false"}):
        r = planrun("run", "plan.yaml", cwd=tmp_path, env=env)
        assert r.code == 1 and not re.search(r"^::", r.err, re.M), r


def test_escaping_matches_the_actions_toolkit() -> None:
    from planrun.reporters.github import error_line, group_start

    assert group_start("a.b", "50% done\r\nnext") == "::group::a.b — 50%25 done%0D%0Anext"
    assert group_start("a", "a") == "::group::a"
    assert error_line("x-1", "a:b,c%\n") == "::error title=x-1::a:b,c%25%0A"


def test_sub_plan_steps_foreach_instances_and_parallel_steps_each_get_their_own_group(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub.yaml").write_text(
        "steps:\n"
        "  - {id: inner, run: echo inner-out}\n"
        "  - {id: named, title: Named work, run: echo named-out}\n"
    )
    (tmp_path / "plan.yaml").write_text(
        """
steps:
  - id: p1
    run: for i in 1 2 3; do echo p1-$i; sleep 0.05; done
  - id: p2
    run: for i in 1 2 3; do echo p2-$i; sleep 0.05; done
  - id: each
    foreach: [x, y]
    title: Item ${item}
    run: echo each-${item}
  - id: sp
    tool: plan
    args: {path: sub.yaml}
""".lstrip()
    )
    r = planrun("run", "plan.yaml", cwd=tmp_path, env={"GITHUB_ACTIONS": "true"})
    assert r.code == 0, r
    found = groups(r.err)
    assert found == {
        "p1": ["  │ p1-1", "  │ p1-2", "  │ p1-3"],
        "p2": ["  │ p2-1", "  │ p2-2", "  │ p2-3"],
        "each[0] — Item x": ["  │ each-x"],
        "each[1] — Item y": ["  │ each-y"],
        "sp/inner": ["  │ inner-out"],  # no title: the id alone, as for a step of the plan
        "sp/named — Named work": ["  │ named-out"],
    }, r.err

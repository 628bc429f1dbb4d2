"""Expressions cannot hurt the host: no mutation of variables or env, no unbounded values."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_no_traceback

BOMBS = [
    "n ** (n ** 9)",
    "'x' * n ** 12",
    "[0] * n ** 12",
    "s | center(n ** 10)",
    "s.ljust(n ** 10)",
    "('%0' ~ n ** 9 ~ 'd') % 1",
    "(s * 1000000) | replace('x', 'xxxxxxxxxx')",
    "([s * 100000] * 100000) | join(',')",
    "range(n ** 9) | list",
    "'{:>999999999}'.format(1)",
]


def test_literal_power_bomb_is_a_validation_error(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: a
            tool: echo
            args: {value: "${ (10 ** (10 ** 9)) > 5 }"}
        """,
    )
    r = run("validate", "p.yaml", timeout=20)  # computing the power would outlast the timeout
    assert r.code == 3, r
    line = [x for x in r.out.splitlines() if "error" in x]
    assert len(line) == 1 and line[0].startswith("p.yaml:4:"), r
    assert "too large" in line[0] or "bits" in line[0], r
    assert_no_traceback(r)


@pytest.mark.parametrize("bomb", BOMBS)
def test_bomb_fails_its_step_quickly_with_one_line(run, write, bomb):
    write(
        "p.yaml",
        f"""
        variables: {{n: 10, s: x}}
        steps:
          - id: boom
            tool: echo
            args: {{value: "${{ {bomb} }}"}}
            timeout: 30s
          - id: after
            tool: echo
            args: {{value: ok}}
            depends_on: [boom]
        """,
    )
    # Evaluating any of these would outlast the timeout: the expression is refused at once.
    r = run("run", "p.yaml", "--no-state", "--output", "json", timeout=30)
    assert r.code == 1, r
    boom = r.json["steps"][0]
    assert boom["status"] == "failed", r
    assert "\n" not in boom["error"] and "too large" in boom["error"], boom
    assert_no_traceback(r)


def test_expressions_cannot_change_variables_or_env(run, write):
    write(
        "p.yaml",
        """
        variables: {d: {k: 1}}
        steps:
          - id: upd
            tool: echo
            args: {value: "${ d.update({'k': 99}) }"}
            on_failure: continue
          - id: pop
            tool: echo
            args: {value: "${ env.pop('PATH') }"}
            on_failure: continue
          - id: after
            tool: shell
            args: {cmd: "echo k=${d.k} path=$PATH"}
            depends_on: [upd, pop]
            when: "${ true }"
          - id: free
            tool: shell
            args: {cmd: "echo k=${d.k} path=$PATH"}
        """,
    )
    r = run("run", "p.yaml", "--no-state", "--output", "json", env={"PATH": "/usr/bin:/bin"})
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["upd"]["status"] == "failed" and "not allowed" in steps["upd"]["error"], r
    assert steps["pop"]["status"] == "failed" and "not allowed" in steps["pop"]["error"], r
    assert steps["free"]["result"]["stdout"] == "k=1 path=/usr/bin:/bin\n", r
    assert r.json["variables"]["d"] == {"k": 1}


@pytest.mark.slow  # a real MCP server
def test_mcp_bomb_answers_quickly_and_other_calls_go_on(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    plan = "variables: {n: 10}\nsteps:\n  - {id: boom, tool: echo, args: {value: '${ n ** (n ** 9) }'}}\n"

    async def main() -> Any:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "planrun", "mcp"],
            cwd=str(tmp_path),
            env=dict(os.environ),  # the SDK passes only a few variables on (PYTHONPATH matters)
        )
        # Evaluating the bomb would outlast the read timeout: it is refused at once.
        async with Client(params, read_timeout_seconds=30) as client:
            return await asyncio.gather(
                client.call_tool("plan_run", {"plan": plan}),
                client.call_tool("plan_schema", {}),
            )

    bomb, schema = asyncio.run(main())
    assert not schema.is_error
    doc = bomb.structured_content
    assert doc is not None and doc["status"] == "failed", bomb.content
    assert "too large" in doc["steps"][0]["error"]


def test_a_tool_changing_its_arguments_changes_no_variable(run, write):
    write("mut.py", "def grab(d, e):\n    d['k'] = 99\n    e['PATH'] = 'gone'\n    return 1\n")
    write(
        "p.yaml",
        """
        variables: {d: {k: 1}}
        steps:
          - {id: mut, tool: python, args: {function: "mut:grab", kwargs: {d: "${d}", e: "${env}"}}}
          - {id: after, tool: shell, args: {cmd: "echo k=${d.k} path=$PATH"}, depends_on: [mut]}
        """,
    )
    r = run("run", "p.yaml", "--no-state", "--output", "json", env={"PATH": "/usr/bin:/bin"})
    assert r.code == 0, r
    assert r.json["steps"][1]["result"]["stdout"] == "k=1 path=/usr/bin:/bin\n"


@pytest.mark.parametrize(
    "bomb",
    [
        "'{0:{1}}'.format(1, n ** 9)",
        "'{:{}}'.format(1, '999999999')",
        "('{0}' * 300000).format(s * 1000)",
        "('%(a)s' * 100000) % {'a': s * 1000}",
        "'%*d' % (n ** 9, 1)",
    ],
)
def test_format_bombs_fail_at_once(run, write, bomb):
    write(
        "p.yaml",
        f"""
        variables: {{n: 10, s: x}}
        steps:
          - {{id: boom, tool: echo, args: {{value: "${{ {bomb} }}"}}}}
        """,
    )
    r = run("run", "p.yaml", "--no-state", "--output", "json", timeout=30)
    assert r.code == 1 and "too large" in r.json["steps"][0]["error"], r


def test_an_expression_nested_too_deeply_is_one_validation_line(run, write):
    deep = "(" * 3000 + "1" + ")" * 3000
    write("p.yaml", f"steps:\n  - {{id: a, tool: echo, args: {{value: '${{{deep}}}'}}}}\n")
    r = run("validate", "p.yaml")
    assert r.code == 3 and "nested too deeply" in r.out, r
    assert_no_traceback(r)


def test_undefined_values_inside_a_result_fail_the_step_in_one_line(run, write):
    # map(attribute=...) over a null yields undefined values inside a list: that is the
    # expression's error, not an internal one when the value is used later
    write(
        "p.yaml",
        """
        variables: {xs: [null, {a: 1}]}
        steps:
          - id: e
            tool: echo
            args: {value: "${xs | map(attribute='a') | list}"}
        """,
    )
    r = run("run", "p.yaml", "--no-state")
    assert r.code == 1, r
    assert "internal error" not in r.out + r.err
    assert "step 'e': args.value:" in r.err
    assert_no_traceback(r)

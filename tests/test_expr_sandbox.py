"""Expressions cannot hurt the host: no mutation of variables or env, no unbounded values."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_no_traceback
from tests.testkit import bounded_planrun, one_step_error, write_p_yaml

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
    r = run("validate", "p.yaml")  # computing the power would outlast the timeout
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
    r = run("run", "p.yaml", "--no-state", "--output", "json")
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
    r = run("run", "p.yaml", "--no-state", "--output", "json")
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


def test_an_integer_too_long_to_print_fails_its_step_not_the_run(tmp_path: Path) -> None:
    # Python refuses to turn an int of more than 4300 digits into text; an expression could
    # compute one (the bound on ints was 64,000 bits), and printing it was an internal error.
    write_p_yaml(
        tmp_path,
        """
        variables: {n: 5000, m: 6000, k: 4300}
        steps:
          - {id: a, tool: echo, args: {value: "${ 10 ** n }"}, on_failure: continue}
          - {id: b, tool: shell, args: {cmd: "echo ${ 7 ** m }"}, on_failure: continue}
          - {id: c, tool: echo, args: {value: "x${ 10 ** k }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 1 and "internal error" not in r.out + r.err, r
    assert_no_traceback(r)
    for step in json.loads(r.out)["steps"]:
        assert step["status"] == "failed" and "too large" in step["error"], step
    r = bounded_planrun(tmp_path, "run", "--dry-run", "p.yaml")
    assert r.code == 0 and "internal error" not in r.err, r
    assert_no_traceback(r)
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - {id: a, tool: echo, args: {value: 'x${ 10 ** 4300 }'}}\n"
    )
    r = bounded_planrun(tmp_path, "validate", "p.yaml")
    assert r.code == 3 and r.out.startswith("p.yaml:2:") and "too large" in r.out, r


def test_the_largest_allowed_integer_still_prints(tmp_path: Path) -> None:
    write_p_yaml(
        tmp_path,
        """
        steps:
          - {id: a, tool: echo, args: {value: "${ (2 ** 13998) | string | length }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 0, r
    assert json.loads(r.out)["steps"][0]["result"] == 4214


def test_map_cannot_multiply_a_bounded_item_into_unbounded_memory(tmp_path: Path) -> None:
    # Each `center` result is within the bound; a map over a range made 100,000 of them.
    write_p_yaml(
        tmp_path,
        """
        variables: {w: 999999}
        steps:
          - {id: a, tool: echo, args: {value: "${ range(100000) | map('center', w) | list | length }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    error = one_step_error(r)
    assert "too large" in error and "MemoryError" not in error, r


def test_join_of_a_range_or_a_map_is_bounded(tmp_path: Path) -> None:
    write_p_yaml(
        tmp_path,
        """
        variables: {s: "abcdefghij"}
        steps:
          - id: a
            tool: echo
            args: {value: "${ range(100000) | join(s * 100000) | length }"}
            on_failure: continue
          - id: b
            tool: echo
            args: {value: "${ (s * 100000).join(range(100000) | map('string')) | length }"}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 1, r
    assert_no_traceback(r)
    for step in json.loads(r.out)["steps"]:
        assert step["status"] == "failed" and "too large" in step["error"], step
        assert "MemoryError" not in step["error"], step


def test_tojson_indent_cannot_multiply_by_depth(tmp_path: Path) -> None:
    deep = "[" * 60 + "1" + "]" * 60
    write_p_yaml(
        tmp_path,
        f"""
        steps:
          - {{id: a, tool: echo, args: {{value: "${{ {deep} | tojson(indent=999999) | length }}"}}}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    error = one_step_error(r)
    assert "too large" in error and "MemoryError" not in error, r


def test_wordwrap_cannot_repeat_a_big_wrapstring(tmp_path: Path) -> None:
    write_p_yaml(
        tmp_path,
        """
        variables: {s: "a b c d e f g h i j "}
        steps:
          - id: a
            tool: echo
            args: {value: "${ (s * 50000) | wordwrap(1, wrapstring=s * 50000) | length }"}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    error = one_step_error(r)
    assert "too large" in error and "MemoryError" not in error, r


def test_legitimate_chains_over_big_data_still_work(tmp_path: Path) -> None:
    write_p_yaml(
        tmp_path,
        """
        steps:
          - {id: a, tool: shell, args: {cmd: "seq 1 100000"}, result_variable: r}
          - id: b
            tool: echo
            args:
              value: "${ r.stdout.split() | map('trim') | map('int') | select('odd') | list | length }"
          - id: c
            tool: echo
            args: {value: "${ r.stdout.split() | map('string') | join(',') | length }"}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 0, r
    steps = json.loads(r.out)["steps"]
    assert steps[1]["result"] == 50000
    assert steps[2]["result"] == len(",".join(str(i) for i in range(1, 100001)))


def test_a_lone_surrogate_made_by_an_expression_prints_escaped(tmp_path: Path) -> None:
    # A Jinja string literal can spell half a surrogate pair; printing it (dry run, console,
    # the HTML report) was an internal error.
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - {id: a, tool: echo, args: {value: \"${ 'x\\\\ud800' }\"}}\n"
    )
    r = bounded_planrun(tmp_path, "run", "--dry-run", "p.yaml")
    assert r.code == 0 and "internal error" not in r.err and "\\ud800" in r.out, r
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--stream")
    assert r.code == 0 and "internal error" not in r.err, r
    r = bounded_planrun(tmp_path, "report", "p.yaml")
    assert r.code == 0 and "internal error" not in r.err, r
    assert "\\ud800" in (tmp_path / "planrun-report.html").read_text(encoding="utf-8")
    assert_no_traceback(r)


@pytest.mark.slow  # ~2.4 s of big inputs
def test_filters_over_a_big_input_are_not_refused(tmp_path: Path) -> None:
    # The bound on what a filter yields grows with its input: a big vars file may be mapped.
    words = [f"word{i:06d}" for i in range(150_000)]
    (tmp_path / "v.json").write_text(json.dumps({"ws": words, "ns": list(range(250_000))}))
    write_p_yaml(
        tmp_path,
        """
        variables: {ws: [], ns: []}
        steps:
          - {id: a, tool: echo, args: {value: "${ ws | map('upper') | list | length }"}}
          - {id: b, tool: echo, args: {value: "${ ns | map('string') | join(',') | length }"}}
        """,
    )
    r = bounded_planrun(
        tmp_path, "run", "p.yaml", "--no-state", "--vars-file", "v.json", "--output", "json"
    )
    assert r.code == 0, r
    steps = json.loads(r.out)["steps"]
    assert steps[0]["result"] == 150_000
    assert steps[1]["result"] == len(",".join(str(i) for i in range(250_000)))


def test_wordwrap_of_one_long_word_is_refused_not_quadratic(tmp_path: Path) -> None:
    # textwrap copies the rest of a long word for every piece it breaks off: a 1,000,000-char
    # word at width 1 held the event loop 14 s (past the step's timeout); longer, for hours.
    write_p_yaml(
        tmp_path,
        """
        variables: {s: "abc"}
        steps:
          - id: a
            tool: echo
            args: {value: "${ (s * 333333) | wordwrap(1) | length }"}
            on_failure: continue
          - {id: b, tool: echo, args: {value: "${ ('ab ' * 300000) | wordwrap(5) | length }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 1, r
    steps = {step["id"]: step for step in json.loads(r.out)["steps"]}
    a, b = steps["a"], steps["b"]
    assert a["status"] == "failed" and "too large" in a["error"], a
    assert b["status"] == "succeeded", b  # many short words are cheap at any width


def test_arithmetic_on_big_numbers_is_not_taken_for_repetition(run, write):
    # `n * 1.5` multiplies numbers: only a text or a list times a count repeats anything, so a
    # large number times a float is arithmetic, at validation and at run time alike.
    write(
        "p.yaml",
        """
        variables: {n: 2000000, f: 1.5}
        steps:
          - {id: a, tool: echo, args: {value: "${ n * 1.5 }"}}
          - {id: b, tool: echo, args: {value: "${ f * n }"}}
          - {id: c, tool: echo, args: {value: "${ 2000000 * 1.5 }"}}
          - {id: d, tool: echo, args: {value: "${ 3000000 * 0.5 * n }"}}
        """,
    )
    r = run("run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 0, r
    assert [s["result"] for s in r.json["steps"]] == [3e6, 3e6, 3e6, 3e12]


def test_a_text_or_list_repeated_past_the_limit_is_still_refused(run, write):
    write(
        "p.yaml",
        """
        variables: {n: 2000000}
        steps:
          - {id: a, tool: echo, args: {value: "${ 'ab' * n }"}}
        """,
    )
    r = run("run", "p.yaml", "--no-state", "--output", "json")
    assert "the repeated value is too large" in one_step_error(r)


@pytest.mark.parametrize(
    "expr, word",
    [
        ("${ 1e308 * 10 }", "infinity"),
        ("${ [1, -1e308 * 10] }", "infinity"),
        ("${ {'k': (1e308 * 10) - (1e308 * 10)} }", "NaN"),
        ("at ${ 1e308 * 10 } degrees", "infinity"),
    ],
)
def test_an_expression_giving_infinity_or_nan_fails_its_step(run, write, expr, word):
    # JSON has no number for them: taken as a value, they would make the run's documents
    # (--output json, events, state) something no JSON reader takes.
    write("p.yaml", f"steps:\n  - {{id: e, tool: echo, args: {{value: {json.dumps(expr)}}}}}\n")
    r = run("run", "p.yaml", "--no-state", "--output", "json")
    error = one_step_error(r)
    assert error.startswith("step 'e': args.value: in '${") and error.endswith(
        f"the value is {word}, which JSON has no number for"
    ), error

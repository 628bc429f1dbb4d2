"""Tests for planrun.plan.loader: plan files in, plain data and source positions out."""

from __future__ import annotations

import json
import math
import os
import string
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planrun.errors import ExitCode, PlanInvalid, UsageError
from planrun.plan.loader import Document, _fastyaml, load_document, load_text
from planrun.plan.loader._compose import Builder, compose_document
from tests.conftest import ROOT, planrun


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def only_error(exc: pytest.ExceptionInfo[PlanInvalid]) -> tuple[int, int, str]:
    """(line, col, message) of the single diagnostic a PlanInvalid carries."""
    diags = exc.value.diagnostics
    assert len(diags) == 1, [d.render() for d in diags]
    assert diags[0].severity == "error"
    return diags[0].line, diags[0].col, diags[0].message


def invalid(tmp_path: Path, name: str, content: str | bytes) -> tuple[int, int, str]:
    path = write(tmp_path, name, content)
    with pytest.raises(PlanInvalid) as exc:
        load_document(path)
    assert exc.value.exit_code == ExitCode.INVALID_PLAN
    assert exc.value.diagnostics[0].file == str(path)
    return only_error(exc)


# --------------------------------------------------------------------------- errors


def test_unparsable_yaml_points_at_the_problem(tmp_path: Path) -> None:
    # libyaml words the problem; planrun gives the place and its own prefix.
    line, col, message = invalid(tmp_path, "p.yaml", "name: x\nsteps: [a, b\nvariables: {}\n")
    assert (line, col) == (3, 10) and message.startswith("invalid YAML: ")
    assert "(while parsing a flow sequence at line 2)" in message
    line, col, message = invalid(tmp_path, "q.yaml", "name: x\nsteps: a: b\n")
    assert (line, col) == (2, 9) and message.startswith("invalid YAML: ")


def test_an_error_at_the_end_of_a_file_without_a_final_newline_is_on_its_last_line(
    tmp_path: Path,
) -> None:
    # libyaml puts the end of such a file on a line after it (line 3 of a 2-line file): the
    # place must be one the file has, the end of its last line, as for the same text in JSON.
    line, col, message = invalid(tmp_path, "p.yaml", "name: x\nsteps: [")
    assert (line, col) == (2, 9) and message.startswith("invalid YAML: "), message
    assert "at line 3" not in message, message
    line, col, _ = invalid(tmp_path, "q.yaml", 'name: x\nsteps: []\ntitle: "open')
    assert (line, col) == (3, 13)
    line, col, _ = invalid(tmp_path, "r.yaml", "a: [")
    assert (line, col) == (1, 5)


def test_unparsable_json_reports_json_lineno_and_colno(tmp_path: Path) -> None:
    assert invalid(tmp_path, "p.json", '{\n  "name": "x",\n  "steps": \n}\n') == (
        4,
        1,
        "invalid JSON: Expecting value",
    )
    assert invalid(tmp_path, "q.json", '{"name": "x",}') == (
        1,
        14,
        "invalid JSON: Expecting property name enclosed in double quotes",
    )


@pytest.mark.parametrize(
    "value, word",
    [("NaN", "NaN"), ("-Infinity", "-Infinity"), ("1e999", "1e999"), ("-2.5E+400", "-2.5E+400")],
)
def test_json_without_nan_or_infinity_is_json(tmp_path: Path, value: str, word: str) -> None:
    # Python's reader takes NaN, Infinity and 1e999 (as infinity); JSON has none of them, and
    # the run's documents could not carry them on as JSON: an error at the value, as for any
    # other text that is not JSON.
    text = '{"variables": {"ok": 1.5e300,\n  "x": [1, ' + value + ']},\n "steps": []}\n'
    assert invalid(tmp_path, "p.json", text) == (
        2,
        12,
        f"invalid JSON: {word} is not a JSON number (JSON has no NaN or infinity)",
    )
    r = planrun("validate", "p.json", cwd=tmp_path)
    assert r.code == ExitCode.INVALID_PLAN and "p.json:2:12: error: invalid JSON" in r.out, r


NOT_FINITE = "is not a JSON number (JSON has no NaN or infinity; quote it for the text)"


@pytest.mark.parametrize("fast", ["0", "1"])
@pytest.mark.parametrize(
    "value, col, word",
    [
        (".nan", 6, ".nan"),
        (".NaN", 6, ".NaN"),
        ("-.Inf", 6, "-.Inf"),
        ("+.INF", 6, "+.INF"),
        ("1.0e+999", 6, "1.0e+999"),
        ("[1, .inf]", 10, ".inf"),
        ("{k: -.inf}", 10, "-.inf"),
        ("!!float .nan", 6, ".nan"),
        ("1" * 400 + ".0", 6, "1" * 400 + ".0"),
    ],
    ids=lambda value: str(value)[:12],
)
def test_yaml_infinity_and_nan_are_not_json_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: str, value: str, col: int, word: str
) -> None:
    # YAML reads .inf and .nan as floats; no JSON reader takes what they would be written as
    # (NaN, Infinity), and every document of a run is JSON: an error at the value, as in a
    # JSON plan, on the fast reader's path and on libyaml's alike.
    monkeypatch.setenv("PLANRUN_NO_FAST_YAML", "0" if fast == "1" else "1")
    text = "variables:\n  ok: 1.5e+300\n  x: " + value + "\nsteps: []\n"
    assert invalid(tmp_path, "p.yaml", text) == (3, col, f"{word} {NOT_FINITE}")


def test_quoted_infinity_and_nan_are_text() -> None:
    data = load_text("a: '.nan'\nb: \".inf\"\nc: [!!str -.inf]\nd: .info\ne: nan\n").data
    assert data == {"a": ".nan", "b": ".inf", "c": ["-.inf"], "d": ".info", "e": "nan"}


def test_yaml_infinity_in_a_plan_exits_3(tmp_path: Path) -> None:
    write(tmp_path, "p.yaml", "steps:\n  - {id: a, tool: echo, args: {value: .inf}}\n")
    r = planrun("run", "p.yaml", "--no-state", cwd=tmp_path)
    assert r.code == ExitCode.INVALID_PLAN, r
    assert f"p.yaml:2:39: error: .inf {NOT_FINITE}" in r.out + r.err, r


def test_duplicate_key_is_reported_at_its_second_occurrence(tmp_path: Path) -> None:
    text = "name: a\nsteps:\n  - id: x\n    tool: shell\n    tool: http\n"
    assert invalid(tmp_path, "p.yaml", text) == (5, 5, "duplicate key 'tool' (first at line 4)")


def test_duplicate_keys_in_flow_style_and_at_top_level(tmp_path: Path) -> None:
    assert invalid(tmp_path, "a.yaml", "variables: {a: 1, b: 2, a: 3}\n") == (
        1,
        25,
        "duplicate key 'a' (first at line 1)",
    )
    assert invalid(tmp_path, "b.yaml", "name: a\nsteps: []\nname: b\n") == (
        3,
        1,
        "duplicate key 'name' (first at line 1)",
    )


def test_every_duplicate_key_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "a: 1\na: 2\nb:\n  c: 1\n  c: 2\n")
    with pytest.raises(PlanInvalid) as exc:
        load_document(path)
    assert [(d.line, d.col, d.message) for d in exc.value.diagnostics] == [
        (2, 1, "duplicate key 'a' (first at line 1)"),
        (5, 3, "duplicate key 'c' (first at line 4)"),
    ]


def test_duplicate_key_in_json(tmp_path: Path) -> None:
    text = '{\n  "variables": {"x": 1,\n                "x": 2}\n}\n'
    assert invalid(tmp_path, "p.json", text) == (3, 17, "duplicate key 'x' (first at line 2)")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        (name, content)
        for name in ("p.yaml", "p.json", "p.txt")
        for content in ("", "   \n\n", "# just a comment\n", "---\n")
        if name != "p.json" or not content.strip()  # a comment is invalid JSON, not empty
    ],
)
def test_empty_file(tmp_path: Path, name: str, content: str) -> None:
    assert invalid(tmp_path, name, content) == (1, 1, "plan file is empty")


@pytest.mark.parametrize(
    ("name", "content", "line", "col", "kind"),
    [
        ("p.yaml", "\n\n- a\n- b\n", 3, 1, "a list"),
        ("p.yaml", "42\n", 1, 1, "a number"),
        ("p.yaml", "hello\n", 1, 1, "a string"),
        ("p.yaml", "null\n", 1, 1, "null"),
        ("p.yaml", "true\n", 1, 1, "a boolean"),
        ("p.json", '\n  ["a"]\n', 2, 3, "a list"),
        ("p.json", '"x"', 1, 1, "a string"),
    ],
)
def test_top_level_must_be_a_mapping(
    tmp_path: Path, name: str, content: str, line: int, col: int, kind: str
) -> None:
    assert invalid(tmp_path, name, content) == (
        line,
        col,
        f"a plan must be a mapping at the top level, got {kind}",
    )


def test_non_utf8_bytes_point_at_the_bad_byte(tmp_path: Path) -> None:
    line, col, message = invalid(tmp_path, "p.yaml", b"name: x\ntitle: caf\xe9 ok\n")
    assert (line, col) == (2, 11)
    assert message == "plan file is not valid UTF-8: byte 0xe9 at offset 18"


def test_non_utf8_bytes_after_a_bom_point_at_the_bad_byte(tmp_path: Path) -> None:
    # The offset counts the file's bytes (the BOM's three included); a column does not count
    # the BOM, as no position in the plan does.
    bom = b"\xef\xbb\xbf"
    line, col, message = invalid(tmp_path, "p.yaml", bom + b"name: x\ntitle: caf\xe9 ok\n")
    assert (line, col) == (2, 11)
    assert message == "plan file is not valid UTF-8: byte 0xe9 at offset 21"
    line, col, message = invalid(tmp_path, "p.yaml", bom + b"name: caf\xe9\n")
    assert (line, col) == (1, 10)
    assert message == "plan file is not valid UTF-8: byte 0xe9 at offset 12"


def test_utf16_is_named(tmp_path: Path) -> None:
    content = "name: x\n".encode("utf-16")
    assert invalid(tmp_path, "p.yaml", content) == (
        1,
        1,
        "plan file is not UTF-8 (it looks like UTF-16); save it as UTF-8",
    )


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    assert load_document(write(tmp_path, "p.yaml", b"\xef\xbb\xbfname: x\n")).data == {"name": "x"}
    assert load_document(write(tmp_path, "p.json", b'\xef\xbb\xbf{"a": 1}')).data == {"a": 1}


def test_directory_is_invalid(tmp_path: Path) -> None:
    (tmp_path / "plans.yaml").mkdir()
    with pytest.raises(PlanInvalid) as exc:
        load_document(tmp_path / "plans.yaml")
    assert only_error(exc) == (1, 1, f"{tmp_path / 'plans.yaml'} is a directory, not a plan file")


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(UsageError) as exc:
        load_document(missing)
    assert str(exc.value) == f"plan file not found: {missing}"
    assert exc.value.exit_code == ExitCode.USAGE == 2


def test_file_name_is_kept_as_given(tmp_path: Path) -> None:
    write(tmp_path, "p.yaml", "a: [\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(PlanInvalid) as exc:
            load_document("p.yaml")
    finally:
        os.chdir(old)
    assert exc.value.diagnostics[0].render().startswith("p.yaml:2:1: error: invalid YAML")


@pytest.mark.parametrize(
    ("content", "line", "col", "message"),
    [
        (
            "name: x\nrun: !!python/object/apply:os.system [ls]\n",
            2,
            6,
            "YAML tag '!!python/object/apply:os.system' is not allowed in a plan",
        ),
        (
            "a: !!python/name:os.system ''\n",
            1,
            4,
            "YAML tag '!!python/name:os.system' is not allowed in a plan",
        ),
        ("a: !foo bar\n", 1, 4, "YAML tag '!foo' is not allowed in a plan"),
        ("a: !!binary aGVsbG8=\n", 1, 4, "YAML tag '!!binary' is not allowed in a plan"),
        ("a: !!timestamp 2026-01-01\n", 1, 4, "YAML tag '!!timestamp' is not allowed in a plan"),
        ("a: !!set {x: null}\n", 1, 4, "YAML tag '!!set' is not allowed in a plan"),
        ("a: !!int abc\n", 1, 4, "'abc' is not a valid !!int"),
        ("a: !!map [1]\n", 1, 4, "YAML tag '!!map' is not allowed here"),
    ],
)
def test_unsafe_or_unknown_tags_are_refused(
    tmp_path: Path, content: str, line: int, col: int, message: str
) -> None:
    assert invalid(tmp_path, "p.yaml", content) == (line, col, message)


def test_standard_tags_give_plain_values() -> None:
    data = load_text(
        "a: !!str 123\nb: !!int '7'\nc: !!float 1\nd: !!bool true\ne: !!null ''\n"
    ).data
    assert data == {"a": "123", "b": 7, "c": 1.0, "d": True, "e": None}
    assert type(data["c"]) is float


def test_recursive_alias(tmp_path: Path) -> None:
    assert invalid(tmp_path, "p.yaml", "a: &x\n  b: *x\n") == (
        1,
        4,
        "recursive YAML alias: this anchored node contains itself",
    )


def test_alias_bomb_is_stopped(tmp_path: Path) -> None:
    lines = ["a: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    line, col, message = invalid(tmp_path, "p.yaml", "\n".join(lines) + "\n")
    assert message == "YAML aliases expand to too much data"


def test_more_than_one_document(tmp_path: Path) -> None:
    assert invalid(tmp_path, "p.yaml", "a: 1\n---\nb: 2\n") == (
        2,
        1,
        "a plan file holds one YAML document, but a second one starts here",
    )


def test_non_string_keys(tmp_path: Path) -> None:
    assert invalid(tmp_path, "p.yaml", "name: x\n? [a, b]\n: 1\n") == (
        2,
        3,
        "a mapping key must be a string, not a list",
    )


def test_undefined_alias_and_duplicate_anchor(tmp_path: Path) -> None:
    line, col, message = invalid(tmp_path, "a.yaml", "a: 1\nb: *nope\n")
    assert (line, col) == (2, 4) and message.startswith("invalid YAML: ")
    assert invalid(tmp_path, "b.yaml", "a: &x 1\nb: &x 2\n") == (
        2,
        4,
        "invalid YAML: duplicate anchor (first at line 1)",
    )


def test_control_character_position_counts_characters(tmp_path: Path) -> None:
    assert invalid(tmp_path, "p.yaml", "é: 1\nb: xé\x01y\n") == (
        2,
        6,
        "invalid YAML: character #x01 is not allowed",
    )


def test_lone_surrogate_in_text() -> None:
    with pytest.raises(PlanInvalid) as exc:
        load_text("a: 1\nb: x\ud800\n", "p.yaml", "yaml")
    assert only_error(exc) == (2, 5, "text is not valid Unicode: lone surrogate U+D800")


TOO_DEEP = "plan is nested too deeply (more than 200 levels)"


def nested_block(levels: int, leaf: str = "x") -> str:
    """`levels` mappings in block style, the innermost holding `leaf`."""
    lines = [f"{'  ' * i}k{i}:" for i in range(levels - 1)]
    return "\n".join([*lines, f"{'  ' * (levels - 1)}k{levels - 1}: {leaf}"]) + "\n"


@pytest.mark.parametrize(
    ("text", "fmt", "where"),
    [
        # (text, format, position of the collection at level 201); the top mapping is level 1
        ("a: " + "[" * 100_000, "yaml", (1, 203)),
        ("a: " + "[" * 50_000 + "]" * 50_000, "yaml", (1, 203)),
        ("a:\n" + "- " * 100_000 + "x\n", "yaml", (2, 399)),
        ("a: " + "{a: " * 50_000, "yaml", (1, 800)),
        # JSON-style flow values (the fast reader reads these with json.loads)
        ("a: " + "[" * 200 + '"x"' + "]" * 200 + "\n", "yaml", (1, 203)),
        ("a: " + "[" * 950 + '"x"' + "]" * 950 + "\n", "yaml", (1, 203)),
        ("a: " + "[" * 990 + '"x"' + "]" * 990 + "\n", "yaml", (1, 203)),
        ("a: " + "[" * 200 + "]" * 200 + "\n", "yaml", (1, 203)),
        (nested_block(201), "yaml", (201, 401)),
        (nested_block(200, "[]"), "yaml", (200, 405)),
        (nested_block(150, "[" * 51 + "]" * 51), "yaml", (150, 355)),
        ('{"a": ' + "[" * 200 + "]" * 200 + "}", "json", (1, 206)),
        ('{"a": ' + "[" * 950 + "]" * 950 + "}", "json", (1, 206)),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "json", (1, 206)),
    ],
    ids=lambda value: None if isinstance(value, str) and len(value) < 20 else "",
)
def test_deep_nesting_is_refused_alike_on_every_path(
    text: str, fmt: str, where: tuple[int, int]
) -> None:
    with pytest.raises(PlanInvalid) as exc:
        load_text(text, f"p.{fmt}", fmt)
    assert only_error(exc) == (*where, TOO_DEEP)


@pytest.mark.parametrize(
    "text",
    [
        nested_block(200),
        nested_block(199, "[]"),
        "a: " + "[" * 199 + "]" * 199 + "\n",
        "a: " + "[" * 199 + '"x"' + "]" * 199 + "\n",
        nested_block(150, "[" * 50 + "]" * 50),
        '{"a": ' + "[" * 199 + "]" * 199 + "}",
    ],
    ids=range(6),
)
def test_nesting_up_to_the_limit_loads(text: str) -> None:
    load_text(text, "p.json" if text.startswith("{") else "p.yaml", None)


def test_deep_nesting_is_refused_by_the_cli(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("steps: " + "[" * 950 + "]" * 950 + "\n")
    result = planrun("validate", "p.yaml", cwd=tmp_path)
    assert result.code == 3, result
    assert result.out == f"p.yaml:1:{8 + 199}: error: {TOO_DEEP}\n", result


# --------------------------------------------------------------------------- values


def test_yaml_scalars_are_json_types_and_yaml_11_surprises_stay_strings() -> None:
    text = """\
a_yes: yes
a_no: no
a_on: on
a_off: off
a_y: y
date: 2026-11-26
time: 2026-11-26T10:00:00Z
octal: 0777
leading_zero: "010"
sexagesimal: 1:30
underscore: 1_000
hex: 0x1F
exp_no_dot: 1e3
int: 42
neg: -7
float: 1.5
float_exp: 1.0e+3
true_: true
false_: False
null_: ~
null2: null
empty:
quoted_true: "true"
quoted_int: '42'
version: 1.10
"""
    data = load_text(text).data
    assert data == {
        "a_yes": "yes",
        "a_no": "no",
        "a_on": "on",
        "a_off": "off",
        "a_y": "y",
        "date": "2026-11-26",
        "time": "2026-11-26T10:00:00Z",
        "octal": "0777",
        "leading_zero": "010",
        "sexagesimal": "1:30",
        "underscore": "1_000",
        "hex": "0x1F",
        "exp_no_dot": "1e3",
        "int": 42,
        "neg": -7,
        "float": 1.5,
        "float_exp": 1000.0,
        "true_": True,
        "false_": False,
        "null_": None,
        "null2": None,
        "empty": None,
        "quoted_true": "true",
        "quoted_int": "42",
        "version": 1.1,
    }
    json.dumps(data)  # plain data only


def test_keys_are_strings_as_written() -> None:
    assert load_text("1: a\ntrue: b\nnull: c\n1.50: d\n").data == {
        "1": "a",
        "true": "b",
        "null": "c",
        "1.50": "d",
    }


def test_anchors_aliases_and_merge_keys_give_independent_plain_data() -> None:
    text = """\
defaults: &defaults
  timeout: 30s
  retries: 2
steps:
  - <<: *defaults
    id: a
    retries: 5
  - id: b
    <<: [*defaults, {on_failure: ignore, retries: 9}]
  - id: c
    args: *defaults
"""
    doc = load_text(text, "p.yaml")
    steps = doc.data["steps"]
    assert steps[0] == {"timeout": "30s", "retries": 5, "id": "a"}
    assert steps[1] == {"id": "b", "timeout": "30s", "retries": 2, "on_failure": "ignore"}
    assert steps[2]["args"] == {"timeout": "30s", "retries": 2}
    assert steps[2]["args"] is not doc.data["defaults"]
    # a merged key points at where it is written, in the anchored mapping
    assert doc.pos(("steps", 0, "timeout")) == (2, 12)
    assert doc.pos(("steps", 0, "timeout"), key=True) == (2, 3)
    assert doc.pos(("steps", 0, "retries")) == (7, 14)
    assert doc.pos(("steps", 1, "on_failure")) == (9, 34)


def test_quoted_merge_key_is_an_ordinary_key() -> None:
    assert load_text("a:\n  '<<': {x: 1}\n").data == {"a": {"<<": {"x": 1}}}


def test_json_values() -> None:
    data = load_text('{"a": 1, "b": 1.5, "c": [true, null, "x"], "d": {}}', fmt="json").data
    assert data == {"a": 1, "b": 1.5, "c": [True, None, "x"], "d": {}}


# --------------------------------------------------------------------------- positions

BLOCK = """\
version: 1
name: demo
variables:
  api: {host: example.com, version: v2}
  paths:
    - src/a.py
    - "src/b.py"
steps:
  - id: read
    tool: read_file
    args:
      path: "${paths[0]}"
    depends_on: []
  - id: build
    tool: shell
    depends_on: [read, lint]
    retries: 2
"""


@pytest.mark.parametrize(
    ("path", "key", "expected"),
    [
        ((), False, (1, 1)),
        (("version",), False, (1, 10)),
        (("version",), True, (1, 1)),
        (("variables",), False, (4, 3)),
        (("variables", "api"), True, (4, 3)),
        (("variables", "api"), False, (4, 8)),
        (("variables", "api", "host"), True, (4, 9)),
        (("variables", "api", "host"), False, (4, 15)),
        (("variables", "api", "version"), False, (4, 37)),
        (("variables", "paths", 0), False, (6, 7)),
        (("variables", "paths", 1), False, (7, 7)),
        (("variables", "paths", -1), False, (7, 7)),
        (("steps", 0), False, (9, 5)),
        (("steps", 0, "id"), True, (9, 5)),
        (("steps", 0, "args", "path"), False, (12, 13)),
        (("steps", 0, "depends_on"), False, (13, 17)),
        (("steps", 1, "depends_on", 0), False, (16, 18)),
        (("steps", 1, "depends_on", 1), False, (16, 24)),
        (("steps", 1, "retries"), True, (17, 5)),
        # missing parts fall back to the nearest existing ancestor
        (("steps", 1, "depends_on", 5), False, (16, 17)),
        (("steps", 1, "nope"), True, (14, 5)),
        (("steps", 9, "id"), False, (9, 3)),
        (("nope", "deeper"), False, (1, 1)),
        (("name", "x"), False, (2, 7)),
        ((0,), False, (1, 1)),
    ],
)
def test_yaml_positions(path: tuple[Any, ...], key: bool, expected: tuple[int, int]) -> None:
    doc = load_text(BLOCK, "p.yaml")
    assert doc.pos(path, key=key) == expected


PRETTY_JSON = """\
{
  "name": "demo",
  "variables": {"api": {"host": "example.com"}, "list": [1, 2, [3, {"deep": true}]]},
  "steps": [
    {
      "id": "read",
      "depends_on": ["a", "b"]
    },
    {"id": "w\\u00e9ird \\"key\\"", "args": {"k\\"ey": null}}
  ]
}
"""


@pytest.mark.parametrize(
    ("path", "key", "expected"),
    [
        ((), False, (1, 1)),
        (("name",), True, (2, 3)),
        (("name",), False, (2, 11)),
        (("variables", "api", "host"), True, (3, 25)),
        (("variables", "api", "host"), False, (3, 33)),
        (("variables", "list", 2, 1, "deep"), False, (3, 77)),
        (("variables", "list", 2, 1, "deep"), True, (3, 69)),
        (("steps", 0), False, (5, 5)),
        (("steps", 0, "depends_on", 1), False, (7, 27)),
        (("steps", 1, "id"), False, (9, 12)),
        (("steps", 1, "args", 'k"ey'), True, (9, 43)),
        (("steps", 1, "args", 'k"ey'), False, (9, 52)),
        (("steps", 3), False, (4, 12)),
        (("steps", 0, "missing"), True, (5, 5)),
    ],
)
def test_json_positions(path: tuple[Any, ...], key: bool, expected: tuple[int, int]) -> None:
    doc = load_text(PRETTY_JSON, "p.json", "json")
    assert doc.pos(path, key=key) == expected


def test_json_and_yaml_positions_agree_on_one_line_flow_text() -> None:
    text = '{"a": [1, {"b": "x"}], "c": {"d": [true]}}'
    as_json = load_text(text, "p.json", "json")
    as_yaml = load_text(text, "p.yaml", "yaml")
    assert as_json.data == as_yaml.data
    for path in [(), ("a",), ("a", 1), ("a", 1, "b"), ("c", "d", 0)]:
        assert as_json.pos(path) == as_yaml.pos(path), path
        if path and isinstance(path[-1], str):
            assert as_json.pos(path, key=True) == as_yaml.pos(path, key=True), path


def test_positions_count_characters_not_bytes() -> None:
    doc = load_text("名前: ünïcode\nlist: [é, ü]\n")
    assert doc.pos(("名前",)) == (1, 5)
    assert doc.pos(("list", 1)) == (2, 11)
    jdoc = load_text('{"é": "ü", "x": 1}', fmt="json")
    assert jdoc.pos(("x",)) == (1, 17)


def test_positions_in_windows_line_endings() -> None:
    doc = load_text("a: 1\r\nb:\r\n  - x\r\n  - y\r\n")
    assert doc.data == {"a": 1, "b": ["x", "y"]}
    assert doc.pos(("b", 1)) == (4, 5)


def test_document_built_by_hand_has_root_positions() -> None:
    doc = Document("x.yaml", {"a": 1})
    assert doc.pos(("a",)) == (1, 1)


# --------------------------------------------------------------------------- formats


def test_format_follows_extension_then_sniffing(tmp_path: Path) -> None:
    assert load_document(write(tmp_path, "a.yml", "a: 1\n")).data == {"a": 1}
    assert load_document(write(tmp_path, "b.YAML", "a: 1\n")).data == {"a": 1}
    assert load_document(write(tmp_path, "c.plan", '{"a": 1}')).data == {"a": 1}
    assert load_document(write(tmp_path, "d.plan", "a: 1\n")).data == {"a": 1}
    # looks like JSON but is YAML flow style
    assert load_document(write(tmp_path, "e.plan", "{a: 1, b: [x]}\n")).data == {"a": 1, "b": ["x"]}
    # a .json file is JSON only
    with pytest.raises(PlanInvalid) as exc:
        load_document(write(tmp_path, "f.json", "{a: 1}\n"))
    assert only_error(exc)[2] == "invalid JSON: Expecting property name enclosed in double quotes"


def test_sniffed_text_that_is_neither_reports_the_json_problem() -> None:
    with pytest.raises(PlanInvalid) as exc:
        load_text('{"a": 1,, }')
    assert only_error(exc) == (
        1,
        9,
        "invalid JSON: Expecting property name enclosed in double quotes",
    )


def test_load_text_rejects_unknown_format_name() -> None:
    with pytest.raises(ValueError):
        load_text("a: 1", fmt="toml")


def test_load_document_accepts_pathlike_and_str(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "a: 1\n")
    assert load_document(path).file == str(path)
    assert load_document(str(path)).file == str(path)


# --------------------------------------------------------------------------- fast path vs libyaml


def libyaml_data(text: str) -> Any:
    """What the reference (libyaml) path makes of a text."""
    root = compose_document(text)
    builder = Builder(text)
    data = builder.build(root)
    assert not builder.errors
    return data


def typed(value: Any) -> Any:
    """`value` with every scalar paired with its type: 1, 1.0 and True differ, and so do
    a list and a mapping, which a plain == would let pass."""
    if isinstance(value, dict):
        return ("map", [(key, typed(child)) for key, child in value.items()])
    if isinstance(value, list):
        return ("list", [typed(child) for child in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def test_typed_comparison_tells_types_apart() -> None:
    assert typed({"a": 1}) != typed({"a": 1.0}) != typed({"a": True})
    assert typed([1, "x"]) == typed([1, "x"])


# Texts the fast reader must take itself (a plan in the common subset must not pay for
# libyaml); each also agrees with libyaml, types included.
FAST_TAKEN = [
    "a: 1\nb: two\n",
    "a:\n- 1\n- 2\nb: 3\n",
    "a: 1.5\nb: -2\nc: true\nd: null\ne: ~\nf: ''\ng: \"x y\"\n",
    "a: [p, q]\nb: {k: v}\nc: []\nd: {}\n",
    'a: {"host": "h", "port": 80, "tags": ["x", 1, 1.5, true, null], "n": {"m": {}}}\n',
    "steps:\n  - id: a\n    tool: shell\n    args: {cmd: echo hi}\n    depends_on: []\n",
    "a: |\n  text\n  more\nb: |-\n  x\n",
    "- - - x\n".replace("- - - x", "a:\n  - - x"),
    "a: " + "[" * 32 + '"x"' + "]" * 32 + "\n",
    # a flow collection of plain keys with double-quoted values (bench_runners' plans)
    'steps:\n  - id: a\n    tool: shell\n    args: {cmd: "true"}\n',
    'a: {k: "x: y", u: "it\'s #1", v: "{", w: ""}\nb: [p, "q r", "[", "true"]\n',
    # JSON objects with spaces inside the braces, and bench_cache's lists of quoted paths
    'a: { "k": "v", "n": [1, 2.5]}\nb: {  "x": {}, "y": "z" }\n',
    'steps:\n  - id: d00\n    sources: ["src/d00"]\n    outputs: ["out/d00.txt"]\n',
]


@pytest.mark.parametrize("text", FAST_TAKEN)
def test_fast_path_is_taken_and_agrees_with_libyaml(text: str) -> None:
    try:
        fast = _fastyaml.fast_yaml(text)
    except _fastyaml.Bail:
        pytest.fail(f"the fast reader gave up on {text!r}")
    assert typed(fast) == typed(libyaml_data(text))


@pytest.mark.parametrize("path", sorted((ROOT / "examples").rglob("*.y*ml")), ids=lambda p: p.name)
def test_fast_path_reads_the_example_plans(path: Path) -> None:
    text = path.read_text()
    try:
        fast = _fastyaml.fast_yaml(text)
    except _fastyaml.Bail:
        return  # an example may show YAML outside the subset on purpose
    assert typed(fast) == typed(libyaml_data(text))


def test_fast_path_is_taken_for_the_big_benchmark_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # The 10,000-step validate figure depends on this plan staying on the fast path.
    import importlib.util

    # bench_validate puts bench/ first on sys.path and imports bench/_common.py: both are
    # undone, or bench/'s modules would come first for every later test in this process.
    monkeypatch.setattr(sys, "path", list(sys.path))
    imported = "_common" in sys.modules
    spec = importlib.util.spec_from_file_location(
        "bench_validate", ROOT / "bench/bench_validate.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(bench)
    finally:
        if not imported:
            sys.modules.pop("_common", None)
    text = bench.to_yaml(bench.make_plan(300))
    assert typed(_fastyaml.fast_yaml(text)) == typed(libyaml_data(text))


def test_positions_survive_a_failed_recompose(monkeypatch: pytest.MonkeyPatch) -> None:
    # Should composing for positions ever fail, diagnostics still point near their place.
    doc = load_text("name: x\nsteps:\n  - id: a\n    tool: echo\n", "p.yaml", "yaml")

    def refuse(text: str) -> Any:
        raise RecursionError

    from planrun.plan.loader import _compose

    monkeypatch.setattr(_compose, "compose_document", refuse)
    assert doc.pos(("steps", 0, "tool"), key=True) == (4, 5)
    assert doc.pos(("name",), key=True) == (1, 1)
    assert doc.pos(("steps",), key=True) == (2, 1)


FAST_CASES = [
    'a: {k: "x, y"}\nb: {k: "}"}\nc: [", "]\nd: ["]"]\n',
    'a: {k: "x\\"y"}\n',
    'a: {k: "x\\ny"}\n',
    'a: {k: "x" y}\n',
    'a: {k: ""x""}\n',
    'a: ["x"y"]\n',
    "a: 1\nb: two\n",
    "a:\n- 1\n- 2\nb: 3\n",
    "a:\n  - x: 1\n    y: [p, q]\n  - - n1\n    - n2\n  -\n    z: 1\n  -\n",
    "- a\n",
    "a: foo\n  bar\n",
    "a: foo\n  # comment\nb: 1\n",
    "a: 'it''s'  # c\nb: \"x y\"\n",
    "a: x #c\nb: x#c\nc: x: y\n",
    "a: x[0]\nb: x, y\nc: ${v}\nd: -x\ne: -1\nf: .5\ng: -.5\nh: +1\n",
    "a: [a b, c]\nb: {k: v, u: w x}\nc: []\nd: {}\ne: [a, b, ]\n",
    "a:\n  b:\n    c: 1\n   d: 2\n",
    "a:\n  b: 1\n  b: 2\n",
    "a: yes\nb: ~\nc: null\nd: 2026-01-01\ne: 0x10\nf: 1.5e+3\n",
    "  a: 1\n  b: 2\n",
    "a: 'x\n  y'\n",
    'a: "x\\ty"\n',
    "a: b: c\n",
    "key with space: 1\n",
    "a:\t1\n",
    "a: 1 \nb:   2   \n",
    "- - - x\n",
    "a:\n    - 1\n    - 2\n  b: 1\n",
    "a: |\n  text\n",
    "a: >\n  text\n",
    "a: *x\n",
    "a: &x 1\n",
    "a: !!str 1\n",
    "a: {k: [1]}\n",
    "a: [x]  # trailing\nb: {y: 1}# no space\n",
    'a: "q" x\n',
    "a: 'q'x\n",
    "a:  \n  - 1\n",
    "a: - x\n",
    "a: ? x\n",
    "a: @x\n",
    "a: %x\n",
    "a: `x`\n",
    "ab-c.d_e: 1\n_x: 2\n",
    "a: x\n---\nb: y\n",
    "a: x\n...\n",
    "%YAML 1.1\n---\na: x\n",
    "a: 1\n- b\n",
    "a:\n  - b\n  c: 1\n",
    "a:\n- b\nc:\n- d\n",
    "a:\n  -   b: 1\n      c: 2\n",
    "a: é\nb: 名前\n",
    "a: x\u2028y\n",
    "a: \ufeffx\n",
    "a: true\nb: True\nc: TRUE\nd: tRue\ne: f\nf: n\ng: t\n",
    "n: nginx\nt: text\nf: foo\nN: No\nF: Foo\nT: To\n",
    "a: {k: v, k: w}\n",
    "a: [x, y]z\n",
    "a: {x: http://h}\n",
    "a: 'x' # c\n",
    "a: |\n  x\n  y\nb: 1\n",
    "a: |-\n  x\n\n  y\n\n\nb: 1\n",
    "a: |\n\n  x\n    y\n  # not comment\nb: 1\n",
    "a:\n- |\n  x\n- y\n",
    "a:\n- b: |\n    x\n  c: 1\n",
    "a: |\n x\n",
    "a: | # c\n  x\n",
    "a: |2\n  x\n",
    "a: |\n  x\n   \n  y\n",
    "a: |\n  x\n  \n",
    "a: |\nb: 1\n",
    "a: |\n    x\n  y\n",
    "a: |-\n  x",
    "a: |\n  x",
    "a: |+\n  x\n\n",
    "a: >\n  x\n  y\n",
]


@pytest.mark.parametrize("text", FAST_CASES)
def test_fast_path_agrees_with_libyaml_or_gives_up(text: str) -> None:
    try:
        fast = _fastyaml.fast_yaml(text)
    except _fastyaml.Bail:
        return
    try:
        reference = libyaml_data(text)
    except Exception as exc:  # the fast path must not accept what libyaml refuses
        pytest.fail(f"fast path accepted text libyaml refuses: {exc}")
    assert typed(fast) == typed(reference)


# Lines built from pieces the fast path knows, plus pieces it must give up on, so that
# it accepts a good share of the texts and each acceptance is checked against libyaml.
yaml_ish_values = st.one_of(
    st.sampled_from(
        [
            "",
            "x",
            "a b",
            "yes",
            "1",
            "-1",
            "+2",
            "1.5",
            "-.5",
            ".5",
            "1.",
            "~",
            "null",
            "true",
            "False",
            "x #c",
            "x#c",
            "'q''s'",
            "''",
            '""',
            '"d"',
            '"a\\"b"',
            '"x #y"',
            "[a, b]",
            "[]",
            "{}",
            "{k: v}",
            "{k: v, j: 1}",
            "[a, [b]]",
            "[a,b, c d]",
            "{k: [x]}",
            "[x, ]",
            "http://x",
            "a: b",
            "a:",
            "-",
            "- x",
            "|",
            ">",
            "*a",
            "&a x",
            "!t x",
            "2026-01-01",
            "0x1F",
            "1e3",
            "x  ",
            "'x' # c",
            "[x] # c",
            "# c",
            "?x",
            "%x",
            "@x",
            "`x`",
            ",x",
            "x,",
            "<<",
            "=",
            "'x'y",
            '"x" y',
            # block scalars: each "\n" becomes a line break plus the indentation + 2
            "|\nx",
            "|-\nx\ny",
            "|\nx\n\ny\n",
            "| # c\nx\n  deeper",
            "|\n\nx",
            "|-\nx\n\n",
            "|+\nx",
            "|2\nx",
            ">\nx\ny",
            "|\n#x\n- y\na: b",
            "|",
            "|-",
            "|\n x",
            "|\nx\n   ",
        ]
    ),
    st.text(alphabet=" abnty01.-:#[]{},'\"~|>&*!?", max_size=8),
)
yaml_ish_lines = st.lists(
    st.tuples(
        st.sampled_from(["", "", "  ", "  ", "    ", " ", "   ", "      "]),
        st.sampled_from(["", "", "", "- ", "- - ", "-", "-   "]),
        st.one_of(st.just(""), st.sampled_from(["a:", "b:", "c_d:", "a.b:", "x-y:", "a :"])),
        st.sampled_from(["", " ", "  "]),
        yaml_ish_values,
    ).map(lambda t: "".join(t)),
    min_size=1,
    max_size=10,
)


keys = st.sampled_from(["a", "b", "c_d", "a.b", "x-y", "on", "n1"])
# A tree whose leaves are raw YAML text; a mapping is a list of (key, child) pairs, so
# duplicate keys happen too.
raw_trees = st.recursive(
    yaml_ish_values,
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3),
        st.lists(st.tuples(keys, children), min_size=1, max_size=3),
    ),
    max_leaves=12,
)


def is_mapping(node: Any) -> bool:
    return isinstance(node, list) and bool(node) and isinstance(node[0], tuple)


def render(node: Any, indent: int, style: dict[str, Any], lines: list[str]) -> None:
    pad = " " * indent
    if is_mapping(node):
        for key, child in node:
            if isinstance(child, str):
                child = child.replace("\n", "\n" + pad + "  ")
                lines.append(f"{pad}{key}: {child}" if child else f"{pad}{key}:")
                continue
            lines.append(f"{pad}{key}:")
            same = style["same_indent_lists"] and not is_mapping(child)
            render(child, indent if same else indent + style["step"], style, lines)
        return
    for item in node:
        if isinstance(item, str):
            item = item.replace("\n", "\n" + pad + "  ")
            lines.append(f"{pad}- {item}" if item else f"{pad}-")
        elif style["compact"]:
            first = len(lines)
            render(item, indent + 2, style, lines)
            lines[first] = pad + "- " + lines[first][indent + 2 :]
        else:
            lines.append(f"{pad}-")
            render(item, indent + style["step"], style, lines)


@st.composite
def yaml_ish_documents(draw: st.DrawFn) -> str:
    root = draw(st.lists(st.tuples(keys, raw_trees), min_size=1, max_size=4))
    style = {
        "step": draw(st.sampled_from([1, 2, 4])),
        "compact": draw(st.booleans()),
        "same_indent_lists": draw(st.booleans()),
    }
    lines: list[str] = []
    render(root, 0, style, lines)
    if draw(st.booleans()):  # and sometimes a line of noise
        where = draw(st.integers(0, len(lines)))
        lines.insert(where, draw(st.sampled_from(["", "# c", "  # c", " x", "  - y", "z"])))
    return "\n".join(lines) + "\n"


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(yaml_ish_documents(), yaml_ish_lines.map(lambda lines: "\n".join(lines) + "\n")))
def test_fast_path_agrees_with_libyaml_on_generated_text(text: str) -> None:
    try:
        fast = _fastyaml.fast_yaml(text)
    except _fastyaml.Bail:
        return
    assert typed(fast) == typed(libyaml_data(text)), text


# --------------------------------------------------------------------------- properties

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=10), children, max_size=4),
    ),
    max_leaves=20,
)
plans = st.dictionaries(st.text(max_size=10), json_values, min_size=1, max_size=5)


def same(a: Any, b: Any) -> bool:
    """Equality that also checks types (1 == 1.0 == True in Python)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(max_examples=150, deadline=None)
@given(
    plan=plans,
    flow=st.sampled_from([False, True, None]),
    allow_unicode=st.booleans(),
    indent=st.sampled_from([2, 4]),
)
def test_yaml_dump_loads_back_equal(
    tmp_path_factory: pytest.TempPathFactory,
    plan: dict[str, Any],
    flow: bool | None,
    allow_unicode: bool,
    indent: int,
) -> None:
    text = yaml.safe_dump(
        plan, default_flow_style=flow, allow_unicode=allow_unicode, sort_keys=False, indent=indent
    )
    # PyYAML's emitter writes some characters (NEL, LS, PS) raw where YAML folds them
    # into spaces; such texts do not round-trip through PyYAML itself either.
    assume(yaml.safe_load(text) == plan)
    path = tmp_path_factory.mktemp("y") / "plan.yaml"
    path.write_text(text, encoding="utf-8")
    doc = load_document(path)
    assert same(doc.data, plan), text
    # every value has a position
    for key in plan:
        line, col = doc.pos((key,))
        assert line >= 1 and col >= 1


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(max_examples=100, deadline=None)
@given(plan=plans, indent=st.sampled_from([None, 2]), ensure_ascii=st.booleans())
def test_json_dump_loads_back_equal(
    tmp_path_factory: pytest.TempPathFactory,
    plan: dict[str, Any],
    indent: int | None,
    ensure_ascii: bool,
) -> None:
    text = json.dumps(plan, indent=indent, ensure_ascii=ensure_ascii)
    path = tmp_path_factory.mktemp("j") / "plan.json"
    path.write_text(text, encoding="utf-8")
    doc = load_document(path)
    assert same(doc.data, plan), text
    # positions found by the JSON scanner match the text: each key is where it is written
    for key in plan:
        line, col = doc.pos((key,), key=True)
        source_line = text.split("\n")[line - 1]
        assert source_line[col - 1 :].startswith(json.dumps(key, ensure_ascii=ensure_ascii))


# JSON text that YAML reads the same way (json.dumps floats such as 1e+16 are strings
# to YAML 1.1 rules, so no floats here).
yaml_compatible_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=20,
)


@pytest.mark.slow  # many generated cases: the full suite runs it
# Drawing these nested values is most of the cost (some 8 draws per kept example).
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(plan=st.dictionaries(st.text(max_size=8), yaml_compatible_values, min_size=1, max_size=5))
def test_json_text_positions_match_yaml_positions(plan: dict[str, Any]) -> None:
    """JSON is YAML: libyaml's positions for the same text are the reference."""
    text = json.dumps(plan, indent=1)
    as_json = load_text(text, "p.json", "json")
    try:
        as_yaml = load_text(text, "p.yaml", "yaml")
    except PlanInvalid:
        assume(False)  # JSON corner cases that YAML 1.1 reads differently
        raise
    assume(same(as_json.data, as_yaml.data))

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        assert as_json.pos(path) == as_yaml.pos(path), path
        if isinstance(value, dict):
            for key, child in value.items():
                assert as_json.pos((*path, key), key=True) == as_yaml.pos((*path, key), key=True)
                walk(child, (*path, key))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, (*path, index))

    walk(plan, ())


# --------------------------------------------------------------------------- fuzz


def loads_or_refuses(call: Any) -> None:
    try:
        doc = call()
    except (PlanInvalid, UsageError) as exc:
        assert str(exc)
        if isinstance(exc, PlanInvalid):
            for diag in exc.diagnostics:
                assert diag.line >= 1 and diag.col >= 1 and "\n" not in diag.message
        return
    assert isinstance(doc.data, dict)
    json.dumps(doc.data)  # plain, JSON-serialisable data (NaN/Infinity allowed)
    for key in list(doc.data)[:3]:
        doc.pos((key,))
        doc.pos((key, 0, "x"), key=True)


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=300), suffix=st.sampled_from([".yaml", ".json", ".txt"]))
def test_fuzz_random_bytes_in_files(tmp_path: Path, raw: bytes, suffix: str) -> None:
    path = tmp_path / f"plan{suffix}"
    path.write_bytes(raw)
    loads_or_refuses(lambda: load_document(path))


yaml_alphabet = (
    string.ascii_letters[:6]
    + string.digits[:3]
    + " \n\t-:[]{}#&*!|>'\"%@`,?~.<=\\é\x00\x85\u2028\ufeff"
)


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(max_examples=500, deadline=None)
@given(
    text=st.one_of(st.text(max_size=200), st.text(alphabet=yaml_alphabet, max_size=200)),
    fmt=st.sampled_from([None, "yaml", "json"]),
)
def test_fuzz_random_text(text: str, fmt: str | None) -> None:
    loads_or_refuses(lambda: load_text(text, "fuzz", fmt))


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(max_examples=200, deadline=None)
@given(plan=plans, data=st.data())
def test_fuzz_mutated_plans(plan: dict[str, Any], data: st.DataObject) -> None:
    text = yaml.safe_dump(plan, sort_keys=False)
    where = data.draw(st.integers(min_value=0, max_value=len(text)))
    insert = data.draw(st.text(alphabet=yaml_alphabet, max_size=5))
    mutated = text[:where] + insert + text[where + data.draw(st.integers(0, 3)) :]
    loads_or_refuses(lambda: load_text(mutated, "m.yaml", "yaml"))


def test_the_fast_reader_can_be_turned_off(tmp_path):
    """PLANRUN_NO_FAST_YAML=1: every YAML plan goes through libyaml, with the same result."""
    text = "name: p\nsteps:\n  - id: a\n    tool: echo\n    args: {value: 1}\n"
    path = tmp_path / "p.yaml"
    path.write_text(text)
    fast = planrun("validate", "--format", "json", str(path), cwd=tmp_path)
    slow = planrun(
        "validate", "--format", "json", str(path), cwd=tmp_path, env={"PLANRUN_NO_FAST_YAML": "1"}
    )
    assert fast.code == slow.code == 0
    assert fast.out == slow.out

"""`planrun validate`: every error class with its message and position, output formats, exit codes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from planrun.plan.validate import validate_plan
from tests.conftest import (
    assert_no_traceback,
    planrun,
)
from tests.testkit import write_indented_plan


@pytest.fixture
def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """check(text, name="plan.yaml", variables=None) -> the rendered diagnostics, in order.

    Uses the library (fast) from tmp_path, so each line reads `plan.yaml:LINE:COL: ...`
    exactly as `planrun validate plan.yaml --format text` prints it.
    """
    monkeypatch.chdir(tmp_path)

    def _check(
        text: str | bytes, name: str = "plan.yaml", variables: dict | None = None
    ) -> list[str]:
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text).lstrip())
        return [d.render() for d in validate_plan(name, variables)]

    return _check


# ---- files that do not parse -------------------------------------------------------------


def test_unparsable_yaml(check):
    out = check("""
        steps:
          - id: a
            tool: echo
           args: {}
    """)
    # libyaml words the problem (its wording changes between versions): assert ours
    assert len(out) == 1 and out[0].startswith("plan.yaml:4:4: error: invalid YAML: "), out


def test_unparsable_yaml_flow(check):
    out = check("steps: [\n  - id: a\n")
    assert len(out) == 1 and out[0].startswith("plan.yaml:2:3: error: invalid YAML: ")


def test_unparsable_json(check):
    out = check(
        """
        {
          "steps": [
            {"id": "a", "tool": "echo",}
          ]
        }
    """,
        "plan.json",
    )
    assert out == [
        "plan.json:3:32: error: invalid JSON: Expecting property name enclosed in double quotes"
    ]


def test_empty_file(check):
    assert check("") == ["plan.yaml:1:1: error: plan file is empty"]
    assert check("\n  \n") == ["plan.yaml:1:1: error: plan file is empty"]


def test_top_level_list_and_scalar(check):
    assert check("- a\n- b\n") == [
        "plan.yaml:1:1: error: a plan must be a mapping at the top level, got a list"
    ]
    assert check("[1, 2]\n", "plan.json") == [
        "plan.json:1:1: error: a plan must be a mapping at the top level, got a list"
    ]
    assert check('"text"\n', "plan.json") == [
        "plan.json:1:1: error: a plan must be a mapping at the top level, got a string"
    ]


def test_non_utf8_points_at_the_byte(check):
    out = check(b"name: ok\ntitle: caf\xe9\nsteps: []\n")
    assert out == ["plan.yaml:2:11: error: plan file is not valid UTF-8: byte 0xe9 at offset 19"]


def test_directory_path(check, tmp_path):
    (tmp_path / "plans.yaml").mkdir()
    assert validate_plan("plans.yaml")[0].render() == (
        "plans.yaml:1:1: error: plans.yaml is a directory, not a plan file"
    )


def test_duplicate_yaml_key_on_second_occurrence(check):
    out = check("""
        name: dup
        steps:
          - id: a
            tool: echo
            tool: shell
    """)
    assert out == ["plan.yaml:5:5: error: duplicate key 'tool' (first at line 4)"]


def test_duplicate_json_key(check):
    out = check('{"name": "a",\n "name": "b", "steps": []}\n', "plan.json")
    assert len(out) == 1
    assert out[0].startswith("plan.json:2:2: error: duplicate key 'name'"), out


# ---- schema ------------------------------------------------------------------------------


def test_unknown_keys_at_every_level_with_did_you_mean(check):
    out = check("""
        nmae: x
        defaults: {timeot: 5s}
        limits: {max_step: 3}
        policy: {dney: [shell]}
        servers:
          fs: {comand: mcp-server-filesystem}
        steps:
          - id: a
            tool: echo
            depnds_on: []
    """)
    assert out == [
        "plan.yaml:1:1: error: unknown key 'nmae' in the plan (did you mean 'name'?)",
        "plan.yaml:2:12: error: unknown key 'timeot' in defaults (did you mean 'timeout'?)",
        "plan.yaml:3:10: error: unknown key 'max_step' in limits (did you mean 'max_steps'?)",
        "plan.yaml:4:10: error: unknown key 'dney' in policy (did you mean 'deny'?)",
        "plan.yaml:6:8: error: unknown key 'comand' in servers.fs (did you mean 'command'?)",
        "plan.yaml:10:5: error: unknown key 'depnds_on' in step 'a' (did you mean 'depends_on'?)",
    ]


def test_header_error_does_not_hide_variables_or_servers(check):
    # A typo in `defaults` must not make ${x} "undefined" nor the server "unknown".
    out = check("""
        variables: {x: 1}
        defaults: {retires: 1}
        servers:
          fs: {command: mcp-server-filesystem}
        steps:
          - {id: a, tool: fs.read_file, args: {path: "${x}"}}
    """)
    assert out == [
        "plan.yaml:2:12: error: unknown key 'retires' in defaults (did you mean 'retries'?)"
    ]


def test_wrong_types(check):
    out = check("""
        variables: []
        steps:
          - id: a
            tool: echo
            depends_on: b
            args: [1]
          - {id: b, tool: echo, retries: -1, approval: maybe}
          - {id: c, tool: echo, retries: two}
    """)
    assert out == [
        "plan.yaml:1:12: error: variables: expected a mapping, got []",
        "plan.yaml:5:17: error: step 'a': depends_on: expected a list, got \"b\"",
        "plan.yaml:6:11: error: step 'a': args: expected a mapping, got [1]",
        "plan.yaml:7:34: error: step 'b': retries: expected 0 or more, got -1",
        "plan.yaml:7:48: error: step 'b': approval: expected true, false or a question of two words or more, got \"maybe\"",
        "plan.yaml:8:34: error: step 'c': retries: expected a whole number, got \"two\"",
    ]


def test_steps_must_be_a_list_of_mappings(check):
    assert check("steps: {}\n") == ["plan.yaml:1:8: error: 'steps' must be a list of steps"]
    assert check("steps:\n  - echo\n") == [
        "plan.yaml:2:5: error: step #1 must be a mapping with at least 'id' and 'tool'"
    ]
    assert check("name: x\n") == [
        "plan.yaml:1:1: error: the plan has no 'steps' key "
        "(write 'steps: []' for a plan without steps)"
    ]


def test_missing_required_keys(check):
    out = check("""
        steps:
          - title: no id
            tool: echo
          - id: b
    """)
    assert out == [
        "plan.yaml:2:5: error: step #1: missing required key 'id'",
        "plan.yaml:4:5: error: step 'b' needs 'tool' or 'run'",
    ]


def test_bad_durations(check):
    out = check("""
        defaults: {retry_delay: -1}
        steps:
          - id: a
            tool: echo
            timeout: 5 minutes
          - {id: b, tool: echo, timeout: 1m30s, retry_delay: 500ms}
    """)
    assert out == [
        "plan.yaml:1:25: error: defaults.retry_delay: a duration cannot be negative",
        "plan.yaml:5:14: error: step 'a': timeout: bad duration '5 minutes': use a number of "
        "seconds or a string like '500ms', '30s', '5m', '1h'",
    ]


def test_bad_on_failure(check):
    out = check("""
        defaults: {on_failure: explode}
        steps:
          - {id: a, tool: echo, on_failure: retry}
    """)
    assert out == [
        "plan.yaml:1:24: error: defaults.on_failure: expected 'abort', 'continue', 'ignore' "
        "or 'replan', got \"explode\"",
        "plan.yaml:3:37: error: step 'a': on_failure: expected 'abort', 'continue', 'ignore' "
        "or 'replan', got \"retry\"",
    ]


def test_bad_step_id_and_result_variable(check):
    out = check("""
        steps:
          - id: "build it"
            tool: echo
          - {id: ok, tool: echo, result_variable: 2fast}
    """)
    assert out == [
        "plan.yaml:2:9: error: step 'build it': bad step id 'build it': use letters, digits, '_', '.', '-'",
        "plan.yaml:4:43: error: step 'ok': bad result_variable '2fast': use a name like 'my_var'",
    ]


def test_version_2_rejected_version_1_accepted(check):
    assert check("version: 2\nsteps:\n  - {id: a, tool: echo}\n") == [
        "plan.yaml:1:10: error: version: expected 1, got 2"
    ]
    assert check("version: 1\nsteps:\n  - {id: a, tool: echo}\n") == []


def test_server_needs_command_or_url(check):
    out = check("""
        servers:
          both: {command: x, url: "http://127.0.0.1:1/mcp"}
          neither: {args: [x]}
        steps:
          - {id: a, tool: echo}
    """)
    assert out == [
        "plan.yaml:2:9: error: servers.both: a server has either 'command' (stdio) or 'url' (http), not both",
        "plan.yaml:3:12: error: servers.neither: a server needs 'command' (stdio) or 'url' (http)",
    ]


# ---- ids and references ------------------------------------------------------------------


def test_duplicate_step_id_reported_on_second_occurrence(check):
    out = check("""
        steps:
          - id: build
            tool: echo
          - id: test
            tool: echo
          - id: build
            tool: echo
    """)
    assert out == ["plan.yaml:6:9: error: duplicate step id 'build' (first defined in step #1)"]


def test_unknown_depends_on_with_did_you_mean(check):
    out = check("""
        steps:
          - id: compile_c
            tool: echo
          - id: build
            tool: echo
            depends_on: [compile_c, compile, zzz]
    """)
    assert out == [
        "plan.yaml:6:29: error: step 'build' depends on unknown step 'compile' (did you mean 'compile_c'?)",
        "plan.yaml:6:38: error: step 'build' depends on unknown step 'zzz'",
    ]


def test_self_dependency(check):
    assert check("steps:\n  - {id: a, tool: echo, depends_on: [a]}\n") == [
        "plan.yaml:2:38: error: dependency cycle: a -> a"
    ]


def test_explicit_cycle_printed_as_path_of_real_edges(check):
    out = check("""
        steps:
          - id: a
            tool: echo
            depends_on: [c]
          - id: b
            tool: echo
            depends_on: [a]
          - id: c
            tool: echo
            depends_on: [b]
          - id: outside
            tool: echo
    """)
    # a depends on c, c on b, b on a: each step depends on the next.
    assert out == ["plan.yaml:4:18: error: dependency cycle: a -> c -> b -> a"]


def test_cycle_made_by_data_flow_edges(check):
    out = check("""
        steps:
          - id: a
            tool: echo
            args: {value: "${cv}"}
            result_variable: av
          - id: b
            tool: echo
            args: {value: "${av}"}
            result_variable: bv
          - id: c
            tool: echo
            args: {value: "${bv}"}
            result_variable: cv
    """)
    # a reads cv (bound by c), c reads bv (bound by b), b reads av (bound by a).
    assert out == ["plan.yaml:4:19: error: dependency cycle: a -> c -> b -> a"]


def test_cycle_mixing_explicit_and_data_edges_points_at_the_reading_string(check):
    out = check("""
        steps:
          - id: a
            tool: echo
            args: {value: 1}
            when: "${steps.b.status == 'succeeded'}"
          - id: b
            tool: echo
            depends_on: [c]
          - id: c
            tool: echo
            title: "after ${steps.a.result}"
    """)
    assert out == ["plan.yaml:5:11: error: dependency cycle: a -> b -> c -> a"]


def test_expression_syntax_errors(check):
    out = check(
        """
        steps:
          - {id: a, tool: echo, args: {value: "${ x + }"}}
          - {id: b, tool: echo, args: {value: "${a.b c}"}}
          - {id: c, tool: echo, args: {value: "${}"}}
          - {id: d, tool: echo, args: {value: "${unclosed"}}
          - {id: e, tool: echo, when: "1 +"}
    """,
        variables={"x": 1},
    )
    assert out == [
        "plan.yaml:2:39: error: step 'a': args.value: bad expression '${ x + }': unexpected 'end of template'",
        "plan.yaml:3:39: error: step 'b': args.value: bad expression '${a.b c}': unexpected 'c' after the expression",
        "plan.yaml:4:39: error: step 'c': args.value: empty expression '${}'",
        "plan.yaml:5:39: error: step 'd': args.value: unterminated '${': missing '}'",
        "plan.yaml:6:31: error: step 'e': when: bad expression '${1 +}': unexpected 'end of template'",
    ]


def test_undefined_names_and_unknown_step_refs(check):
    out = check("""
        variables: {module_path: src/x.py}
        steps:
          - id: read
            tool: read_file
            args: {path: "${module_pth}"}
            result_variable: code
          - id: use
            tool: echo
            args:
              value:
                text: "${code} ${env.HOME} ${steps.read.status} ${steps.raed.result}"
                nested: ["${nope | default('x')}"]
    """)
    assert out == [
        "plan.yaml:5:18: error: step 'read': args.path: undefined name 'module_pth' (did you mean 'module_path'?)",
        "plan.yaml:11:15: error: step 'use': args.value.text: unknown step 'steps.raed' (did you mean 'read'?)",
        "plan.yaml:12:18: error: step 'use': args.value.nested[0]: undefined name 'nope'",
    ]


def test_a_name_read_twice_in_one_string_is_one_problem(check):
    # Two `${…}` in one string reading one undefined name (or the step itself): one line, in
    # every place a string is checked.
    out = check("""
        variables: {v: "${q}-${q}"}
        env: {A: "${w}-${w}"}
        servers:
          s: {command: x, args: ["${k}-${k}"]}
        steps:
          - id: create
            tool: http
            args: {url: "https://${api.host}/${api.version}/items"}
          - id: loop
            tool: echo
            args: {value: "${steps.loop.status} ${steps.loop.error}"}
    """)
    assert out == [
        "plan.yaml:1:16: error: variable 'v': undefined name 'q'",
        "plan.yaml:2:10: error: env.A: undefined name 'w'",
        "plan.yaml:4:26: error: server 's': args[0]: undefined name 'k'",
        "plan.yaml:8:17: error: step 'create': args.url: undefined name 'api'",
        "plan.yaml:11:19: error: dependency cycle: loop -> loop",
    ]


def test_variables_given_to_validate_define_names(check):
    text = "steps:\n  - {id: a, tool: echo, args: {value: '${target}'}}\n"
    assert check(text) == ["plan.yaml:2:39: error: step 'a': args.value: undefined name 'target'"]
    assert check(text, variables={"target": "prod"}) == []


def test_unknown_tool_with_did_you_mean(check):
    out = check("""
        steps:
          - {id: a, tool: shel}
          - {id: b, tool: frobnicate}
    """)
    assert out == [
        "plan.yaml:2:19: error: step 'a': unknown tool 'shel' (did you mean 'shell'?)",
        "plan.yaml:3:19: error: step 'b': unknown tool 'frobnicate'",
    ]


def test_unknown_mcp_server(check):
    out = check("""
        servers:
          files: {command: mcp-server-filesystem}
        steps:
          - {id: a, tool: file.read_file}
          - {id: b, tool: files.read_file}
    """)
    assert out == [
        "plan.yaml:4:19: error: step 'a': unknown MCP server 'file' in tool 'file.read_file' (did you mean 'files'?)"
    ]


def test_policy_deny(check):
    out = check("""
        policy: {deny: ["fs.write_*", shell]}
        servers:
          fs: {command: mcp-server-filesystem}
        steps:
          - {id: a, tool: fs.write_file}
          - {id: b, tool: fs.read_file}
          - {id: c, tool: shell, args: {cmd: "true"}}
    """)
    assert out == [
        "plan.yaml:5:19: error: step 'a': tool 'fs.write_file' is denied by policy (deny: 'fs.write_*')",
        "plan.yaml:7:19: error: step 'c': tool 'shell' is denied by policy (deny: 'shell')",
    ]


def test_result_variable_bound_by_concurrent_steps_is_a_warning(check):
    out = check("""
        steps:
          - {id: a, tool: echo, args: {value: 1}, result_variable: v}
          - {id: b, tool: echo, args: {value: 2}, result_variable: v}
          - {id: c, tool: echo, args: {value: 3}, result_variable: v, depends_on: [a, b]}
    """)
    assert out == [
        "plan.yaml:3:60: warning: result variable 'v' is bound by steps 'a' and 'b', which may run concurrently"
    ]


def test_all_problems_at_once_sorted_by_position(check):
    out = check("""
        steps:
          - {id: a, tool: ech}
          - {id: a, tool: echo, depends_on: [zz]}
          - {id: c, tool: echo, args: {value: "${nope}"}, on_failure: never}
    """)
    assert [line.split(": error: ")[0] for line in out] == [
        "plan.yaml:2:19",
        "plan.yaml:3:10",
        "plan.yaml:3:38",
        "plan.yaml:4:39",
        "plan.yaml:4:63",
    ]


# ---- mcp-cli plans -----------------------------------------------------------------------

MCP_CLI_PLAN = {
    "id": "refactor-auth",
    "title": "Refactor the auth module",
    "variables": {"module_path": "src/auth/handler.py"},
    "steps": [
        {
            "index": "1",
            "title": "Read the module",
            "tool": "read_file",
            "args": {"path": "${module_path}"},
            "depends_on": [],
            "result_variable": "auth_code",
        },
        {
            "index": 2,
            "title": "Look at it",
            "tool": "echo",
            "args": {"value": "${auth_code}"},
            "depends_on": ["1"],
            "result_variable": "review",
        },
        {
            "index": 3,
            "title": "Write it back",
            "tool": "write_file",
            "args": {"path": "out.py", "content": "${review}"},
            "depends_on": [2],
        },
    ],
}


def test_mcp_cli_plan_loads_and_validates_unchanged(check):
    assert check(json.dumps(MCP_CLI_PLAN, indent=2), "refactor.json") == []
    from planrun.plan.validate import load_plan

    plan = load_plan("refactor.json")
    assert plan.name == "refactor-auth" and plan.title == "Refactor the auth module"
    assert [s.id for s in plan.steps] == ["1", "2", "3"]
    assert [s.depends_on for s in plan.steps] == [[], ["1"], ["2"]]
    assert plan.steps[0].result_variable == "auth_code"


def test_mcp_cli_plan_errors_point_at_index(check):
    bad = json.loads(json.dumps(MCP_CLI_PLAN))
    bad["steps"][2]["index"] = 2
    out = check(json.dumps(bad, indent=2), "refactor.json")
    assert out == [
        "refactor.json:31:16: error: duplicate step id '2' (first defined in step #2)",
        "refactor.json:39:9: error: dependency cycle: 2 -> 2",
    ]


# ---- through the CLI: formats, several files, exit codes -----------------------------------

BROKEN = """\
steps:
  - id: build
    tool: echo
    depends_on: [compile]
  - id: compile_c
    tool: shel
"""


@pytest.mark.e2e  # a real `python -m planrun` process
def test_text_format_and_exit_3(run, write):
    write("plan.yaml", BROKEN)
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:4:18: error: step 'build' depends on unknown step 'compile' (did you mean 'compile_c'?)",
        "plan.yaml:6:11: error: step 'compile_c': unknown tool 'shel' (did you mean 'shell'?)",
    ]
    assert_no_traceback(r)


def test_json_format_over_several_files_is_one_document(run, write):
    write("plan.yaml", BROKEN)
    write("good.yaml", "steps:\n  - {id: a, tool: echo}\n")
    write(
        "warn.yaml",
        """
        steps:
          - {id: a, tool: echo, result_variable: v}
          - {id: b, tool: echo, result_variable: v}
    """,
    )
    r = run("validate", "good.yaml", "plan.yaml", "warn.yaml", "--format", "json")
    assert r.code == 3, r
    doc = r.json
    assert doc["valid"] is False
    assert doc["diagnostics"] == [
        {
            "file": "plan.yaml",
            "line": 4,
            "col": 18,
            "severity": "error",
            "message": "step 'build' depends on unknown step 'compile' (did you mean 'compile_c'?)",
        },
        {
            "file": "plan.yaml",
            "line": 6,
            "col": 11,
            "severity": "error",
            "message": "step 'compile_c': unknown tool 'shel' (did you mean 'shell'?)",
        },
        {
            "file": "warn.yaml",
            "line": 3,
            "col": 42,
            "severity": "warning",
            "message": "result variable 'v' is bound by steps 'a' and 'b', which may run concurrently",
        },
    ]
    ok = run("validate", "good.yaml", "warn.yaml", "--format", "json")
    assert ok.code == 0 and ok.json["valid"] is True and len(ok.json["diagnostics"]) == 1, ok


def test_json_format_for_a_parse_error(run, write):
    write("bad.json", '{"steps": [1,]}')
    r = run("validate", "bad.json", "--format", "json")
    assert r.code == 3, r
    assert r.json == {
        "valid": False,
        "diagnostics": [
            {
                "file": "bad.json",
                "line": 1,
                "col": 14,
                "severity": "error",
                "message": "invalid JSON: Expecting value",
            }
        ],
    }


def test_github_format(run, write):
    write("plan.yaml", BROKEN)
    write(
        "warn.yaml",
        """
        steps:
          - {id: a, tool: echo, result_variable: v}
          - {id: b, tool: echo, result_variable: v}
    """,
    )
    r = run("validate", "plan.yaml", "warn.yaml", "--format", "github")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "::error file=plan.yaml,line=4,col=18::step 'build' depends on unknown step 'compile' (did you mean 'compile_c'?)",
        "::error file=plan.yaml,line=6,col=11::step 'compile_c': unknown tool 'shel' (did you mean 'shell'?)",
        "::warning file=warn.yaml,line=3,col=42::result variable 'v' is bound by steps 'a' and 'b', which may run concurrently",
    ]


def test_valid_plan_exits_0_and_warning_keeps_exit_0(run, write):
    write("good.yaml", "steps:\n  - {id: a, tool: echo}\n")
    r = run("validate", "good.yaml")
    assert r.code == 0 and r.out == "", r
    write(
        "warn.yaml",
        """
        steps:
          - {id: a, tool: echo, result_variable: v}
          - {id: b, tool: echo, result_variable: v}
    """,
    )
    r = run("validate", "warn.yaml")
    assert r.code == 0, r
    assert r.out.splitlines() == [
        "warn.yaml:3:42: warning: result variable 'v' is bound by steps 'a' and 'b', which may run concurrently"
    ]


def test_policy_deny_exits_3(run, write):
    write(
        "plan.yaml",
        """
        policy: {deny: [shell]}
        steps:
          - {id: a, tool: shell, args: {cmd: "true"}}
    """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert (
        r.out
        == "plan.yaml:3:19: error: step 'a': tool 'shell' is denied by policy (deny: 'shell')\n"
    )


def test_var_and_vars_file_define_names(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: "${target} ${region.name}"}}
    """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:2:39: error: step 'a': args.value: undefined name 'target'",
        "plan.yaml:2:39: error: step 'a': args.value: undefined name 'region'",
    ]
    write("vars.yaml", "region: {name: eu}\n")
    r = run("validate", "plan.yaml", "--var", "target=prod", "--vars-file", "vars.yaml")
    assert r.code == 0 and r.out == "", r
    r = run("validate", "plan.yaml", "--var", "target=prod")
    assert r.code == 3 and "undefined name 'region'" in r.out and "target" not in r.out, r


@pytest.mark.parametrize(
    "args, needle",
    [
        (("validate", "missing.yaml"), "plan file not found: missing.yaml"),
        (("validate", "good.yaml", "--format", "xml"), "Invalid value for '--format'"),
        (("validate",), "no planrun.yaml, planrun.yml or planrun.json"),  # no default plan
        (("validate", "good.yaml", "--var", "novalue"), "--var expects KEY=VALUE"),
        (("validate", "good.yaml", "--frobnicate"), "No such option"),
    ],
)
def test_usage_errors_exit_2(run, write, args, needle):
    write("good.yaml", "steps:\n  - {id: a, tool: echo}\n")
    r = run(*args)
    assert r.code == 2, r
    assert needle in r.err, r
    assert_no_traceback(r)


def test_directory_and_non_utf8_through_the_cli(run, write, tmp_path):
    (tmp_path / "d.yaml").mkdir()
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    r = run("validate", "d.yaml", "latin1.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "d.yaml:1:1: error: d.yaml is a directory, not a plan file",
        "latin1.yaml:1:10: error: plan file is not valid UTF-8: byte 0xe9 at offset 9",
    ]


def test_server_entries_may_read_only_variables_and_env(check):
    # Servers start before any step runs, so a result variable or steps.X cannot reach them.
    out = check(
        """
        variables: {repo: .}
        servers:
          git:
            command: mcp-server-git
            args: ["--repository", "${rpo}", "${env.HOME}", "${repo}", "${out}"]
            env: {TOKEN: "${steps.a.result}", BAD: "${1 +}"}
        steps:
          - {id: a, tool: git.git_status, args: {repo_path: "."}, result_variable: out}
        """
    )
    assert out == [
        "plan.yaml:5:28: error: server 'git': args[1]: undefined name 'rpo' (did you mean 'repo'?)",
        "plan.yaml:5:64: error: server 'git': args[4]: undefined name 'out' "
        "(a server starts before any step: use variables or env)",
        "plan.yaml:6:18: error: server 'git': env.TOKEN: undefined name 'steps' "
        "(a server starts before any step: use variables or env)",
        "plan.yaml:6:44: error: server 'git': env.BAD: bad expression '${1 +}': unexpected 'end of template'",
    ]


def test_run_refuses_an_undefined_name_in_a_server_entry(run, write):
    write(
        "plan.yaml",
        """
        servers:
          git: {command: mcp-server-git, args: ["--repository", "${nope}"]}
        steps:
          - {id: a, tool: git.git_status, args: {repo_path: "."}}
        """,
    )
    r = run("run", "--no-state", "plan.yaml")
    assert r.code == 3, r
    assert "plan.yaml:2:57: error: server 'git': args[1]: undefined name 'nope'" in r.out + r.err, r
    assert "internal error" not in r.err, r


def test_alias_given_together_with_its_key(check):
    out = check(
        """
        id: from-id
        name: from-name
        steps:
          - {id: c, index: 3, tool: echo}
        """
    )
    assert out == [
        "plan.yaml:1:1: error: the plan: 'id' is an alias of 'name': give only one of them",
        "plan.yaml:4:13: error: step 'c': 'index' is an alias of 'id': give only one of them",
    ]


def test_booleans_and_negatives_are_not_counts(check):
    out = check(
        """
        limits: {max_steps: true, max_concurrency: 0, tool_caps: {shell: -1}}
        defaults: {retries: false}
        steps:
          - {id: a, tool: echo, retries: true}
        """
    )
    assert out == [
        "plan.yaml:1:21: error: limits.max_steps: expected a whole number, got true",
        "plan.yaml:1:44: error: limits.max_concurrency: expected 1 or more, got 0",
        "plan.yaml:1:66: error: limits.tool_caps.shell: expected 0 or more, got -1",
        "plan.yaml:2:21: error: defaults.retries: expected a whole number, got false",
        "plan.yaml:4:34: error: step 'a': retries: expected a whole number, got true",
    ]


def test_unknown_jinja_filters_and_tests_are_errors(run, write):
    write(
        "f.yaml",
        'steps:\n  - {id: a, tool: echo, args: {value: "${[1] | nofilter}"}}\n'
        '  - {id: b, tool: echo, args: {value: "${x is nosuchtest}"}}\n',
    )
    r = run("validate", "f.yaml", "--var", "x=1")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "f.yaml:2:39: error: step 'a': args.value: bad expression '${[1] | nofilter}': unknown filter 'nofilter'",
        "f.yaml:3:39: error: step 'b': args.value: bad expression '${x is nosuchtest}': unknown test 'nosuchtest'",
    ]


# ---- validation and schema -----------------------------------------------------------------------


def test_a_bad_value_under_an_alias_is_reported_at_that_value(run, write):
    # `id` (a plan's name) and `index` (an mcp-cli step's id) are aliases: an error in their
    # value sits on that value, named as written, not at 1:1 quoting the whole mapping.
    write("p.yaml", "id: [1]\nsteps:\n  - {index: [2], tool: echo}\n")
    write("q.json", '{"id": 42, "steps": []}')
    r = run("validate", "p.yaml", "q.json", "--format", "json")
    assert r.code == 3, r
    errors = [
        (d["file"], d["line"], d["col"], d["message"])
        for d in r.json["diagnostics"]
        if d["severity"] == "error"
    ]
    assert errors == [
        ("p.yaml", 1, 5, "id: expected a string, got [1]"),
        ("p.yaml", 3, 13, "step #1: index: expected a string, got [2]"),
        ("q.json", 1, 8, "id: expected a string, got 42"),
    ]


def test_a_boolean_step_id_is_named_as_the_plan_writes_it(run, write):
    # YAML's `true` is named `true`, never Python's `True`; an integer id (the mcp-cli
    # format's `index`) is named as written.
    write(
        "p.yaml",
        "steps:\n  - {id: true, tool: echo, args: {value: 1}}\n"
        "  - {index: false, run: x, tool: echo}\n  - {index: 3, tool: echo, args: {value: 1}, note: 1}\n",
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert "'True'" not in r.out and "'False'" not in r.out, r.out
    assert "p.yaml:2:10: error: step 'true': id: expected a string, got true" in r.out, r.out
    assert "p.yaml:3:20: error: step 'false' has both 'run' and 'tool'" in r.out, r.out
    assert "p.yaml:4:46: error: unknown key 'note' in step '3'" in r.out, r.out


def test_a_bad_foreach_as_name_is_planruns_own_message(run, write):
    write("p.yaml", 'steps:\n  - {id: c, tool: echo, foreach: [1], as: "bad name", args: {}}\n')
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert (
        r.out
        == "p.yaml:2:43: error: step 'c': bad 'as' name 'bad name': use a name like 'my_var'\n"
    )


@pytest.mark.parametrize("field", ["sources", "outputs"])
def test_a_nul_in_a_pattern_is_a_validation_error(tmp_path: Path, field: str) -> None:
    (tmp_path / "plan.yaml").write_text(
        f'steps:\n  - {{id: s, tool: shell, args: {{cmd: "echo hi"}}, {field}: ["src/\\u0000x"]}}\n'
    )
    for args in (
        ("validate", "plan.yaml"),
        ("run", "plan.yaml"),
        ("run", "plan.yaml", "--dry-run"),
    ):
        r = planrun(*args, cwd=tmp_path)
        assert_no_traceback(r)
        assert r.code == 3, r
        assert "plan.yaml:2:" in r.out and f"{field}[0]" in r.out and "internal error" not in r.err


# ---- overlap, before anything runs ---------------------------------------------------------

OVERLAP = """
    steps:
      - id: gen
        tool: shell
        args: {cmd: "echo x > src/gen.py"}
        sources: ["src/**/*.py", "!src/skip/**"]
        outputs: ["dist/a.txt", "src/gen.py", "src/skip/x.py"]
      - id: fine
        tool: shell
        args: {cmd: "echo y"}
        sources: ["src"]
        outputs: ["dist/*.whl"]
"""


def test_outputs_overlapping_their_own_sources_warn_at_validation(tmp_path: Path) -> None:
    write_indented_plan(tmp_path, OVERLAP)
    (tmp_path / "src").mkdir()  # the sources match a file: the overlap is the one warning
    (tmp_path / "src/a.py").write_text("a\n")
    r = planrun("validate", "plan.yaml", "--format", "json", cwd=tmp_path)
    assert r.code == 0, r
    (d,) = r.json["diagnostics"]
    assert d["severity"] == "warning" and (d["line"], d["col"]) == (6, 29), d
    assert "step 'gen'" in d["message"] and "src/gen.py" in d["message"]
    assert "never hit" in d["message"]
    text = planrun("validate", "plan.yaml", cwd=tmp_path)
    assert text.code == 0 and "plan.yaml:6:29: warning: step 'gen'" in text.out, text


UNMATCHED = """
    variables: {where: src}
    steps:
      - id: build
        run: echo build
        sources: ["src/**/*.py", "missing/**", "!src/skip/**", "${where}/*.txt"]
      - id: pkg
        run: echo pkg
        cwd: pkg
        sources: ["src", "docs/*.md"]
"""


def test_a_sources_pattern_that_matches_no_file_warns_at_validation(tmp_path: Path) -> None:
    write_indented_plan(tmp_path, UNMATCHED)
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.py").write_text("a\n")
    (tmp_path / "pkg/src").mkdir(parents=True)
    (tmp_path / "pkg/src/b.py").write_text("b\n")
    r = planrun("validate", "plan.yaml", cwd=tmp_path)
    # Patterns are read from each step's directory; an exclude and a `${…}` (rendered only
    # when the step runs) are not looked at. A warning: the run goes on with an empty set.
    assert r.code == 0, r
    assert r.out.splitlines() == [
        "plan.yaml:5:30: warning: step 'build': sources[1] 'missing/**' matches no file",
        "plan.yaml:9:22: warning: step 'pkg': sources[1] 'docs/*.md' matches no file",
    ]
    # The files are read each time (the plan cache keeps no verdict about them).
    (tmp_path / "missing").mkdir()
    (tmp_path / "missing/c").write_text("c\n")
    r = planrun("validate", "plan.yaml", cwd=tmp_path)
    assert r.out.splitlines() == [
        "plan.yaml:9:22: warning: step 'pkg': sources[1] 'docs/*.md' matches no file"
    ]


def test_a_pattern_whose_braces_expand_past_the_limit_is_a_validation_error(
    tmp_path: Path,
) -> None:
    pattern = "src/" + "{a,b}" * 30  # 2**30 alternatives
    (tmp_path / "plan.yaml").write_text(
        f'steps:\n  - {{id: s, tool: shell, args: {{cmd: "true"}}, sources: ["{pattern}"]}}\n'
    )
    for args in (("validate", "plan.yaml"), ("run", "plan.yaml")):
        r = planrun(*args, cwd=tmp_path)
        assert_no_traceback(r)
        assert r.code == 3, r
        assert "plan.yaml:2:" in r.out and "sources[0]" in r.out and "braces" in r.out, r


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("bad.yaml", "steps: [\n", "bad.yaml:2:1: error: invalid YAML"),
        ("bad.json", '{"steps": [}', "bad.json:1:12: error: invalid JSON"),
        ("empty.yaml", "", "empty.yaml:1:1: error: plan file is empty"),
        ("text.yaml", "just text\n", "text.yaml:1:1: error: a plan must be a mapping"),
        ("tasks", "- a\n", "tasks:1:1: error: a plan must be a mapping"),
    ],
)
def test_a_plan_that_does_not_parse_is_named_as_given_by_run(run, write, name, text, where):
    # as `validate` names it (the contract's `plan.yaml:12:7: error: ...`), not by its full path
    write(name, text)
    for command in (["run", name], ["run", name, "--dry-run"], ["validate", name]):
        r = run(*command)
        assert r.code == 3, r
        assert r.out.startswith(where), (command, r.out)


def test_a_bad_step_id_is_never_printed_raw(run, write):
    """An id with a line feed and an escape sequence: one line, no escape reaches the terminal."""
    write("p.json", '{"steps": [{"id": "a\\n\\u001b]0;owned\\u0007x", "tool": "echo"}]}')
    r = run("validate", "p.json")
    assert r.code == 3, r
    assert "\x1b" not in r.out + r.err and len((r.out + r.err).strip().splitlines()) == 1, r
    assert "bad step id" in r.out + r.err, r


def test_a_diagnostic_naming_plan_text_stays_one_line(run, write):
    write("t.json", '{"steps": [{"id": "a", "tool": "sh\\nell\\u001b[2J"}]}')
    r = run("validate", "t.json")
    assert r.code == 3, r
    assert len(r.out.strip().splitlines()) == 1 and "\x1b" not in r.out + r.err, r
    assert "unknown tool 'sh\\nell\\x1b[2J'" in r.out, r


def test_the_unmatched_sources_check_stops_at_the_first_file_a_pattern_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`validate` asks whether a pattern matches a file, not which files: in a tree of 40
    directories it lists the few directories on the way to the first match, not all 40 (a
    monorepo's `src/**` would be walked whole at every validate). A pattern that matches
    nothing is still looked for everywhere."""
    import os

    write_indented_plan(
        tmp_path,
        """
        steps:
          - {id: a, run: "true", sources: ["src/**/*.py"]}
          - {id: b, run: "true", sources: ["src"]}
          - {id: c, run: "true", sources: ["src/**/*.rs"]}
        """,
    )
    for n in range(40):
        (tmp_path / f"src/d{n}").mkdir(parents=True)
        (tmp_path / f"src/d{n}/m.py").write_text("x\n")
    listed: list[str] = []
    src = str(tmp_path / "src")
    scandir, listdir = os.scandir, os.listdir

    def counted_scandir(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        return scandir(path)

    def counted_listdir(path: Any = ".") -> Any:
        listed.append(os.readlink(f"/proc/self/fd/{path}") if isinstance(path, int) else path)
        return listdir(path)

    monkeypatch.setattr(os, "scandir", counted_scandir)
    monkeypatch.setattr(os, "listdir", counted_listdir)
    r = planrun("validate", "plan.yaml", cwd=tmp_path)
    assert r.code == 0, r
    assert r.out.splitlines() == [
        "plan.yaml:4:40: warning: step 'c': sources[0] 'src/**/*.rs' matches no file"
    ], r
    below = [p for p in listed if p == src or p.startswith(src + os.sep)]
    # a and b: src and the one directory holding the first match each; c: all 41
    assert len(below) <= 2 * 2 + 41, below

"""Values in shell commands are data in every quoting context: nothing in them runs or expands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback

# Each value tries to run `touch pwned-N` (or to end a here-document early) in some context.
VALUES = [
    "$(touch pwned-1)",
    "`touch pwned-2`",
    "$HOME and ${HOME}",
    "it's",
    'say "hi"',
    "'; touch pwned-3; '",
    '"; touch pwned-4; "',
    "; touch pwned-5",
    "line1\nline2",
    "x\nEOF\ntouch pwned-6\nEOF",
    "back\\slash\\",
    "\\$(touch pwned-7)",
    "hello world",
    "*",
    "plain-1.2",
    "if",
    "",
    "$((1+1)) !x ~root",
]

# (context, command template, what the command prints for a value V)
CONTEXTS = [
    ("unquoted", "printf '%s' ${v}", "{v}"),
    ("double", "printf '%s' \"<${v}>\"", "<{v}>"),
    ("single", "printf '%s' '<${v}>'", "<{v}>"),
    ("heredoc", "cat <<EOF\n<${v}>\nEOF", "<{v}>\n"),
    ("heredoc-quoted", "cat <<'EOF'\n$HOME `x` \\ <${v}>\nEOF", "$HOME `x` \\ <{v}>\n"),
    ("heredoc-dash", 'cat <<-"END"\n\t<${v}>\n\tEND', "<{v}>\n"),
    ("substitution", "printf '%s' \"$(printf '%s' \"<${v}>\")\"", "<{v}>"),
    ("backticks", "x=`printf '%s' ${v}`; printf '%s' \"$x\"", "{v}"),
    ("parameter", "printf '%s' \"$${UNSET_PLANRUN_X:-<${v}>}\"", "<{v}>"),
    ("two-in-a-word", "printf '%s' ${v}'|'\"${v}\"", "{v}|{v}"),
]


def plan_for(contexts: list[tuple[str, str, str]]) -> str:
    steps = []
    for ci, (_, cmd, _) in enumerate(contexts):
        for vi in range(len(VALUES)):
            steps.append(
                {
                    "id": f"c{ci}v{vi}",
                    "tool": "shell",
                    "args": {"cmd": cmd.replace("${v}", f"${{values[{vi}]}}")},
                    "on_failure": "continue",
                }
            )
    return json.dumps({"name": "quoting", "steps": steps})


def check_matrix(tmp_path: Path, doc: dict, contexts: list[tuple[str, str, str]]) -> None:  # type: ignore[type-arg]
    steps = {s["id"]: s for s in doc["steps"]}
    wrong = []
    for ci, (name, _, expected) in enumerate(contexts):
        for vi, value in enumerate(VALUES):
            step = steps[f"c{ci}v{vi}"]
            want = expected.replace("{v}", value)
            got = (step["result"] or {}).get("stdout")
            if step["status"] != "succeeded" or got != want:
                wrong.append((name, value, step["status"], step["error"], got, want))
    assert not wrong, "\n".join(map(repr, wrong))
    assert not list(tmp_path.glob("pwned*"))


def test_hostile_values_round_trip_in_every_context(run, write, tmp_path):
    write("p.json", plan_for(CONTEXTS))
    (tmp_path / "vars.json").write_text(json.dumps({"values": VALUES}))
    r = run(
        "run", "p.json", "--vars-file", "vars.json", "--no-state", "--output", "json", "-j", "2"
    )
    assert_no_traceback(r)
    check_matrix(tmp_path, r.json, CONTEXTS)
    assert r.code == 0, r


def test_value_in_double_quotes_is_not_shell_quoted(run, write):
    write(
        "p.yaml",
        """
        variables: {s: hello world, msg: "$(touch pwned)"}
        steps:
          - {id: a, tool: shell, args: {cmd: 'echo "msg=${s}"'}}
          - {id: b, tool: shell, args: {cmd: 'echo "Message: ${msg}"'}}
        """,
    )
    r = run("run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 0, r
    out = [s["result"]["stdout"] for s in r.json["steps"]]
    assert out == ["msg=hello world\n", "Message: $(touch pwned)\n"]


def test_dry_run_shows_the_command_that_really_runs(run, write, tmp_path):
    write(
        "p.yaml",
        """
        variables: {msg: "$(touch pwned)", name: world}
        steps:
          - {id: a, tool: shell, args: {cmd: 'echo "Message: ${msg}" ${name}'}}
        """,
    )
    r = run("run", "p.yaml", "--dry-run", "--output", "json")
    assert r.code == 0, r
    args = r.json["steps"][0]["args"]
    assert args["cmd"] == 'echo "Message: ${PLANRUN_V_0}" world'
    assert args["env"] == {"PLANRUN_V_0": "$(touch pwned)"}
    r = run("run", "p.yaml", "--dry-run")
    assert "PLANRUN_V_0" in r.out and "$(touch pwned)" in r.out
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("cmd", "value", "message"),
    [
        ("printf '%s' ${v}", "a\0b", "NUL"),
        ("echo $((${v} + 1))", "1; touch pwned", "integer"),
        ("echo \\${v}", "x", "backslash"),
        ("cat <<'E F'\n${v}\nE F", "x", "delimiter"),
    ],
)
def test_values_that_cannot_go_in_safely_fail_their_step_in_one_line(
    run, write, tmp_path, cmd, value, message
):
    write(
        "p.json",
        json.dumps({"steps": [{"id": "a", "tool": "shell", "args": {"cmd": cmd}}]}),
    )
    (tmp_path / "vars.json").write_text(json.dumps({"v": value}))
    r = run("run", "p.json", "--vars-file", "vars.json", "--no-state", "--output", "json")
    assert r.code == 1, r
    assert_no_traceback(r)
    error = r.json["steps"][0]["error"]
    assert message in error and "\n" not in error, error
    assert not (tmp_path / "pwned").exists()


def test_arithmetic_takes_integers(run, write):
    write(
        "p.yaml",
        "variables: {n: 41}\nsteps:\n  - {id: a, tool: shell, args: {cmd: 'echo $((${n} + 1))'}}\n",
    )
    r = run("run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 0 and r.json["steps"][0]["result"]["stdout"] == "42\n", r


@pytest.mark.slow  # a real Dask cluster
def test_hostile_values_round_trip_on_the_dask_executor(run, write, tmp_path, cluster):
    contexts = [CONTEXTS[0], CONTEXTS[1], CONTEXTS[2], CONTEXTS[4]]
    write("p.json", plan_for(contexts))
    (tmp_path / "vars.json").write_text(json.dumps({"values": VALUES}))
    r = run(
        "run",
        "p.json",
        "--vars-file",
        "vars.json",
        "--no-state",
        "--output",
        "json",
        "--executor",
        "dask",
        "--address",
        cluster.address,
        timeout=180,
    )
    assert_no_traceback(r)
    check_matrix(tmp_path, r.json, contexts)
    assert r.code == 0, r


def test_nul_in_a_list_cmd_or_env_fails_the_step_in_one_line(run, write, tmp_path):
    steps = [
        {"id": "argv", "tool": "shell", "args": {"cmd": ["printf", "%s", "${v}"]}},
        {"id": "env", "tool": "shell", "args": {"cmd": "true", "env": {"X": "${v}"}}},
    ]
    write("p.json", json.dumps({"steps": [{**s, "on_failure": "continue"} for s in steps]}))
    (tmp_path / "vars.json").write_text(json.dumps({"v": "a\0b"}))
    r = run("run", "p.json", "--vars-file", "vars.json", "--no-state", "--output", "json")
    assert r.code == 1, r
    assert_no_traceback(r)
    for step in r.json["steps"]:
        assert step["error"].startswith("shell:") and "NUL byte" in step["error"], step


# (name, command template, the value, what the command must print). `${v}` is the value.
CASES = [
    # a tilde prefix reads the characters after `~` as a login name: `~root` is /root
    ("tilde", "printf %s ~${v}", "root", "~root"),
    ("tilde-assignment", 'X=a:~${v}; printf %s "$X"', "root", "a:~root"),
    ("tilde-default", "printf %s $${UNSET_PLANRUN_X:-~${v}}", "root", "~root"),
    # inside ${…} a value written in place can change the operator: `%` + `%` is `%%`
    ("parameter-operator", "y=a%b%c; printf %s $${y%${v}*}", "%", "a%b"),
    ("parameter-operator-dq", 'y=a%b%c; printf %s "$${y%${v}*}"', "%", "a%b"),
    # in a ${…#…} or ${…%…} pattern within "…" an unquoted expansion is a pattern: `a?` is glob
    ("parameter-pattern-dq", 'y=abc; printf %s "$${y#${v}}"', "a?", "abc"),
    ("parameter-pattern-dq-pct", 'y=abc; printf %s "$${y%${v}}"', "?", "abc"),
    # …while '…' does quote there, even within "…"
    ("parameter-pattern-sq-in-dq", "y=abc; printf %s \"$${y#'${v}'}\"", "a", "bc"),
    ("heredoc-pattern", "y='a b c'; cat <<EOF\n$${y#${v}}\nEOF", "a b", " c\n"),
    # an unquoted here-document body still runs $(…), backticks and $((…)) in it
    ("heredoc-substitution", "cat <<EOF\n<$(printf %s ${v})>\nEOF", "a  *", "<a  *>\n"),
    ("heredoc-backticks", "cat <<EOF\n<`printf %s ${v}`>\nEOF", "a  *", "<a  *>\n"),
    ("heredoc-dash", "cat <<-EOF\n\t<$(printf %s ${v})>\n\tEOF", "a  *", "<a  *>\n"),
    # inside backticks, `\\` is one backslash and (within "…") `\"` a quote, read again
    # a `case` pattern's `)` inside "$(…)" does not end the $(…)
    ("case-in-substitution", 'printf %s "$(case x in x) printf %s ${v};; esac)"', "a  *", "a  *"),
    (
        "case-sq-in-substitution",
        "printf %s \"$(case x in x) printf %s '${v}';; esac)\"",
        "it's",
        "it's",
    ),
    ("word-case-in-substitution", 'printf %s "$(printf case) ${v}"', "a  *", "case a  *"),
    ("backticks-in-dq", 'printf %s "`printf %s \\"${v}\\"`"', "a  *", "a  *"),
]


def run_cases(run, write, tmp_path: Path, cases, *extra: str, **kw):  # type: ignore[no-untyped-def]
    steps = [
        {
            "id": f"s{i}",
            "tool": "shell",
            "args": {"cmd": cmd.replace("${v}", f"${{values[{i}]}}")},
            "on_failure": "continue",
        }
        for i, (_, cmd, _, _) in enumerate(cases)
    ]
    write("p.json", json.dumps({"name": "review", "steps": steps}))
    (tmp_path / "vars.json").write_text(json.dumps({"values": [c[2] for c in cases]}))
    r = run(
        "run", "p.json", "--vars-file", "vars.json", "--no-state", "--output", "json", *extra, **kw
    )
    assert_no_traceback(r)
    return r


def test_values_stay_data_after_tilde_in_parameter_operators_heredocs_and_substitutions(
    run, write, tmp_path
):
    r = run_cases(run, write, tmp_path, CASES)
    wrong = []
    for (name, _, value, want), step in zip(CASES, r.json["steps"], strict=True):
        got = (step["result"] or {}).get("stdout")
        if step["status"] != "succeeded" or got != want:
            wrong.append((name, value, step["status"], step["error"], got, want))
    assert not wrong, "\n".join(map(repr, wrong))
    assert r.code == 0, r


@pytest.mark.parametrize(
    ("cmd", "value", "message"),
    [
        # in a here-document body, $((…)) evaluates the value as arithmetic
        ("cat <<EOF\n$((${v}))\nEOF", "1+1", "integer"),
        # ${…} inside $((…)) is evaluated as arithmetic too (bash would run `a[$(cmd)]`)
        ("echo $(( $${U:-${v}} + 1 ))", "1+1", "integer"),
        ('echo "$(( $${U:-"${v}"} + 1 ))"', "1+1", "integer"),
        ("cat <<EOF\n$(( $${U:-${v}} ))\nEOF", "1+1", "integer"),
        # a <<'EOF' document holding a value is rewritten to <<EOF with its text escaped,
        # which backticks would unescape once more ($HOME expanded)
        ("x=`cat <<'EOF'\n$HOME ${v}\nEOF\n`; printf %s \"$x\"", "a b", "backticks"),
        # dash ignores quotes in a ${…#…} pattern in a here-document: no glob character there
        ("y=abc; cat <<EOF\n$${y#${v}}\nEOF", "a?", "pattern"),
        # `\\` inside backticks is one backslash that escapes what follows
        ('x=`printf %s \\\\${v}`; printf %s "$x"', "a b", "backslash"),
    ],
)
def test_unsafe_spots_fail_the_step_in_one_line(run, write, tmp_path, cmd, value, message):
    r = run_cases(run, write, tmp_path, [("x", cmd, value, "")])
    assert r.code == 1, r
    error = r.json["steps"][0]["error"]
    assert message in error and "\n" not in error, error


@pytest.mark.slow  # a real Dask cluster
def test_values_stay_data_in_those_contexts_on_the_dask_executor(run, write, tmp_path, cluster):
    r = run_cases(
        run, write, tmp_path, CASES, "--executor", "dask", "--address", cluster.address, timeout=180
    )
    got = [(s["status"], (s["result"] or {}).get("stdout")) for s in r.json["steps"]]
    assert got == [("succeeded", c[3]) for c in CASES], r


def test_a_lone_surrogate_fails_its_step_in_one_line(run, write, tmp_path):
    # a python step (or an MCP/HTTP result) can return text that is not Unicode ("\ud800"):
    # no command can receive it
    (tmp_path / "surrogate.py").write_text('def value():\n    return "a\\ud800b"\n')
    steps = [
        {"id": "cmd", "tool": "shell", "args": {"cmd": "printf %s ${v}"}},
        {"id": "env", "tool": "shell", "args": {"cmd": "true", "env": {"X": "${v}"}}},
        {"id": "argv", "tool": "shell", "args": {"cmd": ["printf", "%s", "${v}"]}},
        {"id": "cwd", "tool": "shell", "args": {"cmd": "true", "cwd": "${v}"}},
    ]
    steps = [{**s, "on_failure": "continue", "depends_on": ["make"]} for s in steps]
    make = {
        "id": "make",
        "tool": "python",
        "args": {"function": "surrogate:value"},
        "result_variable": "v",
    }
    write("p.json", json.dumps({"steps": [make, *steps]}))
    r = run("run", "p.json", "--no-state", "--output", "json")
    assert r.code == 1, r
    assert_no_traceback(r)
    for step in r.json["steps"][1:]:
        assert step["error"].startswith("shell:") and "not valid Unicode" in step["error"], step
        assert "\n" not in step["error"]

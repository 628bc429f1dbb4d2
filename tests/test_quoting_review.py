"""Adversarial review of values in shell commands: contexts the first round of tests missed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback

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


def test_values_stay_data_in_the_contexts_review_found(run, write, tmp_path):
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
def test_the_review_contexts_on_the_dask_executor(run, write, tmp_path, cluster):
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

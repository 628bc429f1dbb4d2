"""Every secret is masked in every shape, everywhere it is shown or stored, and steps still get it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback, spawn_planrun, wait_for_file
from tests.testkit import ALL_REPORTS, RESULT_TOKEN, run_then_resume, shown_and_stored


def everything_shown(run, tmp_path: Path, r) -> str:  # type: ignore[no-untyped-def]
    """All a user or a CI system can see of a run: outputs, events, JUnit, state, status."""
    texts = [r.out, r.err]
    for name in ("ev.jsonl", "junit.xml"):
        if (tmp_path / name).exists():
            texts.append((tmp_path / name).read_text())
    for f in (tmp_path / ".planrun").rglob("*"):
        if f.is_file():
            texts.append(f.read_text(errors="replace"))
    for fmt in ("text", "json"):
        s = run("status", "p.yaml", "--output", fmt)
        texts += [s.out, s.err]
    return "\n".join(texts)


def run_all_outputs(run, *extra: str):  # type: ignore[no-untyped-def]
    return run(
        "run",
        "p.yaml",
        "--output",
        "json",
        "--events",
        "ev.jsonl",
        "--junit",
        "junit.xml",
        *extra,
    )


def test_numbers_mappings_quotes_and_lines_are_masked_everywhere(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [pin, creds, quote, key]
        variables:
          pin: 987654321
          creds: {user: agent-7q, password: hunter2-xyz}
          quote: "it's-s3cr3t"
          key: "line-one-AAAA\\nline-two-BBBB"
        steps:
          - id: num
            tool: echo
            args: {value: "${pin}"}
            result_variable: got_pin
          - id: num_text
            tool: shell
            args: {cmd: "echo pin=${pin} user=${creds.user}"}
          - id: whole
            tool: echo
            args: {value: "creds are ${creds}"}
          - id: received
            tool: shell
            args:
              cmd: "test ${got_pin} -eq 987654321 && test '${creds.password}' = hunter2-xyz && echo intact"
          - id: quoted
            tool: shell
            args: {cmd: [sh, -c, "echo \\"$0\\" >&2; exit 1", "${quote}"]}
            on_failure: continue
          - id: lines
            tool: shell
            args: {cmd: "printf '%s\\\\n' \\"${key}\\" >&2; exit 1"}
            on_failure: continue
        """,
    )
    r = run_all_outputs(run, "--stream")
    assert r.code == 1, r
    assert_no_traceback(r)
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["received"]["result"]["stdout"] == "intact\n"  # steps get the real values
    shown = everything_shown(run, tmp_path, r)
    for leak in (
        "987654321",
        "hunter2-xyz",
        "agent-7q",
        "s3cr3t",
        "line-one-AAAA",
        "line-two-BBBB",
    ):
        assert leak not in shown, leak
    assert "***" in steps["num_text"]["result"]["stdout"]
    assert steps["num"]["result"] == "***"


def test_unknown_secret_name_is_a_validation_error(run, write):
    write(
        "p.yaml",
        """
        variables: {api_token: x}
        secrets: [api_tokn]
        steps:
          - {id: a, tool: echo, args: {value: "${api_token}"}}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert "p.yaml:2:11: error: secrets: unknown variable 'api_tokn'" in r.out, r
    assert "api_token" in r.out  # did you mean
    r = run("run", "p.yaml")
    assert r.code == 3, r
    # a name given on the command line, or bound by a step, is known
    write(
        "q.yaml",
        """
        secrets: [given, bound]
        steps:
          - {id: a, tool: echo, args: {value: "${given}"}, result_variable: bound}
        """,
    )
    assert run("validate", "q.yaml", "--var", "given=1").code == 0


def test_the_planner_sees_secrets_masked(run, write, tmp_path):
    write(
        "planner.py",
        """
        import json, sys
        ctx = sys.stdin.read()
        open("context.json", "w").write(ctx)
        print(json.dumps([{"id": "fixed", "tool": "echo", "args": {"value": "ok"}}]))
        """,
    )
    write(
        "p.yaml",
        f"""
        secrets: [token, pin]
        variables: {{token: tok-SECRET-9, pin: 4242424242}}
        replan: {{command: ["{sys.executable}", planner.py]}}
        steps:
          - {{id: first, tool: echo, args: {{value: "${{token}}"}}, result_variable: echoed}}
          - id: breaks
            tool: shell
            args: {{cmd: "echo ${{token}} ${{pin}} >&2; exit 1"}}
            depends_on: [first]
            on_failure: replan
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    context = (tmp_path / "context.json").read_text()
    assert json.loads(context)["variables"]["token"] == "***"
    assert "tok-SECRET-9" not in context and "4242424242" not in context


def test_secrets_passed_into_a_sub_plan_stay_masked(run, write, tmp_path):
    write(
        "child.yaml",
        """
        name: child
        steps:
          - {id: show, tool: shell, args: {cmd: "echo child got ${value}"}}
        """,
    )
    write(
        "p.yaml",
        """
        secrets: [token]
        variables: {token: sub-SECRET-77}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml, variables: {value: "${token}"}}}
        """,
    )
    r = run_all_outputs(run, "--stream")
    assert r.code == 0, r
    assert "sub-SECRET-77" not in everything_shown(run, tmp_path, r)


@pytest.mark.slow  # a real MCP server
def test_mcp_answers_mask_secrets(tmp_path):
    from mcp import Client, StdioServerParameters

    plan = (
        "name: m\nsecrets: [token, pin]\nvariables: {token: x, pin: 0}\nsteps:\n"
        "  - {id: a, tool: shell, args: {cmd: 'echo ${token} ${pin}; exit 1'}}\n"
    )
    variables = {"token": "mcp-SECRET-5", "pin": 55667788}

    async def main():  # type: ignore[no-untyped-def]
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "planrun", "mcp"],
            cwd=str(tmp_path),
            env=dict(os.environ),  # the SDK passes only a few variables on (PYTHONPATH matters)
        )
        async with Client(params, read_timeout_seconds=30) as client:
            ran = await client.call_tool("plan_run", {"plan": plan, "variables": variables})
            status = await client.call_tool("plan_status", {"plan": plan})
            dry = await client.call_tool("plan_dry_run", {"plan": plan, "variables": variables})
            return [ran, status, dry]

    answers = asyncio.run(main())
    assert answers[0].structured_content["status"] == "failed"
    for answer in answers:
        text = json.dumps(answer.structured_content) + "".join(
            getattr(c, "text", "") for c in answer.content
        )
        assert "mcp-SECRET-5" not in text and "55667788" not in text, text


def test_fingerprints_in_the_state_are_not_hashes_of_secrets(run, write, tmp_path):
    from planrun.run.scope import fingerprint

    write(
        "p.yaml",
        """
        secrets: [pin]
        variables: {pin: 4321}
        steps:
          - {id: a, tool: shell, args: {cmd: "echo ${pin}"}}
        """,
    )
    assert run("run", "p.yaml").code == 0
    state = (tmp_path / ".planrun/state/p.json").read_text()
    assert fingerprint("shell", {"cmd": "echo 4321"}) not in state  # guessable: 10,000 tries
    # the fingerprint of the step as it reads with the secret masked: that of a plan whose
    # `pin` is `***` (a resume that reads a result recorded masked sees the same)
    write(
        "masked.yaml",
        'variables: {pin: "***"}\nsteps:\n  - {id: a, tool: shell, args: {cmd: "echo ${pin}"}}\n',
    )
    masked = run("run", "masked.yaml", "--dry-run", "--output", "json").json["steps"][0]["args"]
    assert fingerprint("shell", masked) in state
    assert run("resume", "p.yaml").code == 0


def test_a_step_reading_a_secret_has_its_arguments_resolved_once():
    """The fingerprint of a step whose arguments hold a secret is that of its arguments with
    the secret masked, quoted as a masked value would be (`***` goes by environment variable,
    a plain word is written in); its plain references are evaluated once."""
    from collections.abc import Mapping

    from planrun.masking import Masker
    from planrun.plan.definition import Step
    from planrun.run.scope import fingerprint, step_args

    reads: list[str] = []

    class Counting(Mapping):  # type: ignore[type-arg]
        def __init__(self, inner: dict) -> None:  # type: ignore[type-arg]
            self.inner = inner

        def __getitem__(self, name: str) -> object:
            reads.append(name)
            return self.inner[name]

        def __contains__(self, name: object) -> bool:
            return name in self.inner

        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter(self.inner)

        def __len__(self) -> int:
            return len(self.inner)

    variables = {"tok": "s3cr3tword", "who": "ann"}
    step = Step(id="a", tool="shell", args={"cmd": "curl -H ${tok} ${who}"})
    args, fp = step_args(step, Counting(variables), Masker(["tok"], variables))
    assert args["cmd"] == "curl -H s3cr3tword ann"
    assert sorted(reads) == ["tok", "who"]  # each expression once
    masked = step_args(step, {"tok": "***", "who": "ann"})[0]
    assert masked["cmd"] == 'curl -H "${PLANRUN_V_0}" ann'
    assert fp == fingerprint("shell", masked)
    # An expression that transforms the secret reads it masked: its fingerprint is no hash
    # of a text a guess could find.
    step = Step(id="a", tool="shell", args={"cmd": "echo ${tok | upper} ${tok}"})
    fp = step_args(step, variables, Masker(["tok"], variables))[1]
    assert fp == fingerprint("shell", step_args(step, {"tok": "***"})[0])


def test_a_step_result_bound_as_a_secret_is_masked_and_real_after_resume(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: echo
            args: {value: "ResultToken-${'q7w3'}"}
            result_variable: token
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${token}' = ResultToken-""q7w3 && echo received-real-value
        """,
    )
    first = run("run", "p.yaml", *ALL_REPORTS)
    assert first.code == 1, str(first)
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    # The recorded result is not the value: resume must run `login` again, not restore `***`.
    assert state["steps"]["login"]["result_masked"] is True
    again = run_then_resume(run, tmp_path, *ALL_REPORTS)
    assert "received-real-value" in again.err
    assert "result held a secret" in again.err
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, first, again)


def test_a_foreach_result_bound_as_a_secret_is_masked_and_real_after_resume(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [tokens]
        steps:
          - id: mint
            tool: echo
            foreach: [a, b]
            args: {value: "ResultToken-${'q7w3'}-${item}"}
            result_variable: tokens
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${tokens[1]}' = ResultToken-""q7w3-b && echo received-real-value
        """,
    )
    first = run("run", "p.yaml", *ALL_REPORTS)
    assert first.code == 1, str(first)
    again = run_then_resume(run, tmp_path, *ALL_REPORTS)
    assert "received-real-value" in again.err
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, first, again)


def test_a_foreach_over_a_secret_gives_the_real_value_after_resume(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: each
            tool: echo
            foreach: ["${token}", plain]
            args: {value: "${item}"}
            result_variable: values
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${values[0]}' = ResultToken-""q7w3 && echo received-real-value
        """,
    )
    var = ("--var", f"token={RESULT_TOKEN}")
    first = run("run", "p.yaml", *var, *ALL_REPORTS)
    assert first.code == 1, str(first)
    again = run_then_resume(run, tmp_path, *var, *ALL_REPORTS)
    assert "received-real-value" in again.err
    # Resumed twice: what the first resume recorded must still say the result was masked.
    # (`use` is changed so that it runs again: a kept step would not read the result.)
    plan = tmp_path / "p.yaml"
    plan.write_text(plan.read_text().replace("test -e go", ": again; test -e go"))
    (tmp_path / "go").unlink()
    run("resume", "p.yaml", *var)
    (tmp_path / "go").write_text("")
    third = run("resume", "p.yaml", *var)
    assert third.code == 0 and "received-real-value" in third.err, str(third)
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, first, again, third)


def test_masking_never_changes_fingerprints_so_resume_keeps_what_it_should(run, write, tmp_path):
    # A one-character secret masks every `7` in what is shown (documented: best long). The
    # fingerprints the state keeps are digests, not text about the secret: masking them broke
    # resume, which then ran every step whose digest held a `7` again.
    steps = "\n".join(
        f"""
          - id: s{n}
            tool: echo
            args: {{value: "step {n}"}}"""
        for n in range(12)
    )
    write(
        "p.yaml",
        f"""
        secrets: [pin]
        variables: {{pin: 7}}
        steps:{steps}
          - id: last
            tool: shell
            args: {{cmd: "test -e go"}}
        """,
    )
    first = run("run", "p.yaml")
    assert first.code == 1, str(first)
    again = run_then_resume(run, tmp_path)
    assert "its tool or arguments changed" not in again.err, str(again)
    assert again.err.count("kept from the previous run") >= 12, str(again)


def test_stream_does_not_show_the_output_of_a_step_that_binds_a_secret(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: shell
            args: {cmd: "printf '%s\\\\n' ResultToken-''q7w3"}
            result_variable: token
          - id: use
            tool: shell
            args: {cmd: "test '${token.stdout | trim}' = ResultToken-''q7w3 && echo received-real-value"}
        """,
    )
    r = run("run", "p.yaml", "--stream", *ALL_REPORTS)
    assert r.code == 0, str(r)
    assert_no_traceback(r)
    assert "received-real-value" in r.err
    # Not streamed (the value is known only at the step's end): shown with its end, masked.
    assert "[login]" not in r.err
    assert "login succeeded" in r.err and "│ ***" in r.err.split("login succeeded")[1]
    assert "[use] received-real-value" in r.err  # the other steps still stream
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, r)


def test_a_shell_result_bound_as_a_secret_masks_its_output_not_every_zero(run, write, tmp_path):
    # `token` is the whole {stdout, stderr, exit_code}: its exit code 0 is no secret, and
    # masking it hid every `0` of every output and marked unrelated results as masked.
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: shell
            args: {cmd: "printf '%s\\\\n' ResultToken-''q7w3"}
            result_variable: token
          - id: build
            tool: shell
            args: {cmd: "echo built 2010 files"}
            depends_on: [login]
        """,
    )
    r = run("run", "p.yaml", *ALL_REPORTS)
    assert r.code == 0, str(r)
    doc = r.json
    steps = {s["id"]: s for s in doc["steps"]}
    assert steps["login"]["result"] == {"stdout": "***", "stderr": "", "exit_code": 0}
    assert steps["build"]["result"]["stdout"] == "built 2010 files\n"
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["steps"]["build"]["result_masked"] is False
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, r)


def test_a_secret_with_a_trailing_newline_is_masked_once_trimmed(run, write, tmp_path):
    # A command's stdout ends with a newline; `| trim` is how a plan reads it (and a vars file's
    # block scalar ends with one too). The trimmed text is the secret as much as the raw one.
    write("vars.yaml", "pem: |\n  VarsToken-k2m9\n")
    write(
        "p.yaml",
        """
        secrets: [token, pem]
        variables: {pem: none}
        steps:
          - id: login
            tool: shell
            args: {cmd: "printf '%s\\\\n' ResultToken-''q7w3"}
            result_variable: token
          - id: use
            tool: shell
            args: {cmd: "echo '${token.stdout | trim}' '${pem | trim}' >&2; exit 1"}
        """,
    )
    r = run("run", "p.yaml", "--vars-file", "vars.yaml", *ALL_REPORTS)
    assert r.code == 1, str(r)
    assert "$ echo *** *** >&2; exit 1" in r.err
    text = shown_and_stored(run, tmp_path, r)
    assert RESULT_TOKEN not in text and "VarsToken-k2m9" not in text


def test_after_kill_9_a_resumed_step_gets_the_real_secrets(run, write, tmp_path):
    # The journal is all a killed run leaves: what it says about the bound secret must make
    # resume produce it again, and the --var secret is given again.
    write(
        "p.yaml",
        """
        secrets: [token, pin]
        steps:
          - id: login
            tool: echo
            args: {value: "ResultToken-${'q7w3'}"}
            result_variable: token
          - id: deploy
            tool: shell
            args:
              cmd: |
                touch started
                while [ ! -e go ]; do sleep 0.05; done
                test '${token}' = ResultToken-""q7w3 && test '${pin}' = Pin-""x8 && echo received-real-value
            depends_on: [login]
        """,
    )
    var = ("--var", "pin=Pin-x8")
    proc = spawn_planrun(
        "run", "p.yaml", *var, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_file(tmp_path / "started")
    finally:
        proc.kill()
        proc.wait()
    again = run_then_resume(
        run, tmp_path, *var, *ALL_REPORTS
    )  # the orphaned command ends (resume stops it too)
    assert "received-real-value" in again.err
    assert "running 'login' again: result held a secret" in again.err
    text = shown_and_stored(run, tmp_path, again)
    assert RESULT_TOKEN not in text and "Pin-x8" not in text


def test_a_sub_plans_secret_is_real_after_resume_when_the_parent_has_none(run, write, tmp_path):
    # The parent declares no secrets: its record of the `plan` step must still say that the
    # sub-plan's secret was masked in the result, or resume hands `***` on.
    write(
        "sub.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: echo
            args: {value: "ResultToken-${'q7w3'}"}
            result_variable: token
        """,
    )
    write(
        "p.yaml",
        """
        steps:
          - id: sub
            tool: plan
            args: {path: sub.yaml}
            result_variable: sub_vars
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${sub_vars.token}' = ResultToken-""q7w3 && echo received-real-value
        """,
    )
    first = run("run", "p.yaml", *ALL_REPORTS)
    assert first.code == 1, str(first)
    again = run_then_resume(run, tmp_path, *ALL_REPORTS)
    assert "received-real-value" in again.err
    assert "running 'sub' again: result held a secret" in again.err
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, first, again)


def test_a_short_secret_inside_step_ids_never_changes_the_plan_as_recorded(run, write, tmp_path):
    # A 4-digit secret that is also part of step ids and a result variable's name: masking
    # the ids recorded phantom steps (`release-***`, pending forever) and a variable `***_out`.
    write(
        "p.yaml",
        """
        secrets: [pin]
        steps:
          - id: release-2024
            tool: echo
            foreach: [a, b]
            args: {value: "${item}"}
            result_variable: out_2024
          - id: check-2024
            tool: shell
            args: {cmd: "test -e go && echo ${out_2024[1]}"}
        """,
    )
    first = run("run", "p.yaml", "--var", "pin=2024", *ALL_REPORTS)
    assert first.code == 1, str(first)
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    ids = ["release-2024", "check-2024", "release-2024[0]", "release-2024[1]"]
    assert sorted(state["steps"]) == sorted(ids)
    assert state["steps"]["release-2024"]["result_variable"] == "out_2024"
    assert "pending" not in first.err
    again = run_then_resume(run, tmp_path, "--var", "pin=2024", *ALL_REPORTS)
    assert [s["id"] for s in again.json["steps"]] == [ids[0], ids[2], ids[3], ids[1]]
    status = run("status", "p.yaml", "--output", "json")
    assert {s["id"]: s["status"] for s in status.json["steps"]} == {
        ids[0]: "succeeded",
        ids[1]: "succeeded",
        ids[2]: "succeeded",
        ids[3]: "succeeded",
    }


@pytest.mark.parametrize("pin", ["1", "ed", "0.5"])
def test_a_tiny_secret_never_breaks_what_planrun_records(run, write, tmp_path, pin):
    # A 1-2 character secret masks every occurrence of its text (documented: a secret is best
    # long), but never in what planrun itself records: attempt counts (`attempt: ***` crashed
    # the console), statuses (`succe***` made the state unreadable), durations, reasons.
    write(
        "p.yaml",
        """
        secrets: [pin]
        steps:
          - id: a
            tool: echo
            args: {value: x}
          - id: b
            tool: shell
            args: {cmd: "test -e go"}
            depends_on: [a]
        """,
    )
    first = run("run", "p.yaml", "--var", f"pin={pin}", *ALL_REPORTS)
    assert_no_traceback(first)
    assert first.code == 1, str(first)
    assert "internal error" not in first.err
    again = run_then_resume(run, tmp_path, "--var", f"pin={pin}", *ALL_REPORTS)
    doc = again.json
    assert (doc["status"], doc["reason"]) == ("succeeded", "completed")
    assert [(s["status"], s["attempts"]) for s in doc["steps"]] == [("succeeded", 1)] * 2
    status = run("status", "p.yaml", "--output", "json")
    assert status.code == 0, str(status)
    assert [s["status"] for s in status.json["steps"]] == ["succeeded", "succeeded"]


def test_a_plan_variable_that_fails_on_a_secret_does_not_quote_it(run, write, tmp_path):
    # Plan variables are evaluated before the run (no event, no mask on the way): the error
    # of `lookup[token]` names the missing key, which is the secret.
    write(
        "p.yaml",
        """
        secrets: [token, from_env]
        variables:
          lookup: {a: 1}
          from_env: "${env.REVIEW_TOKEN}"
          derived: "${ lookup[token] ~ lookup[from_env] }"
        steps:
          - id: a
            tool: echo
            args: {value: "${derived}"}
        """,
    )
    env = {"REVIEW_TOKEN": "EnvToken-z5v1"}
    for extra in ((), ("--dry-run",), ("--output", "json")):
        r = run("run", "p.yaml", "--var", f"token={RESULT_TOKEN}", *extra, env=env)
        assert r.code == 3, str(r)
        assert "variable 'derived'" in r.out + r.err
        assert RESULT_TOKEN not in r.out + r.err, str(r)
    write("p.yaml", (tmp_path / "p.yaml").read_text().replace("lookup[token] ~ ", ""))
    r = run("run", "p.yaml", "--var", f"token={RESULT_TOKEN}", env=env)
    assert r.code == 3, str(r)
    assert "variable 'derived'" in r.out + r.err
    assert "EnvToken-z5v1" not in r.out + r.err, str(r)


def test_a_malformed_var_does_not_echo_what_may_be_a_secret(run, write, tmp_path):
    # `--var "$TOKEN"` (the name forgotten) or `--var "=$TOKEN"`: the error says what is wrong
    # without printing the value to a CI log.
    write("p.yaml", "steps: []\n")
    for bad in (RESULT_TOKEN, f"={RESULT_TOKEN}", f" ={RESULT_TOKEN}"):
        r = run("run", "p.yaml", "--var", bad)
        assert r.code == 2, str(r)
        assert "--var expects KEY=VALUE" in r.err
        assert RESULT_TOKEN not in r.out + r.err, str(r)


def test_a_secret_used_as_a_key_of_a_result_is_masked(run, write, tmp_path):
    # A tool's result may be keyed by a value (a JSON answer keyed by token, a python step
    # building a mapping): keys are shown and stored like values.
    write("keyed.py", "def by_token(token):\n    return {token: 'granted', 'other': token}\n")
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: keyed
            tool: python
            args: {function: "keyed:by_token", kwargs: {token: "${token}"}}
            result_variable: grants
          - id: use
            tool: shell
            args: {cmd: "test '${grants[token]}' = granted && echo received-real-value"}
        """,
    )
    r = run("run", "p.yaml", "--var", f"token={RESULT_TOKEN}", *ALL_REPORTS)
    assert r.code == 0, str(r)
    assert "received-real-value" in r.err
    assert {s["id"]: s["result"] for s in r.json["steps"]}["keyed"] == {
        "***": "granted",
        "other": "***",
    }
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, r)


def test_the_log_of_a_cut_output_masks_the_secrets(run, write, tmp_path):
    # Past PLANRUN_MAX_OUTPUT the whole output goes to .planrun/logs/: a file planrun writes,
    # so a secret in it is masked too, also where it straddles two reads of the pipe.
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: big
            tool: shell
            args:
              cmd: |
                i=0
                while [ $i -lt 3000 ]; do
                  printf 'line %05d %s|' $i '${token}'
                  i=$((i+1))
                done
        """,
    )
    r = run("run", "p.yaml", "--var", f"token={RESULT_TOKEN}", env={"PLANRUN_MAX_OUTPUT": "1K"})
    assert r.code == 0, str(r)
    log = (tmp_path / ".planrun/logs/p/big.stdout.log").read_text()
    assert RESULT_TOKEN not in log
    assert log.count("|") == 3000 and log.count("***|") == 3000
    assert log.startswith("line 00000 ***|") and log.endswith("line 02999 ***|")
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, r)


def test_the_log_redactor_masks_a_secret_however_the_stream_is_split():
    from planrun.tools.redact import Redactor

    text = b"a-sekrit-b sekrit-long-one|sek sekri sekrit"
    want = b"a-***-b ***|sek sekri ***"
    for size in range(1, len(text) + 1):
        redactor = Redactor(["sekrit", "sekrit-long-one", ""])
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        out = b"".join(redactor.feed(c) for c in chunks) + redactor.close()
        assert out == want, size
    assert Redactor([]).feed(b"as is") == b"as is"


def test_a_secret_that_is_both_a_variable_and_a_dotenv_value_is_masked_as_both(
    run, write, tmp_path
):
    # `--var API_KEY=...` does not change the environment steps get from the dotenv file:
    # both values reach steps, both are the secret.
    write(".env", "API_KEY=DotenvToken-h4k8\n")
    write(
        "p.yaml",
        """
        dotenv: [.env]
        secrets: [API_KEY]
        variables: {API_KEY: none}
        steps:
          - id: both
            tool: shell
            args: {cmd: "echo \\"$API_KEY\\" '${API_KEY}'"}
        """,
    )
    r = run("run", "p.yaml", "--var", f"API_KEY={RESULT_TOKEN}", *ALL_REPORTS)
    assert r.code == 0, str(r)
    assert "*** ***" in r.err
    text = shown_and_stored(run, tmp_path, r)
    assert RESULT_TOKEN not in text and "DotenvToken-h4k8" not in text


def test_the_event_bus_masks_what_a_tree_s_chain_holds_once_it_holds_secrets() -> None:
    """A run whose tree has no secrets yet passes its events on as they are; a secret a run of
    the tree adds later (a sub-plan's) is masked in every event from then on."""
    from planrun.masking import Masker
    from planrun.run.events import EventBus, StepOutput
    from planrun.run.runtree import MaskChain

    chain = MaskChain()
    seen: list[StepOutput] = []
    bus = EventBus(mask=chain)
    bus.subscribe(seen.append)
    first = StepOutput("p", "a", line="token s3cr3t-value", ts=1.0)
    bus.emit(first)
    assert seen[-1] is first  # nothing to mask: passed on as it is
    chain.add(Masker(["TOKEN"], {"TOKEN": "s3cr3t-value"}))
    bus.emit(StepOutput("p", "a", line="token s3cr3t-value", ts=1.0))
    assert "s3cr3t-value" not in seen[-1].line and seen[-1].line.startswith("token ")

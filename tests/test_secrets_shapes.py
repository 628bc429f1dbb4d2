"""Every secret is masked in every shape, everywhere it is shown or stored, and steps still get it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback


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
    from planrun.scheduler import fingerprint

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
    from planrun.plan import Step
    from planrun.scope import fingerprint, step_args

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

"""`planrun mcp`: arguments are taken exactly as the input schemas say, and sub-plan gates hold
there as on the command line (a real server over stdio, driven by `mcp.Client`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.test_mcp_server import (  # noqa: F401 (autouse fixture)
    OPENING,
    no_leftover_processes,
    session,
)

if TYPE_CHECKING:  # the SDK is imported by the session, not to collect the quick layer
    from mcp import Client

pytestmark = pytest.mark.slow  # a real `planrun mcp` server per test

GATED = """\
name: gated
steps:
  - {id: deploy, tool: shell, args: {cmd: "touch RAN"}, approval: true}
"""


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def test_approve_must_be_a_boolean(tmp_path: Path) -> None:
    (tmp_path / "gated.yaml").write_text(GATED)

    async def body(c: Client) -> Any:
        return [
            await c.call_tool("plan_run", {"plan": "gated.yaml", "approve": value})
            for value in ("yes", 1, "true", [True], {"ok": True})
        ]

    for result in session(tmp_path, body):
        assert result.is_error, result
        assert "approve" in _text(result)
    assert not (tmp_path / "RAN").exists()
    assert not (tmp_path / ".planrun").exists()  # refused before anything started


def test_unknown_and_mistyped_arguments_are_refused(tmp_path: Path) -> None:
    (tmp_path / "gated.yaml").write_text(GATED)

    async def body(c: Client) -> Any:
        return (
            await c.call_tool("plan_run", {"plan": "gated.yaml", "yes": True}),
            await c.call_tool("plan_run", {"plan": "gated.yaml", "variables": '{"x": 1}'}),
            await c.call_tool("plan_validate", {"plan": 7}),
            await c.call_tool("plan_list", {"dir": "plans", "recursive": True}),
            await c.call_tool("plan_schema", {"anything": 1}),
            await c.call_tool("plan_run", {}),
            await c.call_tool("plan_run", {"plan": "gated.yaml", "approve": False}),
            (await c.list_tools()).tools,
        )

    *refused, blocked, tools = session(tmp_path, body)
    unknown, as_text, number, extra, schema_extra, missing = refused
    for result in refused:
        assert result.is_error, result
    assert "unknown argument 'yes'" in _text(unknown)
    assert "variables" in _text(as_text)
    assert "plan" in _text(number)
    assert "unknown argument 'recursive'" in _text(extra)
    assert "unknown argument 'anything'" in _text(schema_extra)
    assert "missing argument 'plan'" in _text(missing)
    assert not (tmp_path / "RAN").exists()
    assert not blocked.is_error and blocked.structured_content["status"] == "blocked"
    for tool in tools:
        assert tool.input_schema.get("additionalProperties") is False, tool.name


def test_sub_plan_gates_hold_in_plan_run(tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text(GATED)
    (tmp_path / "parent.yaml").write_text(
        "steps:\n  - {id: sub, tool: plan, args: {path: child.yaml}}\n"
    )
    (tmp_path / "denying.yaml").write_text(
        "name: denying\npolicy: {deny: [shell]}\n"
        "steps:\n  - {id: sub, tool: plan, args: {path: child.yaml}}\n"
    )

    async def body(c: Client) -> Any:
        blocked = await c.call_tool("plan_run", {"plan": "parent.yaml"})
        ran_after_block = (tmp_path / "RAN").exists()
        denied = await c.call_tool("plan_run", {"plan": "denying.yaml", "approve": True})
        ran_after_deny = (tmp_path / "RAN").exists()
        approved = await c.call_tool("plan_run", {"plan": "parent.yaml", "approve": True})
        return blocked, ran_after_block, denied, ran_after_deny, approved

    blocked, ran_after_block, denied, ran_after_deny, approved = session(tmp_path, body)
    doc = blocked.structured_content
    assert (doc["status"], doc["reason"]) == ("blocked", "approval_required"), doc
    assert "sub/deploy" in doc["error"]
    assert not ran_after_block
    assert denied.structured_content["status"] == "failed", denied.content
    assert "denied by policy" in denied.structured_content["steps"][0]["error"]
    assert not ran_after_deny
    assert approved.structured_content["status"] == "succeeded", approved.content
    ids = [s["id"] for s in approved.structured_content["steps"]]
    assert ids == ["sub", "sub/deploy"]
    assert (tmp_path / "RAN").exists()


def test_variables_json_cannot_hold_are_refused(tmp_path: Path) -> None:
    """A client may send NaN or Infinity (Python's json writes them; the SDK's client writes
    null instead): a `variables` value holding one is refused at the argument, as `--var x=.nan`
    is, so no answer carries a bare NaN in its text, its structured content or the state."""
    plan = "name: nan\nsteps:\n  - {id: a, tool: echo, args: {value: '${x}'}}\n"
    calls = [
        (tool, variables)
        for tool in ("plan_run", "plan_dry_run", "plan_validate")
        for variables in ({"x": float("nan")}, {"x": {"deep": [1, float("-inf")]}})
    ]
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 10 + n,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"plan": plan, "variables": variables}},
        }
        for n, (tool, variables) in enumerate(calls)
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "planrun", "mcp"],
        cwd=tmp_path,
        input="".join(json.dumps(m) + "\n" for m in [*OPENING, *requests]),  # NaN, -Infinity
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answers = [m for m in map(json.loads, proc.stdout.splitlines()) if m.get("id", 0) >= 10]
    assert len(answers) == len(calls), proc.stdout[-2000:]
    for answer in answers:
        result = answer["result"]
        text = result["content"][0]["text"]
        assert result["isError"], answer
        assert "argument 'variables' holds" in text and "not a JSON number" in text, text
    assert not (tmp_path / ".planrun").exists()  # refused before anything started

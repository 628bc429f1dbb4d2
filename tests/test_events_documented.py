"""Every event the code emits is in the documentation of `--events` and of planrun.run.events."""

from __future__ import annotations

import ast
import functools
import re

import pytest

import planrun.run.events
from tests.conftest import ROOT
from tests.testkit import parsed_source

EVENT_NAME = re.compile(r"^(run|step|plan)\.[a-z_]+$")
CONSOLE_ONLY = {"step.output"}  # the reporter of --events skips it (planrun/reporters/jsonl.py)
# One worker walks every module once for all of them (tests/test_structure.py too).
pytestmark = pytest.mark.xdist_group("planrun-source")


@functools.cache
def event_kinds_in_the_code() -> frozenset[str]:
    """Every string in planrun's source that is an event name: those it emits and handles."""
    kinds = set()
    for path in (ROOT / "planrun").rglob("*.py"):
        for node in ast.walk(parsed_source(path)):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and EVENT_NAME.match(value):
                kinds.add(value)
    return frozenset(kinds)


def test_the_code_has_the_events_we_know_of():
    kinds = event_kinds_in_the_code()
    assert {"run.started", "step.started", "step.interrupted", "step.resumed"} <= kinds


def test_the_reference_lists_every_event_the_events_file_gets():
    text = (ROOT / "docs" / "reference.md").read_text()
    bullet = text[text.index("- `--events FILE` appends") :]
    bullet = bullet[: bullet.index("\n- ")]
    listed = set(re.findall(r"`((?:run|step|plan)\.[a-z_]+)`", bullet))
    kinds = event_kinds_in_the_code()
    assert sorted(kinds - listed) == [], "events missing from docs/reference.md"
    assert sorted(listed - kinds) == [], "docs/reference.md lists events the code has not"
    for kind in CONSOLE_ONLY:  # named, and said not to reach the file
        assert f"`{kind}`" in bullet and "console only" in bullet


def test_the_module_documents_every_event():
    doc = planrun.run.events.__doc__ or ""
    described = set(re.findall(r"^- `((?:run|step|plan)\.[a-z_]+)`", doc, re.MULTILINE))
    assert described == event_kinds_in_the_code()

"""The JSON of `--events` lists each event's keys in the documented order, whatever shape the
event has: a foreach step's own events, a kept instance's, a step's with and without a cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planrun.run.events import ABSENT, StepResumed, StepSucceeded, event_json
from tests.testkit import Event

PLAN = """
name: keys
variables: {items: [1, 2]}
steps:
  - id: each
    tool: shell
    foreach: ${items}
    args: {cmd: "echo ${item}"}
  - id: after
    tool: shell
    depends_on: [each]
    args: {cmd: "echo done"}
"""


def events_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def keys(docs: list[dict[str, Any]], event: str, step: str) -> list[str]:
    (doc,) = [d for d in docs if d["event"] == event and d.get("step") == step]
    return list(doc)[4:]  # past ts, event, plan, step


def test_a_foreach_step_and_its_kept_instances_list_their_keys_in_order(write, run, tmp_path):
    write("plan.yaml", PLAN)
    assert run("run", "plan.yaml", "--events", "first.jsonl").code == 0
    docs = events_of(tmp_path / "first.jsonl")
    assert keys(docs, "step.started", "each") == [
        *("status", "tool", "title", "instances", "attempt", "fingerprint", "reason"),
    ]
    assert keys(docs, "step.succeeded", "each") == [
        *("status", "attempts", "duration_s", "result", "result_variable", "instances"),
        *("fingerprint", "title"),
    ]
    assert keys(docs, "step.succeeded", "after") == [
        *("status", "attempts", "duration_s", "result", "fingerprint", "output"),
        *("result_variable", "title"),
    ]
    # the next run keeps everything: a kept instance's step.resumed starts with its title
    assert run("run", "plan.yaml", "--resume", "--events", "again.jsonl").code == 0
    docs = events_of(tmp_path / "again.jsonl")
    assert keys(docs, "step.resumed", "each[0]") == [
        *("title", "status", "attempts", "duration_s", "result", "error", "reason"),
        *("fingerprint", "result_variable", "result_masked"),
    ]
    assert keys(docs, "step.resumed", "after")[-2:] == ["key", "title"]


def test_a_key_is_left_out_when_absent_and_written_when_null() -> None:
    without = StepSucceeded("p", "s", title="S")
    assert "key" not in event_json(without) and "result_masked" not in event_json(without)
    assert event_json(without._replace(key=None))["key"] is None
    assert without.key is ABSENT and not ABSENT
    resumed = Event("step.resumed", "p", "s", {"key": "k1", "error": None}, ts=0)
    assert isinstance(resumed, StepResumed) and event_json(resumed)["key"] == "k1"
    assert event_json(resumed)["ts"] == "1970-01-01T00:00:00.000Z"


def test_an_absent_key_stays_absent_through_a_copy_or_pickle() -> None:
    # The marker is compared by identity (`is ABSENT`): a copied or unpickled event must still
    # leave the key out of its JSON.
    import copy
    import pickle

    event = StepSucceeded(plan="p", step="a")
    assert event.key is ABSENT
    for again in (copy.deepcopy(event), copy.copy(event), pickle.loads(pickle.dumps(event))):
        assert again.key is ABSENT
        assert event_json(again) == event_json(event)

"""A step settled without running (skipped by `when`, taken from the cache) lets its dependents
start at once, not when some unrelated running step happens to finish."""

from __future__ import annotations

import pytest

from tests.testkit import read_jsonl

# `waiter` runs until `after` has run; if `after` waited for `waiter` to finish, the run would
# only end by the timeout.
PLAN = """
steps:
  - id: waiter
    tool: shell
    timeout: 20s
    args: {cmd: "while [ ! -e after-ran ]; do sleep 0.02; done"}
  - id: settled
    tool: shell
    %s
    args: {cmd: "echo settled"}
  - id: after
    tool: shell
    depends_on: [settled]
    args: {cmd: "touch after-ran"}
"""


@pytest.mark.parametrize("how", ["when: false", "cache: true"])
def test_dependents_of_a_settled_step_start_at_once(run, write, tmp_path, how):
    write("p.yaml", PLAN % how)
    if how == "cache: true":  # fill the cache first: `settled` is a hit next time
        assert run("run", "p.yaml", "-j", "4").code == 0
        (tmp_path / "after-ran").unlink()
    r = run("run", "p.yaml", "-j", "4", "--output", "json", timeout=60)
    assert r.code == 0, r
    statuses = {s["id"]: s["status"] for s in r.json["steps"]}
    assert statuses["settled"] == ("skipped" if how == "when: false" else "cached")
    assert statuses["waiter"] == "succeeded"  # not ended by its timeout: `after` ran meanwhile


def test_steps_a_skip_makes_ready_start_in_file_order_with_the_others(run, write, tmp_path):
    # `off` is skipped at once; `after_off` is then ready together with `other` and `last`:
    # ties are broken by file order, so under -j 1 it starts first.
    write(
        "p.yaml",
        """
        steps:
          - {id: off, tool: echo, args: {value: 1}, when: "false"}
          - {id: after_off, tool: echo, args: {value: 1}, depends_on: [off]}
          - {id: other, tool: echo, args: {value: 1}}
          - {id: last, tool: echo, args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "-j", "1", "--events", "ev.jsonl")
    assert r.code == 0, r
    started = [e["step"] for e in read_jsonl(tmp_path / "ev.jsonl") if e["event"] == "step.started"]
    assert started == ["after_off", "other", "last"]

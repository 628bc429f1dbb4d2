"""Retries: a failed attempt (a timeout too) is tried again after a wait that really passes and doubles."""

from __future__ import annotations

from tests.testkit import read_jsonl

# ---- retries -------------------------------------------------------------------------------------


def test_retry_waits_are_really_waited_and_double(run, write, tmp_path):
    # Each attempt stamps the clock: the gaps between attempts are at least 0.15 s, then 0.3 s
    # (a constant delay would give 0.15 s twice).
    write(
        "p.yaml",
        """
        steps:
          - id: flaky
            tool: shell
            retries: 2
            retry_delay: 0.15s
            args: {cmd: "date +%s.%N >> stamps; exit 1"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1 and r.json["steps"][0]["attempts"] == 3, r
    t = [float(x) for x in (tmp_path / "stamps").read_text().split()]
    assert len(t) == 3
    assert t[1] - t[0] >= 0.15 and t[2] - t[1] >= 0.3, t


def test_a_timeout_is_a_failure_retried_like_any_other(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: slow
            tool: shell
            timeout: 1s
            retries: 1
            retry_delay: 0s
            args: {cmd: "echo x >> tries; test $(wc -l < tries) -ge 2 || sleep 600"}
        """,
    )
    # 1 s, not 0.3 s: each attempt must start its shell and count the tries within it (the
    # second must end in it), which a loaded machine can take a good part of 0.3 s to do.
    r = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 0, r
    assert r.json["steps"][0]["attempts"] == 2
    retrying = [e for e in read_jsonl(tmp_path / "ev.jsonl") if e["event"] == "step.retrying"]
    assert len(retrying) == 1 and "timed out" in retrying[0]["error"]

"""Memory stays bounded whatever a step prints: output past the limit goes to a log file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from planrun.tools.cmdoutput import CappedOutput, LineSplitter, log_path, output_limit
from tests.conftest import assert_no_traceback, spawn_planrun
from tests.test_cache_run import statuses
from tests.testkit import write_indented_plan


def test_small_output_is_kept_whole(tmp_path: Path) -> None:
    sink = CappedOutput(100, str(tmp_path / "x.log"))
    for _ in range(10):
        sink.write(b"0123456789")
    assert sink.finish() == b"0123456789" * 10
    assert not (tmp_path / "x.log").exists()


def test_past_the_limit_head_tail_marker_and_the_whole_in_a_log(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "x.log"
    sink = CappedOutput(100, str(log))
    data = bytes(range(256)) * 40
    for start in range(0, len(data), 37):
        sink.write(data[start : start + 37])
    kept = sink.finish()
    assert kept.startswith(data[:50]) and kept.endswith(data[-50:])
    marker = kept[50:-50].decode()
    assert f"output cut: {len(data)} bytes" in marker and str(log) in marker
    assert log.read_bytes() == data  # the whole output, byte for byte
    assert log.stat().st_mode & 0o777 == 0o600


def test_a_log_that_cannot_be_written_is_said_in_the_marker(tmp_path: Path) -> None:
    (tmp_path / "logs").write_text("a file where the directory should be")
    sink = CappedOutput(10, str(tmp_path / "logs" / "x.log"))
    sink.write(b"x" * 100)
    assert b"could not be written" in sink.finish()


def test_lines_are_split_without_holding_a_long_line() -> None:
    split = LineSplitter(8)
    assert split.feed(b"ab\ncd") == [b"ab"]
    assert split.feed(b"efghijklmnop") == [b"cdefghij"]
    assert split.feed(b"\nq") == [b"klmnop"]
    assert split.flush() == [b"q"]


def test_limit_from_the_environment() -> None:
    assert output_limit({}) == 1 << 20
    assert output_limit({"PLANRUN_MAX_OUTPUT": "512K"}) == 512 << 10
    assert output_limit({"PLANRUN_MAX_OUTPUT": "8M"}) == 8 << 20
    assert output_limit({"PLANRUN_MAX_OUTPUT": "4096"}) == 4096
    assert output_limit({"PLANRUN_MAX_OUTPUT": "lots"}) == 1 << 20


def test_log_paths_stay_under_planrun_logs() -> None:
    assert log_path("/w", "p", "a/b", "stdout") == "/w/.planrun/logs/p/a/b.stdout.log"
    assert log_path("/w", "..", "..", "stderr") == "/w/.planrun/logs/_../_...stderr.log"


def test_a_cut_output_in_the_result_state_and_json(run, write, tmp_path: Path) -> None:
    write("p.yaml", "steps:\n  - {id: a, tool: shell, args: {cmd: 'seq 1 100000'}}\n")
    result = run("run", "p.yaml", "--output", "json", env={"PLANRUN_MAX_OUTPUT": "1K"})
    assert result.code == 0, result
    stdout = result.json["steps"][0]["result"]["stdout"]
    assert stdout.startswith("1\n2\n") and stdout.endswith("99999\n100000\n")
    assert "[planrun: output cut: 588895 bytes" in stdout and len(stdout) < 1500
    whole = tmp_path / ".planrun/logs/p/a.stdout.log"
    assert whole.read_text() == "".join(f"{i}\n" for i in range(1, 100001))
    status = run("status", "p.yaml", "--output", "json")
    assert status.json["steps"][0]["result"]["stdout"] == stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra", [[], ["--output", "json", "--events", "e.jsonl", "--junit", "j.xml"], ["--stream"]]
)
def test_200_mb_of_output_in_under_150_mb_of_memory(
    write, tmp_path: Path, extra: list[str]
) -> None:
    import psutil

    # --stream prints every line as it comes: 4 KB lines keep that to 50,000 lines (100 million
    # two-byte lines would time the console, not the memory bound)
    line = "yes $(printf %4095s | tr ' ' y)" if "--stream" in extra else "yes"
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: lines, tool: shell, args: {{cmd: "{line} | head -c 200000000"}}}}
          - {{id: one_line, tool: shell, args: {{cmd: "yes | tr -d '\\\\n' | head -c 200000000"}}}}
        """,
    )
    proc = spawn_planrun(
        "run", "p.yaml", *extra, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    watched = psutil.Process(proc.pid)
    peak = 0
    out = []
    import threading

    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.01)  # a sampling period, not a synchronisation
    reader.join()
    assert proc.returncode == 0
    assert peak < 150 << 20, f"peak RSS {peak >> 20} MB"
    for step in ("lines", "one_line"):
        assert (tmp_path / f".planrun/logs/p/{step}.stdout.log").stat().st_size == 200_000_000
    if "--output" in extra:
        doc = json.loads(out[0])
        assert all(len(s["result"]["stdout"]) < 1_100_000 for s in doc["steps"])
    assert sys.executable  # the test ran the real command


# ---- bounded memory ------------------------------------------------------------------------


def _capped_run(cwd: Path, *args: str, cap: int) -> Any:
    import resource
    import subprocess
    import sys

    from tests.conftest import Result

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    proc = subprocess.run(
        [sys.executable, "-m", "planrun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        preexec_fn=limit,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.slow  # writes a few hundred MB
@pytest.mark.e2e
def test_an_output_larger_than_memory_allows_is_stored_and_restored(tmp_path: Path) -> None:
    """Outputs are streamed into the cache and back: a 320 MB artifact under a 256 MiB address
    space cap is stored, then restored byte-identical (it was read whole: MemoryError)."""
    import hashlib

    size = 320_000_000
    write_indented_plan(
        tmp_path,
        f"""
    steps:
      - id: big
        tool: shell
        args: {{cmd: "mkdir -p o && head -c {size} /dev/zero | tr '\\\\0' x > o/big && echo end >> o/big"}}
        outputs: ["o/big"]
    """,
    )
    cap = 256 << 20
    r = _capped_run(tmp_path, "run", "plan.yaml", "--output", "json", cap=cap)
    assert_no_traceback(r)
    assert r.code == 0 and statuses(r) == {"big": "succeeded"}, r
    assert "not stored" not in r.err, r

    def digest(path: Path) -> str:
        h = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()

    before = digest(tmp_path / "o/big")
    (tmp_path / "o/big").unlink()
    r = _capped_run(tmp_path, "run", "plan.yaml", "--output", "json", cap=cap)
    assert r.code == 0 and statuses(r) == {"big": "cached"}, r
    assert digest(tmp_path / "o/big") == before
    with (tmp_path / "o/big").open("r+b") as f:  # same size, other bytes: restored again
        f.write(b"y")
    r = _capped_run(tmp_path, "run", "plan.yaml", "--output", "json", cap=cap)
    assert r.code == 0 and statuses(r) == {"big": "cached"}, r
    assert digest(tmp_path / "o/big") == before

"""The peak-memory measure the bounded-memory tests rely on (tests.testkit.peak_run) reports
the planrun process's own peak, whatever the test process holds: on Linux a child started by
fork or vfork inherits its parent's high-water mark at exec, so a test worker that has grown
(as one does late in a full suite) would otherwise fail every bound it checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.testkit import peak_run

HELD = 400 << 20


@pytest.mark.slow  # beside the bounded-memory tests it guards, all slow
def test_the_peak_is_the_planrun_process_s_not_the_test_process_s(tmp_path: Path) -> None:
    held = bytearray(HELD)  # what a test worker may hold by the end of a full suite
    held[::4096] = b"x" * len(held[::4096])  # touched: resident, not only reserved
    r, peak = peak_run(tmp_path, "--version")
    assert r.code == 0, r
    assert peak < 150 << 20, f"peak {peak >> 20} MiB, the test process holds {HELD >> 20} MiB"
    del held

"""The live view at a real terminal, on a busy machine: when the run ends, the screen holds the
run's log lines and nothing of the live view (no frame left behind, no line glued to one)."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.conftest import hang_guard

COLS, ROWS = 160, 45
RUNS = 50  # the garbling showed in about 3 runs of 20 under load; the issue asked for 50

PLAN = """
name: greet
steps:
""" + "".join(
    f"""  - id: s{n}
    title: Step number {n}
    tool: shell
    args: {{cmd: "echo hello {n}"}}
"""
    for n in range(7)
)

LOG_LINE = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3} |  │ )")
STAMP = re.compile(r"\d\d:\d\d:\d\d\.\d{3} ")
CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


def screen_of(output: str, cols: int = COLS, rows: int = ROWS) -> list[str]:
    """What a terminal shows after `output`: enough of VT100 for what the console writes
    (text, CR, LF, cursor up, erase line, wrapping at the last column, scrolling)."""
    lines: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(output):
        ch = output[i]
        m = CSI.match(output, i) if ch == "\x1b" else None
        if m:
            args, op = m.group(1), m.group(2)
            n = int(args) if args.isdigit() else 1
            if op == "A":
                row = max(0, row - n)
            elif op == "K":  # erase line (2K: all of it; K: to its end)
                lines[row] = [] if args == "2" else lines[row][:col]
            elif op == "G":
                col = max(0, n - 1)
            i = m.end()
            continue
        i += 1
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row += 1
            if row == len(lines):
                lines.append([])
        elif ch >= " ":
            if col >= cols:  # autowrap
                row, col = row + 1, 0
                if row == len(lines):
                    lines.append([])
            line = lines[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
    return ["".join(line).rstrip() for line in lines][-rows:]


def run_at_pty(cwd: Path) -> str:
    import pty

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS)}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", "run", "plan.yaml", "--force"],
        cwd=cwd,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        start_new_session=True,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the process and its children closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=60)
    os.close(leader)
    assert proc.returncode == 0, seen.decode(errors="replace")
    return seen.decode(errors="replace")


def test_screen_emulator_sees_a_glued_frame() -> None:
    frame = "\x1b[?25l━━━━  0/7  \x1b[2m0.06s\x1b[0m"
    assert screen_of("a\r\nb\r\n\x1b[1A\x1b[2Kc\r\n") == ["a", "c", ""]
    glued = screen_of(frame + "12:36:02.766 ▶ run greet started: 7 steps\r\n")
    assert not all(LOG_LINE.match(line) for line in glued if line)


@pytest.mark.slow  # RUNS real runs at a terminal, with the CPUs kept busy
@pytest.mark.e2e
def test_no_frame_is_left_behind_on_a_busy_machine(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(PLAN)
    busy = [
        subprocess.Popen([sys.executable, "-c", "while 1: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        with hang_guard(600):
            for n in range(RUNS):
                output = run_at_pty(tmp_path)
                screen = [line for line in screen_of(output) if line]
                bad = [
                    line
                    for line in screen
                    if not LOG_LINE.match(line) or len(STAMP.findall(line)) > 1
                ]
                assert not bad, f"run {n}: left on the screen: {bad}\n{output!r}"
                assert screen[-1].split(" ", 2)[-1].startswith("run succeeded"), screen
    finally:
        for p in busy:
            p.kill()
            p.wait()

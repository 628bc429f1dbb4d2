"""Shared helpers for the benchmark scripts: finding tools, timing commands, tables, profiles."""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"  # git-ignored


def find_tool(name: str) -> str | None:
    """Absolute path of an executable, skipping pyenv shims.

    A pyenv shim is a bash script that re-resolves the program on every call
    (tens of milliseconds), which would be charged to whichever tool sits
    behind it; the real binary next to the running interpreter is preferred.
    """
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found and "/shims/" in found:
        try:
            real = subprocess.run(
                ["pyenv", "which", name], capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            real = ""
        if real:
            return real
    return found


def work_dir(name: str) -> Path:
    """A fresh directory under bench/out/ for one scenario's generated files."""
    OUT_DIR.mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=OUT_DIR))


def tail(text: str | bytes | None, lines: int = 15) -> str:
    """The last few lines of a command's output, for failure reports."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return "\n".join(text.rstrip().splitlines()[-lines:])


@dataclass
class Timing:
    """Wall times of repeated runs of one command, or why it could not be measured."""

    label: str
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # user+sys of the child and its children
    error: str | None = None
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.skipped is None and bool(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu) if self.cpu else float("nan")


def time_command(
    label: str,
    cmd: Sequence[str] | None,
    *,
    cwd: Path,
    reps: int = 3,
    setup: Callable[[], None] | None = None,
    timeout: float = 120.0,
    stop_after: float = 20.0,
    env: dict[str, str] | None = None,
) -> Timing:
    """Run `cmd` `reps` times (wall clock, output discarded) and collect the times.

    `cmd` None means the tool is not installed. `setup` runs before every
    repetition, outside the timed region. A run slower than `stop_after`
    seconds is not repeated, to keep a whole benchmark run short.
    """
    timing = Timing(label)
    if cmd is None:
        timing.skipped = "skipped (not installed)"
        return timing
    for _ in range(reps):
        if setup is not None:
            setup()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                list(cmd),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=timeout,
                env=env,
            )
        except subprocess.TimeoutExpired as exc:
            timing.error = f"timed out after {timeout:.0f}s\n{tail(exc.stderr)}"
            return timing
        except OSError as exc:
            timing.error = f"could not start: {exc}"
            return timing
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            timing.error = f"exit code {proc.returncode}\n{tail(proc.stderr)}"
            return timing
        timing.times.append(elapsed)
        timing.cpu.append(cpu)
        if elapsed > stop_after:
            break
    return timing


def run_capture(
    cmd: Sequence[str], *, cwd: Path, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run a command once and keep its output (for checks, not timing)."""
    return subprocess.run(
        list(cmd),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def fmt_s(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain, aligned text table."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def report_failures(timings: Sequence[Timing]) -> None:
    """Print the stderr tail of every command that failed."""
    for t in timings:
        if t.error:
            print(f"\n[{t.label}] failed: {t.error}")


def planrun_cmd() -> list[str] | None:
    """How to start planrun: its console script, else `python -m planrun`."""
    exe = find_tool("planrun")
    if exe:
        return [exe]
    return [sys.executable, "-m", "planrun"]


# planrun ends with os._exit (not waiting for worker threads), which would skip writing the
# profile: here os._exit raises SystemExit instead, and the profile is dumped on the way out.
_PROFILE_BOOT = """
import cProfile, os, sys
out = sys.argv[1]
sys.argv = ["planrun", *sys.argv[2:]]
def _exit(code):
    raise SystemExit(code)
os._exit = _exit
from planrun.cli.commands import main
prof = cProfile.Profile()
try:
    prof.runcall(main, prog_name="planrun")
except SystemExit:
    pass
finally:
    prof.dump_stats(out)
"""


def profile_planrun(args: Sequence[str], *, cwd: Path, top: int = 20) -> str:
    """Run planrun under cProfile and return the top functions by cumulative time."""
    prof = cwd / "planrun.prof"
    proc = subprocess.run(
        [sys.executable, "-c", _PROFILE_BOOT, str(prof), *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    if not prof.exists():
        return f"profile failed (exit {proc.returncode}):\n{tail(proc.stderr)}"
    import io
    import pstats

    buf = io.StringIO()
    stats = pstats.Stats(str(prof), stream=buf)
    buf.write("--- planrun functions by cumulative time ---\n")
    stats.sort_stats("cumulative").print_stats(r"/planrun/", top)
    buf.write("\n--- all functions by own time ---\n")
    stats.sort_stats("tottime").print_stats(top)
    text = buf.getvalue()
    # The header lines of pstats are noise in a report.
    noise = ("Ordered", "List reduced", "function calls")
    keep = [
        ln
        for ln in text.splitlines()
        if ln.strip()
        and not ln.lstrip().startswith(noise)
        and "function calls" not in ln
        and not ln.strip().endswith(".prof")
    ]
    return "\n".join(keep)


@dataclass
class Figure:
    """One headline number for the run_all summary."""

    name: str
    value: str
    target: str = ""
    ok: bool | None = None  # None: no target, informational

    def verdict(self) -> str:
        if self.ok is None:
            return ""
        return "OK" if self.ok else "MISSED"


def machine_note() -> str:
    """CPUs and load average: wall times on a busy machine are not comparable."""
    try:
        load = os.getloadavg()
        return f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    except OSError:
        return f"{os.cpu_count()} CPUs"

"""The live view at a terminal: a progress bar, the counts and the steps running now (rich)."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: rich only when the live view is drawn.
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from planrun.reporters.termsafe import terminal_safe
from planrun.text import format_duration


class LiveData(NamedTuple):
    """What one frame shows: steps done of all, when the run started, the running steps
    (id, (started, attempt)) with their titles, and every step's status."""

    done: int
    tools: dict[str, str]
    run_ts: float | None
    running: list[tuple[str, tuple[float, int]]]
    titles: dict[str, str]
    statuses: dict[str, str]


def render_live(data: LiveData, height: int) -> Any:
    """One frame of the live view, `height` lines at most."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    now = time.time()
    total = max(len(data.tools), data.done)
    header = Table.grid(padding=(0, 1))
    header.add_row(
        ProgressBar(total=total or 1, completed=data.done, width=30),
        Text(f"{data.done}/{total}", style="bold"),
        counts_text(data.statuses),
        Text(format_duration(now - data.run_ts) if data.run_ts else "", style="dim"),
    )
    running = data.running
    rows = Table.grid(padding=(0, 2))
    shown = running[: max(1, min(20, height - 3))]
    for step_id, (started, attempt) in shown:
        title = terminal_safe(data.titles.get(step_id, step_id))  # may come from data
        rows.add_row(
            Text("  ▶ " + step_id, style="cyan"),
            Text(title[:60] if title.casefold() != step_id.casefold() else ""),
            Text(data.tools.get(step_id, ""), style="dim"),
            Text(f"attempt {attempt}" if attempt > 1 else ""),
            Text(format_duration(now - started)),
        )
    parts: list[Any] = [header, rows] if shown else [header]
    if len(running) > len(shown):
        parts.append(Text(f"  … and {len(running) - len(shown)} more running", style="dim"))
    return Group(*parts)


def counts_text(statuses: dict[str, str]) -> Any:
    """The count of steps in each status, as coloured symbols."""
    from rich.text import Text

    counts = Counter(list(statuses.values()))  # (a copy first: the run's thread changes it)
    text = Text()
    for key, symbol, style in (
        ("succeeded", "✓", "green"),
        ("cached", "✓", "dim green"),
        ("failed", "✗", "red"),
        ("ignored", "!", "yellow"),
        ("interrupted", "■", "magenta"),
        ("skipped", "⊘", "dim"),
        ("running", "▶", "cyan"),
    ):
        if counts.get(key):
            text.append(f"{symbol} {counts[key]}  ", style=style)
    return text


class Raw:
    """Whole lines that rich passes to the terminal untouched (with our ANSI colours)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.segment import Segment

        yield Segment(self.text)


class LiveView:
    """What rich.live.Live re-renders a few times a second: progress bar and running steps."""

    def __init__(self, render: Callable[[int], Any]) -> None:
        self._render = render

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        yield self._render(options.height or console.size.height)


class LiveScreen:
    """rich's Live view, drawn and printed above through one lock.

    rich redraws from a thread of its own while lines are printed above the view from the
    run's thread, and a print takes rich's lock only to compute how far up to erase, not to
    render and write: under load a frame was written between the two, so the next line was
    written after it without erasing it (`… 0.06s12:36:02.766 ▶ run greet started`), and a
    frame could outlive the view's end. Here rich never draws on its own (auto_refresh off):
    a thread of ours redraws, and each redraw, print, start and stop holds `lock`, so frames
    and lines reach the terminal whole and in order. The first frame is drawn by `start`,
    before any line is printed.
    """

    def __init__(self, console: Any, view: Any, *, per_second: float, redirect_stderr: bool):
        from rich.live import Live

        self.lock = threading.RLock()
        self._interval = 1 / per_second
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._live = Live(
            view,
            console=console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,  # stdout may carry `--output json`; never reroute it
            redirect_stderr=redirect_stderr,
        )

    def start(self) -> None:
        with self.lock:
            self._live.start(refresh=True)
        self._thread = threading.Thread(target=self._redraw, name="planrun-live", daemon=True)
        self._thread.start()

    def _redraw(self) -> None:
        while not self._done.wait(self._interval):
            with self.lock:
                if self._done.is_set():
                    return
                self._live.refresh()

    def print(self, renderable: Any) -> None:
        """Print above the view (which moves down)."""
        with self.lock:
            self._live.console.print(renderable, crop=False, soft_wrap=True)

    def stop(self) -> None:
        """Take the view down (the last frame erased); idempotent."""
        self._done.set()
        with self.lock:
            self._live.stop()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

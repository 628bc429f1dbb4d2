"""The run report as one self-contained HTML page: an SVG timeline and a table, from a Jinja2 template."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: jinja2 only when the page is rendered.
import math
import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from planrun.report.model import RunReport, StepRow, base_id, clip
from planrun.reporters.termsafe import terminal_safe
from planrun.text import counted, format_duration

LABEL_W = 300  # the step names left of the chart
CHART_W = 800
RIGHT_PAD = 100  # room for the last bar's duration label
ROW_H = 24
BAR_H = 14
AXIS_H = 30
LABEL_CHARS = 42

# Bars, status text and the run's badge (white text on it): every one reaches WCAG AA's 4.5:1
# on the page's backgrounds and under white text (tests/test_report.py computes the ratios).
COLOURS = {
    "succeeded": "#1a7431",
    "cached": "#1a7431",  # a success taken from the cache: hatched in the timeline
    "failed": "#cf222e",
    "ignored": "#8a5a00",
    "interrupted": "#7a47d6",
    "running": "#0969da",
    "skipped": "#656d76",
    "pending": "#59636e",
}
# Unicode noncharacters (U+FDD0..U+FDEF and the last two code points of every plane): HTML
# parsers flag them as they flag control characters (html5lib: `invalid-codepoint`).
_NONCHARACTER = re.compile(
    "[\ufdd0-\ufdef"
    + "".join(chr(p << 16 | 0xFFFE) + chr(p << 16 | 0xFFFF) for p in range(17))
    + "]"
)
_NICE = (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800)


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Bar:
    """One row of the timeline."""

    index: int
    y: float
    label: str
    row: StepRow
    x: float | None  # None: nothing to draw (not run in this run)
    width: float
    colour: str
    text: str  # beside the bar: duration, "cached", "skipped"
    tooltip: str


def tick_step(span: float, most: int = 10) -> float:
    """A round tick interval giving at most `most` ticks over `span` seconds."""
    for step in _NICE:
        if span / step <= most:
            return step
    return 3600 * math.ceil(span / 3600 / most)


def _tick_label(seconds: float, step: float) -> str:
    if step < 1:
        return f"{seconds:.2f}".rstrip("0").rstrip(".") + "s"
    if seconds < 60:
        return f"{seconds:g}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _tooltip(row: StepRow) -> str:
    lines = [row.id if row.title == row.id else f"{row.id}: {row.title}"]
    state = row.status + (" (cached)" if row.cached else "") + (" (kept)" if row.kept else "")
    lines.append(f"status: {state}")
    if row.tool:
        lines.append(f"tool: {row.tool}")
    if row.attempts:
        lines.append(f"attempts: {row.attempts}")
    if row.start_s is not None and row.end_s is not None:
        lines.append(
            f"from {format_duration(row.start_s)} to {format_duration(row.end_s)}"
            f" ({format_duration(row.end_s - row.start_s)})"
        )
    if row.critical:
        lines.append("on the critical path")
    if row.error:
        lines.append(f"error: {clip(row.error.splitlines()[0], 200)}")
    elif row.reason:
        lines.append(f"reason: {row.reason}")
    return "\n".join(lines)


def layout(report: RunReport) -> tuple[list[Bar], list[Tick]]:
    """Rows and axis ticks of the timeline, in SVG user units."""
    scale = CHART_W / report.span_s
    step = tick_step(report.span_s)
    ticks = [
        Tick(LABEL_W + k * step * scale, _tick_label(k * step, step))
        for k in range(int(report.span_s / step + 1e-9) + 1)
    ]
    sizes: dict[str, int] = {}
    for row in report.steps:
        if row.instance:
            sizes[base_id(row.id)] = sizes.get(base_id(row.id), 0) + 1
    bars = []
    for i, row in enumerate(report.steps):
        y = AXIS_H + i * ROW_H
        label = row.id if row.title == row.id else f"{row.id} · {row.title}"
        x: float | None = None
        width = 0.0
        text = ""
        if row.start_s is not None and row.end_s is not None:
            x = LABEL_W + row.start_s * scale
            width = max(6.0 if row.cached else 2.0, (row.end_s - row.start_s) * scale)
            text = format_duration(row.end_s - row.start_s)
            if row.cached:
                text = "cached" if row.end_s - row.start_s < 0.005 else text + " cached"
            if row.status == "running":
                text += " running"
            if row.group:
                n = sizes.get(row.id, 0)
                text += f" · {counted(n, 'instance')}"
        elif row.kept:
            text = "kept from an earlier run"
        elif row.status in ("skipped", "pending"):
            text = row.status if not row.reason else f"{row.status}: {row.reason}"
        bars.append(
            Bar(
                index=i,
                y=y,
                label=clip(label, LABEL_CHARS - (2 if row.instance else 0)),
                row=row,
                x=x,
                width=width,
                colour=COLOURS.get(row.status, COLOURS["skipped"]),
                text=clip(text, 60),
                tooltip=_tooltip(row),
            )
        )
    return bars, ticks


def page_text(value: Any) -> Any:
    """A value as the page may show it: text from steps (output, errors, titles) holds colour
    codes, cursor moves, bells and other control characters that HTML does not allow. Escape
    sequences are removed (the colours become plain text), CR LF and a lone CR (a progress
    line) end a line, other controls show as `^X` or `\\xNN` (as on the console), and
    noncharacters as `\\uXXXX`: nothing but tab and line feed of C0 and C1 reaches the page.
    """
    if not isinstance(value, str):
        return value
    text = terminal_safe(value.replace("\r\n", "\n").replace("\r", "\n"))
    return _NONCHARACTER.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def render_html(report: RunReport, generated_at: str) -> str:
    """The whole page as text."""
    import jinja2

    template_text = files("planrun.report").joinpath("templates/report.html.j2").read_text("utf-8")
    # `finalize` sees every value the template prints, before escaping: the one place that
    # keeps control characters off the page, whichever way it is written (`run --report`,
    # `report -o FILE`, `report -o -`).
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, finalize=page_text)
    env.filters["duration"] = lambda s: "–" if s is None else format_duration(s)
    bars, ticks = layout(report)
    height = AXIS_H + max(1, len(bars)) * ROW_H + 8
    context: dict[str, Any] = {
        "r": report,
        "bars": bars,
        "ticks": ticks,
        "generated_at": generated_at,
        "colours": COLOURS,
        "label_w": LABEL_W,
        "chart_w": CHART_W,
        "width": LABEL_W + CHART_W + RIGHT_PAD,
        "height": height,
        "row_h": ROW_H,
        "bar_h": BAR_H,
        "axis_h": AXIS_H,
        "critical_count": sum(1 for b in bars if b.row.critical),
    }
    return env.from_string(template_text).render(context)

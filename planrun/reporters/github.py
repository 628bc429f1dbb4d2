"""GitHub Actions workflow commands: `validate --format github`'s diagnostics, and a run's
log on GitHub Actions (`GITHUB_ACTIONS=true`): each step's output in a collapsible group,
a failed step's error as an annotation.

Escaped exactly as GitHub's own toolkit (`@actions/core` `issueCommand`) escapes them:
in the message `%`, CR and LF; in the properties (file, line, col) also `:` and `,`,
which would otherwise end a property or the property list.
"""

from __future__ import annotations

from collections.abc import Mapping

from planrun.errors import Diagnostic

__all__ = [
    "GROUP_END",
    "annotation",
    "error_line",
    "escape_data",
    "escape_property",
    "group_start",
    "on_github_actions",
]

GROUP_END = "::endgroup::"


def on_github_actions(environ: Mapping[str, str]) -> bool:
    """Whether the run is a GitHub Actions job (the runner sets GITHUB_ACTIONS=true)."""
    return environ.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(diag: Diagnostic) -> str:
    """`::error file=…,line=…,col=…::message` (or `::warning`) for one diagnostic."""
    kind = "error" if diag.severity == "error" else "warning"
    message = str(diag.to_json()["message"])
    props = ",".join(
        f"{name}={escape_property(str(value))}"
        for name, value in (("file", diag.file), ("line", diag.line), ("col", diag.col))
    )
    return f"::{kind} {props}::{escape_data(message)}"


def group_start(step_id: str, title: str) -> str:
    """`::group::ID — title` (just the id when the title is the id)."""
    name = (
        step_id if not title or title.casefold() == step_id.casefold() else f"{step_id} — {title}"
    )
    return f"::group::{escape_data(name)}"


def error_line(step_id: str, error: str) -> str:
    """`::error title=ID::ERROR`: an annotation on the run's summary page for a failed step."""
    return f"::error title={escape_property(step_id)}::{escape_data(error)}"

"""`validate --format github`: diagnostics as GitHub Actions workflow commands.

Escaped exactly as GitHub's own toolkit (`@actions/core` `issueCommand`) escapes them:
in the message `%`, CR and LF; in the properties (file, line, col) also `:` and `,`,
which would otherwise end a property or the property list.
"""

from __future__ import annotations

from planrun.errors import Diagnostic

__all__ = ["annotation", "escape_data", "escape_property"]


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

"""Exit codes, diagnostics and the exceptions that carry them to the edge."""

from __future__ import annotations

from enum import IntEnum

from planrun.records import record


class ExitCode(IntEnum):
    """Process exit codes (docs/reference.md, Exit codes); the only place these numbers live."""

    OK = 0
    RUN_FAILED = 1
    USAGE = 2
    INVALID_PLAN = 3
    STATE_ERROR = 4
    BLOCKED = 5
    INTERRUPTED = 130


class ExitNow(SystemExit):
    """The command is over and its process should end with `code` without waiting for worker
    threads (a `python` step or an approval prompt an interrupted run left blocked), so no side
    effect of theirs lands after the run was recorded. planrun.__main__, the process entry, does
    that; any other caller (a test, a library) sees a plain SystemExit and keeps its process."""

    def __init__(self, code: int) -> None:
        super().__init__(int(code))


@record(frozen=True)
class Diagnostic:
    """One problem found in a plan, with its 1-based source position."""

    file: str
    line: int
    col: int
    severity: str  # "error" | "warning"
    message: str
    hint: str | None = None

    def render(self) -> str:
        """`file:line:col: severity: message (hint)`, on one line: plan text quoted in a
        message (a tool name, an id) has its control characters escaped (`\\n`, `\\x1b`)."""
        text = f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return one_line(text)

    def to_json(self) -> dict[str, object]:
        message = self.message + (f" ({self.hint})" if self.hint else "")
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "severity": self.severity,
            "message": message,
        }


def one_line(text: str) -> str:
    """`text` with its control characters escaped (`\\n`, `\\x1b`): what quotes input (a file
    name, plan text, a value from a state file) stays one line and never reaches a terminal
    as an escape sequence."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


QUOTE_WIDTH = 120  # characters of a value an error message quotes


def quoted(text: str, width: int = QUOTE_WIDTH) -> str:
    """`text` as an error message quotes a value it was given: one line (`one_line`), and at
    most about `width` characters, cut with "… (N characters)" saying how long it was. Only
    the start is looked at, so a value of megabytes costs nothing to quote."""
    if len(text) <= width:
        return one_line(text)
    return one_line(text[:width])[:width] + f"… ({len(text)} characters)"


class PlanrunError(Exception):
    """An error with a one-line message and the exit code it maps to."""

    exit_code: ExitCode = ExitCode.RUN_FAILED

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(PlanrunError):
    exit_code = ExitCode.USAGE


class PlanInvalid(PlanrunError):
    """The plan could not be loaded or validated; carries every diagnostic."""

    exit_code = ExitCode.INVALID_PLAN

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        first = diagnostics[0].render() if diagnostics else "invalid plan"
        super().__init__(first)


class StateError(PlanrunError):
    exit_code = ExitCode.STATE_ERROR


def exception_leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) ExceptionGroups, in order; `exc` itself when it is none."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    return [leaf for inner in exc.exceptions for leaf in exception_leaves(inner)]

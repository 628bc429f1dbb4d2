"""The result documents and argument types of `planrun mcp`'s tools, as their schemas publish them.

The documents are those the CLI prints with --output/--format json.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

# ---- result shapes (docs/reference.md, Documents): the documents the CLI prints with --output/--format json --------
# typing_extensions.TypedDict, not typing's: pydantic needs it below Python 3.12 for nested dicts.


class DiagnosticDoc(TypedDict):
    file: str
    line: int
    col: int
    severity: Literal["error", "warning"]
    message: str


class ValidateDoc(TypedDict):
    """`planrun validate --format json`."""

    valid: bool
    diagnostics: list[DiagnosticDoc]


class DryRunStepDoc(TypedDict):
    id: str
    title: Any
    tool: str
    args: Any
    depends_on: list[str]
    when: Any
    approval: bool


class DryRunDoc(TypedDict):
    """`planrun run --dry-run --output json`."""

    plan: str | None
    waves: list[list[str]]
    steps: list[DryRunStepDoc]


class StepDoc(TypedDict):
    id: str
    status: str
    attempts: int
    duration_s: float | None
    result: Any
    error: str | None


class RunDoc(TypedDict):
    """`planrun run --output json` (and `planrun status --output json`)."""

    plan: str | None
    status: str
    reason: str | None
    duration_s: float | None
    error: NotRequired[str | None]
    steps: list[StepDoc]
    variables: dict[str, Any]
    revisions: NotRequired[list[Any]]


class PlanRowDoc(TypedDict):
    path: str
    name: str
    title: Any  # as the file says: a plan that is not valid may give a number or a mapping
    steps: int
    last_status: str | None


# ---- arguments --------------------------------------------------------------------------------

PlanArg = Annotated[
    str,
    Field(
        description=(
            "The plan: its YAML or JSON text, or the path of a plan file "
            "(relative to the server's working directory)."
        )
    ),
]
VariablesArg = Annotated[
    dict[str, Any] | None,
    Field(description="Variables, like --var: they override the plan's `variables`."),
]
ApproveArg = Annotated[
    bool,
    Field(
        description=(
            "Approve the steps that need approval (like --yes). Without it a plan with such "
            "steps comes back with status 'blocked', reason 'approval_required', and runs nothing."
        )
    ),
]

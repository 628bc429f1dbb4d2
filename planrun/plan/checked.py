"""A plan as validation leaves it: the runtime plan (when the schema check passed) and every diagnostic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planrun.errors import Diagnostic

if TYPE_CHECKING:
    from planrun.plan.definition import Plan
    from planrun.plan.loader import Document


class CheckedPlan:
    """A loaded plan (None when the schema check failed) and every diagnostic found."""

    __slots__ = ("plan", "diagnostics", "doc")
    plan: Plan | None
    diagnostics: list[Diagnostic]
    doc: Document

    def __init__(self, plan: Plan | None, diagnostics: list[Diagnostic], doc: Document) -> None:
        self.plan = plan
        self.diagnostics = diagnostics
        self.doc = doc

    @property
    def ok(self) -> bool:
        return self.plan is not None and not any(d.severity == "error" for d in self.diagnostics)

"""A plan as validation leaves it: the runtime plan (when the schema check passed) and every diagnostic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from planrun.errors import Diagnostic

if TYPE_CHECKING:
    from planrun.loader import Document
    from planrun.plan import Plan


@dataclass
class CheckedPlan:
    """A loaded plan (None when the schema check failed) and every diagnostic found."""

    plan: Plan | None
    diagnostics: list[Diagnostic]
    doc: Document

    @property
    def ok(self) -> bool:
        return self.plan is not None and not any(d.severity == "error" for d in self.diagnostics)

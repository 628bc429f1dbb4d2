"""A plan as validation leaves it: the runtime plan (when the schema check passed) and every diagnostic."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from planrun.errors import Diagnostic

if TYPE_CHECKING:
    from planrun.plan.definition import Plan
    from planrun.plan.loader import Document


class CheckedPlan:
    """A loaded plan (None when the schema check failed) and every diagnostic found."""

    __slots__ = ("plan", "diagnostics", "doc", "_digest")

    def __init__(
        self,
        plan: Plan | None,
        diagnostics: list[Diagnostic],
        doc: Document,
        stored_digest: Callable[[], str | None] | None = None,
    ) -> None:
        """`stored_digest`: the plan cache's digest of `plan`, checked when first asked for
        (None from it: worked out after all)."""
        self.plan = plan
        self.diagnostics = diagnostics
        self.doc = doc
        self._digest: str | Callable[[], str | None] | None = stored_digest

    def digest(self) -> str:
        """The plan's digest (planrun.plan.digest), worked out once per checked plan."""
        from planrun.plan.digest import plan_digest

        if not isinstance(self._digest, str):
            found = self._digest() if self._digest is not None else None
            assert self.plan is not None, "a plan that did not check has no digest"
            self._digest = found if found is not None else plan_digest(self.plan)
        return self._digest

    @property
    def ok(self) -> bool:
        return self.plan is not None and not any(d.severity == "error" for d in self.diagnostics)

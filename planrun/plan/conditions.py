"""`when` conditions: each is one expression; what it reads of other steps; what is known at start."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: jinja2 only for a `when` that needs it.
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from planrun.plan.definition import Plan, Step
from planrun.plan.expressions import Expr, ExpressionError, parse_expr, parse_template
from planrun.plan.graph import when_source

# What a condition may read of a failed or skipped step to react to it.
OUTCOME_FIELDS = frozenset({"status", "error"})


def when_problem(when: str) -> tuple[str, str | None] | None:
    """Why `when` is not one expression, with a suggested fix; None when it is one.

    A condition that were a template would yield a string, and any non-empty string is
    true: `"${deploy} and ${tests_ok}"` would run the step with both false.
    """
    try:
        tpl = parse_template(when_source(when))
    except ExpressionError:
        return None  # a syntax error: reported as such by the expression checks
    if tpl is not None and tpl.whole is not None:
        return None
    message = "a condition is one expression, not text around '${...}'"
    if tpl is None or not any(True for _ in tpl.exprs):
        return message, None
    joined = "".join(p.source.strip() if isinstance(p, Expr) else p for p in tpl.parts).strip()
    try:
        parse_expr(joined)
    except ExpressionError:
        return message, None
    return message, f"did you mean '${{{joined}}}'?"


def when_expr(when: str | bool | None) -> Expr | None:
    """The one expression of a `when` string, or None (a bool, no condition, or not one)."""
    if not isinstance(when, str):
        return None
    try:
        tpl = parse_template(when_source(when))
    except ExpressionError:
        return None
    return tpl.whole if tpl is not None else None


def reacts_to(step: Step) -> frozenset[str]:
    """Ids of the steps whose `status` or `error` this step's `when` reads.

    Such a step is not skipped when one of them failed or was skipped: its condition
    decides (a notify-on-failure step).
    """
    return _outcome_reads(step.when) if isinstance(step.when, str) else frozenset()


@lru_cache(maxsize=4096)
def _outcome_reads(when: str) -> frozenset[str]:
    expr = when_expr(when)
    if expr is None or not expr.step_refs:
        return frozenset()
    if expr.ref is not None:
        root, accessors = expr.ref
        if root == "steps" and len(accessors) >= 2 and accessors[1] in OUTCOME_FIELDS:
            return frozenset([str(accessors[0])])
        return frozenset()
    return _jinja_outcome_reads(expr.source)


def _jinja_outcome_reads(source: str) -> frozenset[str]:
    """Step ids X read as steps.X.status / steps['X']['error'] (any mix of . and [])."""
    from jinja2 import nodes
    from jinja2.exceptions import TemplateSyntaxError
    from jinja2.parser import Parser
    from jinja2.sandbox import SandboxedEnvironment

    try:
        node = Parser(SandboxedEnvironment(), source, state="variable").parse_expression()
    except TemplateSyntaxError:
        return frozenset()

    def key(n: Any) -> str | None:
        if isinstance(n, nodes.Getattr):
            return str(n.attr)
        if isinstance(n, nodes.Getitem) and isinstance(n.arg, nodes.Const):
            value = n.arg.value
            return value if isinstance(value, str) else None
        return None

    found: set[str] = set()
    for outer in node.find_all((nodes.Getattr, nodes.Getitem)):
        inner: Any = getattr(outer, "node", None)
        if key(outer) not in OUTCOME_FIELDS or not isinstance(inner, nodes.Getattr | nodes.Getitem):
            continue
        step_id = key(inner)
        if (
            step_id is not None
            and isinstance(inner.node, nodes.Name)
            and inner.node.name == "steps"
        ):
            found.add(step_id)
    return frozenset(found)


def false_at_start(step: Step, known: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """True when the step's `when` is false from what is known before any step runs.

    `known` holds the variables given at start (plan, --vars-file, --var) minus any name a
    step binds; a condition that reads anything else, or cannot be evaluated, may be true.
    """
    if step.when is False:
        return True
    if step.foreach is not None or step.matrix is not None:
        return _no_instance_at_start(step, known, env)
    return _false_in(step.when, known, env)


def _false_in(when: str | bool | None, scope: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """True when `when` is false from the names in `scope` (and `env`) alone."""
    if when is False:
        return True
    expr = when_expr(when)
    if expr is None or expr.step_refs or expr.steps_dynamic:
        return False
    if any(name != "env" and name not in scope for name in expr.names):
        return False
    try:
        return not expr.evaluate({**{n: scope[n] for n in expr.names if n in scope}, "env": env})
    except ExpressionError:
        return False


def _no_instance_at_start(step: Step, known: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """True when a foreach step's list is known at start and none of its instances can run:
    the list is empty, or each element's `when` is false (an instance has the step's `when`)."""
    from planrun.plan.fanout import FanOutError, InstanceScope, bindings, resolve_elements

    try:  # a list that reads a result, or cannot be made, may give instances that run
        items = resolve_elements(step, {**known, "env": env})
    except (ExpressionError, FanOutError):
        return False
    return all(
        _false_in(step.when, InstanceScope(known, bindings(step, item, n)), env)
        for n, item in enumerate(items)
    )


def steps_needing_approval(
    plan: Plan, selected: list[str], variables: Mapping[str, Any], env: Mapping[str, str]
) -> list[str]:
    """The selected steps that need approval and can run: a gate whose `when` is false from
    the variables known at start does not hold the run up."""
    gated = [sid for sid in selected if plan.needs_approval(plan.step(sid))]
    if not gated:
        return gated
    bound = {s.result_variable for s in plan.steps if s.result_variable}
    known = {k: v for k, v in variables.items() if k not in bound}
    return [sid for sid in gated if not false_at_start(plan.step(sid), known, env)]

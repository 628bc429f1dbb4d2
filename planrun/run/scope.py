"""What the scheduler knows about each step of a run, the names an expression can read, and
what a step would do with them (its condition, resolved arguments and fingerprint).

`StepRecord`s are changed by the scheduler only; `Scope` and `StepsView` read them live, so
an expression sees every step's current status without a copy per step.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from planrun.plan.definition import Plan, Step, replace
from planrun.plan.expressions import (
    Expr,
    ExpressionError,
    evaluator,
    parse_template,
    resolve,
    to_text,
)
from planrun.plan.fanout import (
    FanOutError,
    InstanceScope,
    bindings,
    expansion_fingerprint,
    loop_names,
    resolve_elements,
)
from planrun.plan.graph import when_source
from planrun.records import record
from planrun.run.stepcall import call_args, rendered_call, step_place, under
from planrun.status import Status


@record()
class StepRecord:
    """The scheduler's own view of one step in this run."""

    status: Status = Status.PENDING
    attempts: int = 0
    result: Any = None
    error: str | None = None
    duration_s: float | None = None
    fingerprint: str | None = None
    kept: bool = False  # kept from the previous run as it was recorded there
    upstream_failed: bool = False  # skipped because a step it depends on failed
    result_masked: bool = False  # a secret was masked in the result as shown and stored
    reason: str | None = None  # why it was skipped, or why it runs again on resume
    cache_key: str | None = None  # its cache key, when the cache keyed it (ran, hit, or kept so)

    @property
    def blocks_dependents(self) -> bool:
        """Its dependents are skipped: it failed, was stopped, or was itself skipped so."""
        return self.status in (Status.FAILED, Status.INTERRUPTED) or self.upstream_failed


class StepsView(Mapping[str, Any]):
    """`steps.<id>` in expressions: each step's status, result and error, read live."""

    def __init__(self, records: dict[str, StepRecord]) -> None:
        self._records = records

    def __getitem__(self, sid: str) -> dict[str, Any]:
        r = self._records[sid]
        # A step the cache had counts as succeeded for `when` (its result is the recorded one).
        status = Status.SUCCEEDED if r.status == Status.CACHED else r.status
        return {"status": str(status), "result": r.result, "error": r.error}

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


class Scope(Mapping[str, Any]):
    """The names an expression can read, without copying them for every step (`env` and
    `steps` first, then variables: plan < vars file < --var < result variables)."""

    def __init__(
        self, variables: dict[str, Any], env: dict[str, str], records: dict[str, StepRecord]
    ) -> None:
        self._variables = variables
        self._env = env
        self._records = records

    def __getitem__(self, name: str) -> Any:
        if name == "env":
            return self._env
        if name == "steps":
            return StepsView(self._records)
        return self._variables[name]

    def __contains__(self, name: object) -> bool:
        return name in ("env", "steps") or name in self._variables

    def __iter__(self) -> Iterator[str]:
        yield "env"
        yield "steps"
        yield from (k for k in self._variables if k not in ("env", "steps"))

    def __len__(self) -> int:
        return 2 + len(self._variables)


# What json.dumps(value, sort_keys=True, ensure_ascii=False, default=str) writes, with one
# encoder for the process (json.dumps makes one per call when given options): every step's.
_fingerprint_json = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def fingerprint(tool: str, args: Any) -> str:
    """What a step does: its tool and resolved arguments (the caller masks the secrets).

    Masked so that the stored value tells nothing about a secret, and so that a step reading
    a result recorded masked (`hdr-***`) has the same fingerprint on resume as when it ran.
    """
    blob = _fingerprint_json([tool, args])
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def step_condition(step: Step, scope: Mapping[str, Any]) -> bool:
    """Whether the step's `when` holds now (no `when`: it does). ExpressionError if it cannot
    be evaluated."""
    when = step.when
    if when is None or when is True:
        return True
    if isinstance(when, bool):
        return when
    return bool(resolve(when_source(when), scope, path=("when",)))


class _MaskedScope(Mapping[str, Any]):
    """A scope whose values read with the secrets masked (nested mappings such as `steps` too)."""

    def __init__(self, inner: Mapping[str, Any], mask: Callable[[Any], Any]) -> None:
        self._inner = inner
        self._mask = mask

    def __getitem__(self, name: str) -> Any:
        value = self._inner[name]
        if isinstance(value, Mapping) and not isinstance(value, dict):
            return _MaskedScope(value, self._mask)
        return self._mask(value)

    def __contains__(self, name: object) -> bool:
        return name in self._inner

    def __iter__(self) -> Iterator[str]:
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)


def step_args(
    step: Step, scope: Mapping[str, Any], mask: Callable[[Any], Any] | None = None
) -> tuple[dict[str, Any], str]:
    """The step's resolved arguments and their fingerprint; ExpressionError if they cannot be
    resolved now."""
    if mask is None:
        args = call_args(step, scope)
        return args, fingerprint(step.tool, args)
    values: dict[str, Any] = {}  # by expression source: each is evaluated once

    def once(expr: Expr) -> Any:
        if expr.source in values:
            return values[expr.source]
        value = values[expr.source] = expr.evaluate(scope)
        return value

    args = rendered_call(step, once)
    shown = mask(args)
    if shown is not args and shown != args:
        # A secret is in the arguments. Fingerprint them rendered from the values with the
        # secrets masked, as resume sees a result recorded masked: how a value reaches a
        # command depends on its characters (`***` goes through the environment, a plain word
        # is written in), so masking the rendered arguments alone would not match. A plain
        # reference's value is masked; any other expression (`${tok | upper}`) reads the
        # scope masked, so that no text derived from a secret is hashed.
        # (An expression the masked value does not suit, `| int`: as resolved.)
        masked_scope = _MaskedScope(scope, mask)

        def masked(expr: Expr) -> Any:
            return mask(once(expr)) if expr.ref is not None else expr.evaluate(masked_scope)

        with contextlib.suppress(ExpressionError):
            shown = mask(rendered_call(step, masked))
    return args, fingerprint(step.tool, shown)


def with_patterns(step: Step, scope: Mapping[str, Any]) -> Step:
    """The step with the `${...}` of its `sources` and `outputs` rendered, and the patterns
    made relative to the working directory when the step runs in another (its `cwd`, or a
    shell step's `args.cwd`); itself when nothing changes. ExpressionError when one cannot be
    rendered now."""
    if not step.sources and not step.outputs:
        return step
    place = step_place(step, scope)
    found: dict[str, list[str]] = {}
    for field in ("sources", "outputs"):
        patterns = getattr(step, field)
        if not patterns or (place is None and not any("$" in p for p in patterns)):
            continue
        from planrun.cache.globs import pattern_problem  # only for a templated pattern

        found[field] = []
        for n, p in enumerate(patterns):
            text = to_text(resolve(p, scope, path=(field, n)))
            if place is not None:
                text = under(place, text)
            problem = pattern_problem(text, output=field == "outputs")
            if problem:
                raise ExpressionError(f"{field}[{n}] renders as {text!r}: {problem}")
            found[field].append(text)
    return replace(step, **found) if found else step


def rendered_text(
    text: str | None,
    scope: Callable[[], Mapping[str, Any]],
    elements: frozenset[str] = frozenset(),
) -> str | None:
    """`text` (a title, a description) with `${...}` rendered; as written when it cannot be
    rendered now (a result not known yet). An expression that reads one of `elements` the
    scope does not hold is shown as `<EXPR>`: a foreach or matrix step's own text, whose
    element is bound only in its instances, is never known otherwise. The scope is asked for
    only when the text has an expression."""
    if not text or "${" not in text:
        return text
    try:
        tpl = parse_template(text)
        if tpl is None:
            return text
        known = scope()
        unbound = frozenset(n for n in elements if n not in known)
        evaluate = evaluator(known)
        return to_text(
            tpl.render(lambda e: f"<{e.source.strip()}>" if e.names & unbound else evaluate(e))
        )
    except ExpressionError:
        return text


def rendered_title(step: Step, scope: Callable[[], Mapping[str, Any]]) -> str:
    """The step's title with `${...}` rendered (as written when it cannot be rendered; no
    title: its id). Every view renders titles with this function."""
    return rendered_text(step.title, scope, loop_names(step)) or step.id


def rendered_description(step: Step, scope: Callable[[], Mapping[str, Any]]) -> str | None:
    """The step's description, rendered as its title is."""
    return rendered_text(step.description, scope, loop_names(step))


def known_scope(variables: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """What an expression reads before the run (`list`, `show`, the dry run): the variables,
    `env`, and no step yet."""
    return {**variables, "env": env, "steps": {}}


def plan_scope(plan: Plan, given: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """`known_scope` of a plan outside a run: its variables evaluated with the given ones over
    them (a variable that cannot be evaluated yet leaves its expression unread)."""
    from planrun.plan.variables import evaluate_variables

    try:
        variables = evaluate_variables(plan.variables, given, env, plan.secrets)
    except ExpressionError:
        variables = {**plan.variables, **given}
    return known_scope(variables, env)


def titles_before_run(
    steps: list[Step],
    variables: Mapping[str, Any],
    env: Mapping[str, str],
    results: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Each step's title as known when the run starts: a title that reads a result variable
    (bound later, whatever value the name has now) or a foreach element stays as written;
    `results`, the result variables known already (those a resume keeps), are read."""
    results = results or {}
    bound = {s.result_variable for s in steps if s.result_variable}
    given = {k: v for k, v in variables.items() if k not in bound}
    known = known_scope({**given, **results}, env)
    return {s.id: rendered_title(s, lambda: known) for s in steps}


def instance_views(
    step: Step, items: list[Any], scope: Mapping[str, Any], mask: Callable[[Any], Any] | None
) -> list[tuple[bool | None, str | None]]:
    """Per instance: whether its `when` holds and the fingerprint of its resolved args (None
    for what cannot be evaluated now)."""
    views: list[tuple[bool | None, str | None]] = []
    for n, item in enumerate(items):
        inner = InstanceScope(scope, bindings(step, item, n))
        try:
            cond = step_condition(step, inner)
        except ExpressionError:
            views.append((None, None))
            continue
        try:
            views.append((cond, step_args(step, inner, mask)[1] if cond else None))
        except ExpressionError:
            views.append((cond, None))
    return views


def foreach_fingerprint(
    step: Step, scope: Mapping[str, Any], mask: Callable[[Any], Any] | None
) -> str | None:
    """The step's fingerprint now, None when its list cannot be read now."""
    try:
        items = resolve_elements(step, scope)
    except (ExpressionError, FanOutError):
        return None
    return expansion_fingerprint(step, instance_views(step, items, scope, mask))

"""Fan-out (`foreach`): a step's list of elements, its instances `ID[N]`, and their results.

The scheduler runs an instance like any step (same tool, timeout, retries, `when`, approval,
budgets); this module says what the instances are, what each one may read, and what the step
as a whole comes to once they are done.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, Protocol

from planrun.plan.definition import INDEX_NAME, Step, replace
from planrun.plan.expressions import ExpressionError, parse_template, resolve
from planrun.plan.instances import instance_id, parent_of
from planrun.text import kind_of

DEFAULT_AS = "item"
MATRIX_NAME = "matrix"
"""The name a `matrix` instance's combination is bound to (`${matrix.py}`)."""
EXCLUDE = "exclude"
"""The key in a `matrix` mapping that lists combinations to drop (not a name)."""


class FanOutError(Exception):
    """A `foreach` that cannot be expanded (its value is not a list or a mapping)."""


def fans_out(step: Step) -> bool:
    """Whether the step runs as instances `ID[N]`: it has `foreach` or `matrix`."""
    return step.foreach is not None or step.matrix is not None


def element_name(step: Step) -> str:
    """What an instance's element is bound to: `matrix`, or the foreach's `as` (default item)."""
    return MATRIX_NAME if step.matrix is not None else (step.as_ or DEFAULT_AS)


def fan_source(step: Step) -> tuple[str, Any]:
    """The key and value the instances come from: ("foreach", list) or ("matrix", mapping)."""
    return ("matrix", step.matrix) if step.matrix is not None else ("foreach", step.foreach)


def loop_names(step: Step) -> frozenset[str]:
    """Names a fan-out step's args, when and title may read besides the plan's: element, index."""
    if not fans_out(step):
        return frozenset()
    return frozenset((element_name(step), INDEX_NAME))


def matrix_problems(step: Step) -> list[tuple[tuple[str | int, ...], str]]:
    """What is wrong with a step's `matrix` / `max_parallel` beyond the schema: (path, message)."""
    if step.foreach is not None and step.matrix is not None:
        return [(("matrix",), "a step has 'foreach' or 'matrix', not both")]
    if step.max_parallel is not None and not fans_out(step):
        return [
            (("max_parallel",), "max_parallel limits the instances of a foreach or matrix step")
        ]
    if step.matrix is None:
        return []
    names = [n for n in step.matrix if n != EXCLUDE]
    if not names:
        return [(("matrix",), "matrix: no names to combine")]
    if not all(_one_expression(v) for v in step.matrix.values()):
        return []  # said at the value (matrix_expression_problems)
    if all(isinstance(step.matrix[n], list) for n in names):  # as written: its size is known
        size = math.prod(len(step.matrix[n]) for n in names)
        if size > MAX_INSTANCES:
            return [(("matrix",), f"matrix {_too_many(size)}")]
    exclude = step.matrix.get(EXCLUDE, [])
    if isinstance(exclude, str):
        return []  # one ${expression}: its entries are known when it is read
    bad = [n for n, e in enumerate(exclude) if not isinstance(e, Mapping)]
    if bad:
        return [(("matrix", EXCLUDE, bad[0]), "matrix: an exclude entry is a mapping of names")]
    from planrun.suggest import did_you_mean  # Lazy import: only for such a step

    return [
        (
            ("matrix", EXCLUDE, n, k),
            f"matrix: exclude names '{k}', which is not in the matrix"
            + (f" ({hint})" if (hint := did_you_mean(str(k), names)) else ""),
        )
        for n, e in enumerate(exclude)
        for k in e
        if k not in step.matrix or k == EXCLUDE
    ]


def matrix_expression_problems(step: Step) -> list[tuple[tuple[str | int, ...], str]]:
    """A matrix list written as a string that is not one `${...}`: (path of the value, message)."""
    return [
        (("matrix", n), f"matrix.{n}: {EXPRESSION_NEEDED} giving a list")
        for n, value in (step.matrix or {}).items()
        if not _one_expression(value)
    ]


def combinations(matrix: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A matrix's combinations, the first name varying slowest, without the excluded ones (an
    `exclude` entry drops every combination that has all of its values)."""
    import itertools

    excluded = matrix.get(EXCLUDE) or []
    names = [n for n in matrix if n != EXCLUDE]
    for name in names:
        if not isinstance(matrix[name], list | tuple):
            raise FanOutError(f"matrix.{name} gave {kind_of(matrix[name])}, not a list")
    if not isinstance(excluded, list) or not all(isinstance(e, Mapping) for e in excluded):
        raise FanOutError("matrix.exclude must be a list of mappings")
    size = 1
    for name in names:
        size *= len(matrix[name])
    if size > MAX_INSTANCES:
        raise FanOutError(f"matrix {_too_many(size)}")
    out = []
    for values in itertools.product(*(matrix[n] for n in names)):
        combo = dict(zip(names, values, strict=True))
        if not any(all(combo.get(k) == v for k, v in e.items()) for e in excluded):
            out.append(combo)
    return out


def _too_many(size: int) -> str:
    return f"gives {size:,} combinations; a step runs at most {MAX_INSTANCES:,} instances"


EXPRESSION_NEEDED = "a string must be exactly one ${expression}"


def _one_expression(value: Any) -> bool:
    """False for a string that can never give a list (it is not one `${...}`)."""
    if not isinstance(value, str):
        return True
    try:
        tpl = parse_template(value)
    except ExpressionError:
        return True  # reported as an expression error
    return tpl is not None and tpl.whole is not None


def foreach_problem(step: Step) -> str | None:
    """Why a `foreach` can never give a list (a string that is not one `${...}`), else None."""
    if _one_expression(step.foreach):
        return None
    return f"{EXPRESSION_NEEDED} giving a list or a mapping"


MAX_INSTANCES = 100_000
"""Instances of one foreach step: each costs about 1.5 kB before any runs, and a list from a
result or a vars file can hold millions of items."""


def elements(value: Any) -> list[Any]:
    """The elements a foreach value gives: a list as is, a mapping as {key, value} in order."""
    if isinstance(value, list | tuple | Mapping) and len(value) > MAX_INSTANCES:
        raise FanOutError(
            f"foreach gave {len(value):,} items; a step runs at most {MAX_INSTANCES:,} instances"
        )
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, Mapping):
        return [{"key": k, "value": v} for k, v in value.items()]
    shown = repr(value) if isinstance(value, str | int | float) else ""
    if len(shown) > 60:
        shown = shown[:57] + "..."
    raise FanOutError(
        f"foreach gave {kind_of(value)}{' ' + shown if shown else ''}, not a list or a mapping"
    )


def expansion_fingerprint(step: Step, views: list[tuple[bool | None, str | None]]) -> str:
    """What a foreach step as a whole does: its tool and each instance's condition and args.
    Equal fingerprints: every instance would do the same again."""
    blob = json.dumps([step.tool, fan_source(step)[0], views], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def resolve_elements(step: Step, scope: Mapping[str, Any]) -> list[Any]:
    """The step's elements now (ExpressionError, FanOutError)."""
    if step.matrix is not None:
        return combinations(resolve(step.matrix, scope, path=("matrix",)))
    return elements(resolve(step.foreach, scope, path=("foreach",)))


class InstanceScope(Mapping[str, Any]):
    """The run's scope with an instance's element and index on top (read-only, not copied)."""

    def __init__(self, base: Mapping[str, Any], names: dict[str, Any]) -> None:
        self._base = base
        self._names = names

    def __getitem__(self, name: str) -> Any:
        if name in self._names:
            return self._names[name]
        return self._base[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names or name in self._base

    def __iter__(self) -> Iterator[str]:
        yield from self._names
        yield from (k for k in self._base if k not in self._names)

    def __len__(self) -> int:
        return len(self._names) + sum(1 for k in self._base if k not in self._names)


def bindings(step: Step, element: Any, n: int) -> dict[str, Any]:
    """What one instance reads: `{as: element, index: n}` (`{matrix: combination, index: n}`)."""
    return {element_name(step): element, INDEX_NAME: n}


def instance_step(step: Step, n: int) -> Step:
    """Instance `n` of a foreach step: the same step under the id `ID[N]`, binding nothing
    itself (the step binds the list of all results)."""
    return replace(
        step, id=instance_id(step.id, n), foreach=None, matrix=None, as_=None, result_variable=None
    )


class Verdict(NamedTuple):
    """What a foreach step comes to from its instances' statuses and results."""

    status: str
    result: list[Any]
    error: str | None


class InstanceRecord(Protocol):
    """What `summarize` reads of an instance's record."""

    @property
    def status(self) -> str: ...
    @property
    def result(self) -> Any: ...
    @property
    def error(self) -> str | None: ...
    @property
    def kept(self) -> bool: ...


def summarize(ids: list[str], records: Mapping[str, InstanceRecord]) -> Verdict:
    """The step's status and result list (input order) from its instances.

    failed if one failed; interrupted if one was stopped or never got to start (the run
    stopped first); skipped if every instance was skipped by `when`; else succeeded (skipped
    and ignored instances give null in the list).
    """
    result = [
        records[i].result if records[i].status not in ("skipped", "ignored") else None for i in ids
    ]
    statuses = {records[i].status for i in ids}
    failed = next((i for i in ids if records[i].status == "failed"), None)
    if failed is not None:
        return Verdict("failed", result, f"instance {failed} failed: {records[failed].error}")
    if statuses & {"interrupted", "running", "pending"}:
        return Verdict("interrupted", result, None)
    if statuses == {"skipped"}:
        return Verdict("skipped", result, None)
    return Verdict("succeeded", result, None)


__all__ = ["instance_id", "parent_of"]

"""Plan `variables` holding `${…}`: checked by validation, evaluated once when a run starts.

A plan variable may read `env`, the values given with `--var` / `--vars-file`, and the plan
variables written before it (`url: "https://${host}/x"`). It is evaluated in file order, once,
before any step runs; a variable given on the command line is not evaluated (the given value
wins, and later variables read it). Steps, result variables and later variables are not known
yet, so reading them is a validation error.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the close-match hint only for an error.
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from planrun.plan.expressions import (
    ExpressionError,
    format_path,
    parse_template,
    resolve,
    template_strings,
)
from planrun.plan.loader import invalid

Path = tuple[str | int, ...]


class VariableProblem(NamedTuple):
    """What is wrong with one expression in the plan's `variables`."""

    path: Path  # from the plan's root: ("variables", name, ...)
    message: str
    hint: str | None = None


def check_plan_variables(
    plan_vars: Mapping[str, Any], given: set[str], bound: set[str]
) -> list[VariableProblem]:
    """What is wrong with the expressions in plan variables (`given`: --var/--vars-file names,
    `bound`: result variable names)."""
    problems: list[VariableProblem] = []
    names = list(plan_vars)
    for index, name in enumerate(names):
        if name in given:
            continue  # the given value is used as is
        earlier = set(names[:index]) | given
        for path, text in template_strings(plan_vars[name], ("variables", name)):
            where = f"variable '{format_path(path[1:])}'"
            try:
                tpl = parse_template(text)
            except ExpressionError as exc:
                problems.append(VariableProblem(path, f"{where}: {exc.message}"))
                continue
            for expr in tpl.exprs if tpl is not None else ():
                if expr.step_refs or "steps" in expr.names:
                    problems.append(
                        VariableProblem(
                            path,
                            f"{where}: reads 'steps': variables are evaluated before any step runs",
                        )
                    )
                for read in sorted(expr.names - earlier - {"env", "steps"}):
                    problems.append(_unknown(path, where, name, read, names, bound, earlier))
    return problems


def _unknown(
    path: Path, where: str, name: str, read: str, names: list[str], bound: set[str], known: set[str]
) -> VariableProblem:
    if read == name:
        return VariableProblem(path, f"{where}: reads itself")
    if read in names:
        return VariableProblem(
            path,
            f"{where}: reads '{read}', which is defined after it (a variable reads env, "
            "--var/--vars-file values and the variables before it)",
        )
    if read in bound:
        return VariableProblem(
            path,
            f"{where}: reads the result variable '{read}': variables are evaluated before any "
            "step runs",
        )
    from planrun.suggest import did_you_mean  # Lazy import: only for an error

    return VariableProblem(path, f"{where}: undefined name '{read}'", did_you_mean(read, known))


def needs_evaluation(plan_vars: Mapping[str, Any]) -> bool:
    return any(True for value in plan_vars.values() for _ in template_strings(value))


def evaluate_variables(
    plan_vars: Mapping[str, Any],
    given: Mapping[str, Any],
    env: Mapping[str, str],
    secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """The run's variables: plan variables evaluated in order, then the given values over them.

    Raises ExpressionError naming the variable (`name` is set to it), with the values of
    `secrets` known so far masked in its message (it may quote a value: a missing key).
    """
    if not needs_evaluation(plan_vars):
        return {**plan_vars, **given}
    scope: dict[str, Any] = {**given, "env": env}
    out: dict[str, Any] = {}
    for name, value in plan_vars.items():
        if name in given:
            continue
        try:
            out[name] = scope[name] = resolve(value, scope)
        except ExpressionError as exc:
            message = f"variable '{name}': {exc.message}"
            if secrets:
                from planrun.masking import Masker

                message = Masker(list(secrets), {**out, **given}, env)(message)
            raise ExpressionError(message, name=name) from None
    return {**out, **given}


def start_variables(
    plan_vars: Mapping[str, Any],
    given: Mapping[str, Any],
    env: Mapping[str, str],
    doc: Any,
    secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """`evaluate_variables`, with a failure as an invalid plan positioned at the variable."""
    try:
        return evaluate_variables(plan_vars, given, env, secrets)
    except ExpressionError as exc:
        line, col = doc.pos(("variables", exc.name or ""))
        raise invalid(doc.file, line, col, exc.message) from None

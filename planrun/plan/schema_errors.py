"""pydantic's validation errors as planrun diagnostics: positioned, in the plan's own words."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: planrun.plan.model (pydantic) only for a plan with
# errors; Collector gathers every plan's diagnostics.
import json
import re
from typing import TYPE_CHECKING, Any

from planrun.errors import Diagnostic
from planrun.plan.definition import STEP_ID_PATTERN
from planrun.plan.expressions import format_path
from planrun.suggest import did_you_mean

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

Path = tuple[str | int, ...]


class Collector:
    """Diagnostics being gathered for one document, each positioned by its path."""

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.items: list[Diagnostic] = []
        # A problem is said once: a string with two `${...}` reading one undefined name is
        # one problem at one place, however many checks walk its expressions.
        self._said: set[tuple[int, int, str, str]] = set()

    def add(
        self,
        path: Path,
        message: str,
        *,
        hint: str | None = None,
        key: bool = False,
        severity: str = "error",
    ) -> None:
        line, col = self.doc.pos(_doc_path(self.doc.data, path), key=key)
        if (line, col, severity, message) in self._said:
            return
        self._said.add((line, col, severity, message))
        self.items.append(Diagnostic(self.doc.file, line, col, severity, message, hint))


def _doc_path(data: Any, path: Path) -> Path:
    """Map model paths onto the document (the `id` of an mcp-cli step is written `index`)."""
    if len(path) >= 3 and path[0] == "steps" and path[2] == "id":
        try:
            step = data["steps"][path[1]]
            if isinstance(step, dict) and "id" not in step and "index" in step:
                return ("steps", path[1], "index", *path[3:])
        except (KeyError, IndexError, TypeError):
            pass
    if len(path) == 1 and path[0] == "name" and isinstance(data, dict) and "name" not in data:
        return ("id",)
    return path


def step_label(sid: Any, i: int) -> str:
    """A step named in a message by the id it was written with (`step 'build'`, `step '3'`,
    a boolean as YAML and JSON write it: `step 'true'`), else by its place (`step #2`): an
    id that is itself the error is not printed raw (a line feed, an escape sequence)."""
    if sid is True or sid is False:
        return f"step '{'true' if sid else 'false'}'"
    if isinstance(sid, str | int) and str(sid).isprintable():
        return f"step '{sid}'"
    return f"step #{i + 1}"


def _label(path: Path, steps: list[Any]) -> str:
    if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
        raw = steps[path[1]] if path[1] < len(steps) else None
        sid = raw.get("id", raw.get("index")) if isinstance(raw, dict) else None
        who = step_label(sid, path[1])
        rest = format_path(path[2:])
        return f"{who}: {rest}" if rest else who
    return format_path(path)


def schema_errors(
    exc: ValidationError,
    base: Path,
    data: Any,
    out: Collector,
    fields: list[str],
    steps: list[Any],
) -> None:
    seen: set[Path] = set()
    errors = [(err, *_located(err, data)) for err in exc.errors()]
    # A union (`run: str | list[str]`) fails once per member: an error inside the value (at
    # `run[1]`) says more than the member it is not (`run: expected a string`).
    deeper = {tuple(loc[:n]) for _, loc, _ in errors for n in range(len(loc))}
    for err, loc, node in errors:
        path = (*base, *loc)
        if path in seen or (tuple(loc) in deeper and err["type"] in _EXPECTED):
            continue
        seen.add(path)
        kind = err["type"]
        msg = str(err["msg"]).removeprefix("Value error, ")
        if kind == "extra_forbidden":
            _unknown_key(err, path, len(loc) == 1, data, out, fields, steps)
        elif kind == "missing" and loc == ["tool"] and base[:1] == ("steps",):
            out.add(path[:-1], f"{_label(path[:-1], steps)} needs 'tool' or 'run'")
        elif kind == "missing":
            out.add(
                path[:-1],
                f"{_label(path[:-1], steps) or 'the plan'}: missing required key '{loc[-1]}'",
            )
        elif kind == "string_pattern_mismatch" and loc and loc[-1] == "id":
            out.add(
                path,
                f"{_label(path[:-1], steps)}: bad step id {node!r}: use letters, digits, '_', '.', '-'",
            )
        elif kind == "string_pattern_mismatch" and _is_step_name(err):  # alias, depends_on
            out.add(
                path,
                f"{_label(path, steps)}: bad step name {node!r}: use letters, digits, '_', '.', '-'",
            )
        elif kind == "string_pattern_mismatch" and loc and loc[-1] in ("result_variable", "as"):
            what = "result_variable" if loc[-1] == "result_variable" else "'as' name"
            out.add(
                path,
                f"{_label(path[:-1], steps)}: bad {what} {node!r}: use a name like 'my_var'",
            )
        elif loc and loc[-1] == "approval" and len(loc) <= 3:  # bool | str: one line, not two
            got = json.dumps(node, ensure_ascii=False, default=str)[:80]
            out.add(path, f"{_label(path, steps)}: expected {_APPROVAL}, got {got}")
        elif kind in _EXPECTED or kind in ("enum", "literal_error", "greater_than_equal"):
            where = _label(path, steps) or "plan"
            got = json.dumps(node, ensure_ascii=False, default=str)[:80]
            ctx = err.get("ctx") or {}
            if kind == "greater_than_equal":
                out.add(path, f"{where}: expected {ctx.get('ge')} or more, got {got}")
            else:
                expected = _EXPECTED.get(kind) or ctx.get("expected", "another value")
                hint = _close_choice(kind, node, expected)
                out.add(path, f"{where}: expected {expected}, got {got}", hint=hint)
        else:
            where = _label(path, steps) or "plan"
            out.add(path, f"{where}: {msg}")


def _close_choice(kind: str, node: Any, expected: str) -> str | None:
    """did-you-mean for a misspelt word of a closed set (`type: intger`, `on_failure:
    contnue`): pydantic words the set as `'a', 'b' or 'c'`."""
    if kind not in ("enum", "literal_error") or not isinstance(node, str):
        return None
    return did_you_mean(node, re.findall(r"'([^']*)'", expected))


def _is_step_name(err: Any) -> bool:
    """A text that must be a step id (a `depends_on` entry, an alias, a `default` name)."""
    return (err.get("ctx") or {}).get("pattern") == STEP_ID_PATTERN


# A field the plan may write under its alias: a plan's `name` as `id`, a step's `id` as `index`.
_WRITTEN_AS = {"name": "id", "id": "index"}


def _located(err: Any, data: Any) -> tuple[list[str | int], Any]:
    """Where in the data an error is (pydantic's union-member tags dropped: they are not in the
    data), and the value there."""
    loc: list[str | int] = []
    node = data
    for part in err["loc"]:
        if isinstance(node, list) and isinstance(part, str):
            continue  # a union member's tag (`list[str]`): not in the data
        alias = _WRITTEN_AS.get(part) if isinstance(part, str) else None
        if isinstance(node, dict) and part not in node and alias in node:
            part = alias  # the model's `name` / `id`, written `id` / `index`: point at that
        if (
            isinstance(node, dict)
            and part in node
            or (isinstance(node, list) and isinstance(part, int) and part < len(node))
        ):
            loc.append(part)
            node = node[part]
        elif err["type"] in ("extra_forbidden", "missing") and part == err["loc"][-1]:
            loc.append(part)
        else:
            break
    return loc, node


def _unknown_key(
    err: Any,
    path: Path,
    in_step: bool,
    data: Any,
    out: Collector,
    fields: list[str],
    steps: list[Any],
) -> None:
    """An unknown key (with the known ones it may be a typo of), or an alias given twice."""
    key = str(path[-1])
    parent = _label(path[:-1], steps) if len(path) > 1 else "the plan"
    choices = fields if in_step else _fields_at(err["loc"][:-1])
    # `index` (step) and `id` (plan) are aliases: they are only "unknown" when the real key
    # is there too.
    alias_of = {"index": "id"} if "index" in fields else {"id": "name"}
    if in_step and alias_of.get(key) in data:
        message = f"{parent}: '{key}' is an alias of '{alias_of[key]}': give only one of them"
        out.add(path, message, key=True)
        return
    hint = did_you_mean(key, [c for c in choices if c != key])
    out.add(path, f"unknown key '{key}' in {parent}", hint=hint, key=True)


_APPROVAL = "true, false or a question of two words or more"

# Type errors (strict: nothing is converted) in the words of the plan's JSON types.
_EXPECTED = {
    "bool_type": "true or false",
    "int_type": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "dict_type": "a mapping",
    "model_type": "a mapping",  # a nested object (a param, a server, `limits`, ...)
    "model_attributes_type": "a mapping",
    "dataclass_type": "a mapping",
    "list_type": "a list",
}


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Known keys of the nested model at a pydantic location (for did-you-mean)."""
    from planrun.plan import model

    names: dict[str, type[BaseModel]] = {
        "defaults": model.Defaults,
        "limits": model.Limits,
        "policy": model.Policy,
        "replan": model.Replan,
        "executor": model.ExecutorConfig,
    }
    if loc and loc[0] in names:
        return list(names[loc[0]].model_fields)
    if loc and loc[0] == "servers":
        return list(model.ServerEntry.model_fields)
    if loc and loc[0] == "params":
        return list(model.Param.model_fields)
    return model.PLAN_FIELDS

"""`planrun mcp`'s tools take exactly their input schema: no coercion, no unknown arguments."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: jsonschema and the tool registry only when a
# call's arguments are checked.
import json
import math
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent
from mcp_types import Tool as MCPTool

from planrun.errors import quoted


class StrictServer(MCPServer):
    """An MCPServer whose tools take exactly their input schema.

    The SDK validates arguments with pydantic in lax mode: `approve: "yes"` or `approve: 1`
    would become True, and a JSON text where an object is expected would be parsed. A gate must
    not open on a coercion, so the raw arguments are checked against the published schema
    first (no unknown keys: the schemas say `additionalProperties: false`), and a mismatch is a
    tool error naming the argument.
    """

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        return [t.model_copy(update={"input_schema": published(t.input_schema)}) for t in tools]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        schemas = {t.name: t.input_schema for t in await self.list_tools()}
        schema = schemas.get(name)
        if schema is not None:
            arguments = without_nulls(schema, arguments)
            problems = argument_problems(name, schema, arguments)
            if problems:
                return CallToolResult(
                    content=[TextContent(type="text", text="\n".join(problems))], is_error=True
                )
        return await super().call_tool(name, arguments, context)


def published(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema as clients get it: no unknown arguments, and each argument of one
    top-level `type`. pydantic writes an optional `X | None` argument as `anyOf: [X, null]`
    with `default: null`; clients that build a value by the top-level type (MCP Inspector's
    command line) then send a JSON object as a string. Optional already means it may be left
    out, and a null is taken as left out (`without_nulls`), so the null branch goes."""
    props = {}
    for key, prop in (schema.get("properties") or {}).items():
        options = prop.get("anyOf") or []
        kept = [o for o in options if o.get("type") != "null"]
        if key not in schema.get("required", []) and len(kept) == 1 < len(options):
            prop = {k: v for k, v in prop.items() if k != "anyOf"} | kept[0]
            if prop.get("default", 0) is None:
                del prop["default"]
        props[key] = prop
    return {**schema, "properties": props, "additionalProperties": False}


def without_nulls(schema: dict[str, Any], arguments: Any) -> Any:
    """`arguments` without the optional ones given as null (as if not given)."""
    if not isinstance(arguments, dict):
        return arguments
    required = set(schema.get("required", []))
    return {k: v for k, v in arguments.items() if v is not None or k in required}


def argument_problems(tool: str, schema: dict[str, Any], arguments: Any) -> list[str]:
    """One line per way `arguments` does not match `schema` (empty when they match)."""
    from jsonschema import Draft202012Validator

    from planrun.text import type_name

    if not isinstance(arguments, dict):
        return [f"{tool}: arguments must be an object, got {type_name(arguments)}"]
    allowed = list(schema.get("properties") or {})
    out = []
    # sorted by where and what, not by str(err): that pretty-prints the whole instance
    errors = Draft202012Validator(schema).iter_errors(arguments)
    for err in sorted(errors, key=lambda e: (str(list(e.absolute_path)), str(e.validator))):
        where = ".".join(str(p) for p in err.absolute_path)
        if err.validator == "additionalProperties":
            for key in sorted(set(arguments) - set(allowed)):
                out.append(
                    f"{tool}: unknown argument '{quoted(key)}' "
                    f"(allowed: {', '.join(allowed) or 'none'})"
                )
        elif err.validator == "required":
            missing = [k for k in schema.get("required", []) if k not in arguments]
            out += [f"{tool}: missing argument '{k}'" for k in missing]
        elif where in allowed and err.validator in ("type", "anyOf"):
            expected = _expected(schema["properties"][where])
            out.append(
                f"{tool}: argument '{where}' must be {expected}, "
                f"got {type_name(err.instance)} {_preview(err.instance)}"
            )
        else:
            out.append(f"{tool}: argument '{quoted(where)}': {quoted(err.message)}")
    for key in allowed:  # JSON has no NaN or infinity, though a client's parser may send them
        word = _not_finite(arguments.get(key))
        if word is not None:
            out.append(
                f"{tool}: argument '{key}' holds {word}, which is not a JSON number "
                "(JSON has no NaN or infinity)"
            )
    return list(dict.fromkeys(out))


def _not_finite(value: Any) -> str | None:
    """`NaN` or `infinity` when `value` holds one anywhere (iteratively: nesting is bounded by
    the SDK's parser, not by Python's stack), else None."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return "NaN" if math.isnan(item) else "infinity"
        if isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return None


def _preview(value: Any, width: int = 60) -> str:
    """The start of `value` as JSON, at most `width` characters, encoded only that far."""
    text = ""
    for chunk in json.JSONEncoder(ensure_ascii=False).iterencode(value):
        text += chunk
        if len(text) > width:
            break
    return quoted(text[:width], width)


def _expected(prop: dict[str, Any]) -> str:
    """`a boolean`, `an object or null`: the JSON types a property's schema accepts."""
    options = prop.get("anyOf") or [prop]
    names = [str(o.get("type")) for o in options if o.get("type")]
    words = {"object": "an object", "array": "an array", "integer": "an integer"}
    return " or ".join(words.get(n, f"a {n}" if n != "null" else "null") for n in names)

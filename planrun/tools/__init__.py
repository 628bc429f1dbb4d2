"""The built-in tools: their names, descriptions and argument schemas, loaded on first call."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from typing import Any

from planrun.plan.expressions import render_args
from planrun.text import type_name
from planrun.tools.base import RenderFn, ToolContext, ToolFailed, ToolFn, ToolRegistry, ToolSpec

__all__ = ["builtin_registry", "check_args", "renderer", "tool_spec"]


def check_args(
    tool: str, args: Any, required: Iterable[str] = (), optional: Iterable[str] = ()
) -> None:
    """Fail with one clear line when `args` is not a mapping, misses or has unknown keys."""
    if not isinstance(args, dict):
        raise ToolFailed(f"{tool}: arguments must be a mapping, got {type_name(args)}")
    required = tuple(required)
    missing = [k for k in required if k not in args]
    if missing:
        raise ToolFailed(f"{tool}: missing argument {', '.join(repr(k) for k in missing)}")
    allowed = set(required) | set(optional)
    unknown = sorted(k for k in args if k not in allowed)
    if unknown:
        raise ToolFailed(
            f"{tool}: unknown argument {', '.join(repr(k) for k in unknown)}"
            f" (allowed: {', '.join(sorted(allowed))})"
        )


def path_arg(tool: str, args: dict[str, Any]) -> str:
    """The tool's `path` argument: a non-empty string, else one clear line."""
    path = args["path"]
    if not isinstance(path, str) or not path:
        raise ToolFailed(f"{tool}: 'path' must be a non-empty string, got {type_name(path)}")
    return path


# The wrappers below import each tool's module on first use, so that importing
# `planrun.tools` (e.g. for `planrun validate`) costs no asyncio, json or httpx2.


def _lazy(module: str, attr: str) -> ToolFn:
    """A tool function that imports `planrun.tools.<module>` on its first call."""
    fn: ToolFn | None = None

    async def call(args: dict[str, Any], ctx: ToolContext) -> Any:
        nonlocal fn
        if fn is None:
            fn = getattr(importlib.import_module(f"planrun.tools.{module}"), attr)
        return await fn(args, ctx)

    call.__name__ = attr
    return call


def _render_shell(args: dict[str, Any], evaluate: Any) -> dict[str, Any]:
    from planrun.tools.shellargs import render_shell_args

    return render_shell_args(args, evaluate)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

_BUILTINS: list[tuple[str, ToolFn, str, dict[str, Any], RenderFn | None]] = [
    (
        "shell",
        _lazy("shell", "run_shell"),
        "Run a command (string: by /bin/sh -c; list: argv, no shell); "
        "result {stdout, stderr, exit_code}.",
        _schema(
            {
                "cmd": {
                    "description": "A shell command line, or an argv list run without a shell.",
                    "oneOf": [
                        {"type": "string"},
                        {
                            "type": "array",
                            "items": {"type": ["string", "number"]},
                            "minItems": 1,
                        },
                    ],
                },
                "cwd": {
                    "type": "string",
                    "description": "Working directory, relative to planrun's working directory.",
                },
                "env": {
                    "type": "object",
                    "description": "Variables merged over planrun's environment (null unsets one).",
                    "additionalProperties": {
                        "type": ["string", "number", "boolean", "null"],
                    },
                },
                "stdin": {"type": "string", "description": "Text fed to the command's stdin."},
                "check": {
                    "type": "boolean",
                    "default": True,
                    "description": "Fail the step when the exit code is not 0.",
                },
            },
            ["cmd"],
        ),
        _render_shell,  # values quoted by their context in the command
    ),
    (
        "echo",
        _lazy("echo", "run_echo"),
        "Return `value` unchanged (null without one).",
        _schema({"value": {"description": "Any JSON value (default null)."}}, []),
        None,
    ),
    (
        "sleep",
        _lazy("sleep", "run_sleep"),
        "Wait `seconds`; result null.",
        _schema({"seconds": {"type": "number", "minimum": 0}}, ["seconds"]),
        None,
    ),
    (
        "read_file",
        _lazy("files", "run_read_file"),
        "Read a UTF-8 text file; result its text.",
        _schema(
            {
                "path": {
                    "type": "string",
                    "description": "Relative to planrun's working directory.",
                }
            },
            ["path"],
        ),
        None,
    ),
    (
        "write_file",
        _lazy("files", "run_write_file"),
        "Write text (or any JSON value, as JSON) to a file atomically; result {path, bytes}.",
        _schema(
            {
                "path": {
                    "type": "string",
                    "description": "Relative to planrun's working directory; parents are created.",
                },
                "content": {
                    "description": "A string is written as is; any other value as indented JSON.",
                },
            },
            ["path", "content"],
        ),
        None,
    ),
    (
        "http",
        _lazy("http", "run_http"),
        "Make an HTTP request; result {status, headers, json} or {status, headers, text}.",
        _schema(
            {
                "method": {"type": "string", "default": "GET"},
                "url": {"type": "string", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://"},
                "headers": _STRING_MAP,
                "json": {"description": "A JSON request body (sets Content-Type)."},
                "body": {"type": "string", "description": "A text request body."},
                "expect_status": {
                    "description": "Accepted status(es); without it, 400 or more fails.",
                    "oneOf": [
                        {"type": "integer"},
                        {"type": "array", "items": {"type": "integer"}, "minItems": 1},
                    ],
                },
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Seconds; default: the step timeout, else 300.",
                },
            },
            ["url"],
        ),
        None,
    ),
    (
        "python",
        _lazy("python", "run_python"),
        "Call a Python function `package.module:attr` with `kwargs`; result its return value.",
        _schema(
            {
                "function": {
                    "type": "string",
                    "pattern": "^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$",
                    "description": "module:attr (dotted attr allowed); planrun's working "
                    "directory is importable.",
                },
                "kwargs": {"type": "object", "default": {}},
            },
            ["function"],
        ),
        None,
    ),
    (
        "plan",
        _lazy("subplan", "run_plan_step"),
        "Run another plan file as one step; returns its final variables.",
        _schema(
            {
                "path": {"type": "string"},
                "variables": {"type": "object"},
                "env": {"type": "object"},
            },
            ["path"],
        ),
        None,
    ),
]


# What a tool takes of its step besides its args (ToolSpec): the shell tool its `env` and `cwd`
# (and shows its `cmd` when asking for approval); the python tool its `env` (set in os.environ
# while its function runs, planrun.tools.environ); the plan tool its `env` and `cwd` (the
# sub-plan runs there, in that environment).
_TAKES: dict[str, dict[str, Any]] = {
    "shell": {"step_env": True, "step_cwd": True, "commands": ("cmd", "run")},
    "python": {"step_env": True},
    "plan": {"step_env": True, "step_cwd": True},
}


@functools.cache
def builtin_registry() -> ToolRegistry:
    """The registry of built-in tools (shared: treat it as read-only)."""
    registry = ToolRegistry()
    for name, fn, description, schema, render in _BUILTINS:
        registry.register(ToolSpec(name, fn, description, schema, render, **_TAKES.get(name, {})))
    return registry


def tool_spec(tool: str) -> ToolSpec | None:
    """The registered tool `tool` (None: an MCP tool, an unknown one)."""
    return builtin_registry().get(tool)


def renderer(tool: str) -> RenderFn:
    """How the arguments of `tool` are rendered: its own way, else plainly (an MCP tool, a
    tool without one)."""
    spec = builtin_registry().get(tool)
    return render_args if spec is None or spec.render is None else spec.render

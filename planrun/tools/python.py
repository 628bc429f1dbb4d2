"""The `python` tool: call `package.module:attr(**kwargs)` in-process; the result must be JSON.

The step's environment (dotenv values, plan and step `env`) is planrun's `os.environ` while the
call runs (planrun.tools.environ)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import json
import os
import sys
import traceback
from typing import Any

from planrun.text import type_name
from planrun.tools import check_args
from planrun.tools.base import ToolContext, ToolFailed
from planrun.tools.capture import captured
from planrun.tools.environ import GATE, in_thread, step_overlay
from planrun.tools.pymodules import importable


async def run_python(args: dict[str, Any], ctx: ToolContext) -> Any:
    """Import and call `function` with `kwargs`; sync functions run in a worker thread."""
    # `env` is the step's own (SPEC 13: planrun.run.stepcall puts it there), not written in args.
    check_args("python", args, ("function",), ("kwargs", "env"))
    target = args["function"]
    if not isinstance(target, str) or ":" not in target:
        raise ToolFailed(
            f"python: 'function' must be 'package.module:attr', got {target!r}"
            if isinstance(target, str)
            else f"python: 'function' must be a string, got {type_name(target)}"
        )
    kwargs = args.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ToolFailed(f"python: 'kwargs' must be a mapping, got {type_name(kwargs)}")

    release = await GATE.enter(step_overlay(ctx.env, args.get("env"), "python"))
    try:
        value = await _run(target, kwargs, ctx)
    finally:
        release()
    try:
        # The round trip gives the value the state file and a resumed run will see.
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        raise ToolFailed(
            f"function {target} returned a non-JSON value of type {type(value).__name__}"
        ) from None


async def _run(target: str, kwargs: dict[str, Any], ctx: ToolContext) -> Any:
    """Import and call the function, its prints captured as the step's output."""
    fn = await _load(target, ctx.cwd)
    with captured() as capture:
        try:
            return await _call(fn, kwargs, target)
        except ToolFailed as exc:
            printed = capture.text().rstrip("\n")
            if printed:  # what it printed before failing comes first, then the traceback
                exc.detail = f"{printed}\n{exc.detail}" if exc.detail else printed
            raise
        finally:
            # Its prints are its output: shown with the step (or live with --stream).
            ctx.output = capture.text() or None
            if ctx.on_output is not None:
                for stream, line in capture.lines():
                    ctx.on_output(stream, line)


async def _call(fn: Any, kwargs: dict[str, Any], target: str) -> Any:
    """Call the function; whatever it raises, sys.exit and Ctrl-C-like exceptions included,
    ends only this step (a ToolFailed), never planrun."""
    try:
        if inspect.iscoroutinefunction(fn):
            value = await fn(**kwargs)
        else:
            # A thread keeps the event loop (other steps, output) going during a slow call.
            # It cannot be interrupted: a cancelled step leaves the call to finish on its own.
            value, raised = await in_thread(_in_thread, fn, kwargs)
            if raised is not None:
                raise raised
            if inspect.isawaitable(value):
                value = await value
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # planrun stops the step (a timeout, an abort, Ctrl-C)
        # The function's own: a failure like any exception, never an interrupted step.
        raise ToolFailed(_message(exc), detail=_user_traceback(exc)) from None
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:
            return None  # a clean exit: the function is done and returned nothing
        raise ToolFailed(f"python: {target} called sys.exit({exc.code!r})") from None
    except BaseException as exc:  # KeyboardInterrupt and GeneratorExit are the step's own too
        raise ToolFailed(_message(exc), detail=_user_traceback(exc)) from None
    return value


def _message(exc: BaseException) -> str:
    """`Type: message`, or the type alone when there is no message or its str() fails (the
    function's exception is named, not the error of showing it)."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _in_thread(fn: Any, kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """Call `fn` and hand back what it raised as a value: a future holding GeneratorExit
    would be thrown into the awaiting task, which closes its await chain and so skips every
    handler below the task's own coroutine. (in_thread keeps the step's environment until the
    call ends, even when its step was cancelled meanwhile.)"""
    try:
        return fn(**kwargs), None
    except BaseException as exc:
        return None, exc


def _user_traceback(exc: BaseException) -> str | None:
    """The traceback from the user's function down, without planrun's and asyncio's frames
    (None when none of its frames is the user's)."""
    ours = (
        os.path.dirname(asyncio.__file__),
        os.path.dirname(concurrent.futures.__file__),
        __file__,
    )
    tb = exc.__traceback__
    while (
        tb is not None
        and tb.tb_next is not None
        and tb.tb_frame.f_code.co_filename.startswith(ours)
    ):
        tb = tb.tb_next
    if tb is None or tb.tb_frame.f_code.co_filename.startswith(ours):
        return None
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()


async def _load(target: str, cwd: str) -> Any:
    module_name, _, attr_path = target.partition(":")
    if not module_name or not attr_path:
        raise ToolFailed(f"python: 'function' must be 'package.module:attr', got {target!r}")
    # Appended, not prepended: a user's `json.py` must not shadow what planrun itself imports.
    # What is imported from it is forgotten when the run ends (planrun.tools.pymodules).
    importable(cwd)
    try:
        module = sys.modules.get(module_name)
        # A module another step is still importing is in sys.modules half-made: wait for it.
        if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
            # First imports can be slow (pandas...); keep the event loop free meanwhile.
            module = await in_thread(importlib.import_module, module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise ToolFailed(f"python: no module named {module_name!r}") from None
        raise ToolFailed(f"python: cannot import {module_name}: {exc}") from None
    except Exception as exc:
        raise ToolFailed(
            f"python: cannot import {module_name}: {type(exc).__name__}: {exc}",
            detail=_user_traceback(exc),
        ) from None
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ToolFailed(f"python: {module_name} has no attribute {attr_path!r}") from None
    if not callable(obj):
        raise ToolFailed(f"python: {target} is not callable (type {type(obj).__name__})")
    return obj

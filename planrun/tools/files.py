"""The `read_file` and `write_file` tools: UTF-8 text in, text or JSON out, written atomically."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from planrun.atomicwrite import atomic_write, not_replaceable
from planrun.inputfiles import NotARegularFile, read_regular_file
from planrun.tools import check_args, path_arg
from planrun.tools.base import MAX_RESULT_BYTES, ToolContext, ToolFailed, resolve_path


async def run_read_file(args: dict[str, Any], ctx: ToolContext) -> str:
    """The text of the file at `path` (relative to planrun's working directory), verbatim."""
    check_args("read_file", args, ("path",))
    path = path_arg("read_file", args)
    # A thread, so that a large file does not stall other steps' output.
    return await asyncio.to_thread(_read_text, path, resolve_path(path, ctx))


async def run_write_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Write `content` to `path` atomically; result `{path, bytes}` with `path` as given."""
    check_args("write_file", args, ("path", "content"))
    path = path_arg("write_file", args)
    content = args["content"]
    if isinstance(content, str):
        data = content.encode("utf-8")
    else:
        try:
            data = (json.dumps(content, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise ToolFailed(f"write_file: 'content' is not JSON-serialisable: {exc}") from None
    await asyncio.to_thread(_write_atomic, path, resolve_path(path, ctx), data)
    return {"path": path, "bytes": len(data)}


def _read_text(shown: str, path: str) -> str:
    # Only a regular file, and only up to MAX_RESULT_BYTES: a FIFO would block the read
    # forever, a device or a huge file would fill memory (the text is the step's result).
    try:
        data = read_regular_file(path, MAX_RESULT_BYTES)
        return data.decode("utf-8")  # \r\n kept as written: the file's text verbatim
    except FileNotFoundError:
        raise ToolFailed(f"no such file: {shown}") from None
    except NotARegularFile as exc:
        if exc.kind == "a directory":
            raise ToolFailed(f"is a directory, not a file: {shown}") from None
        raise ToolFailed(f"{shown} is {exc.kind}, not a regular file") from None
    except PermissionError:
        raise ToolFailed(f"permission denied: {shown}") from None
    except UnicodeDecodeError as exc:
        raise ToolFailed(f"not UTF-8 text: {shown} (byte {exc.start})") from None
    except OSError as exc:
        raise ToolFailed(f"cannot read {shown}: {exc.strerror or exc}") from None


def _write_atomic(shown: str, path: str, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`. A symbolic link
    is written through, as `echo x > link` does: the file it names gets the content (made if
    missing), the link stays. Only a regular file is replaced: renamed over, a FIFO or a
    device (for root, `/dev/null` itself) would become a plain file."""
    path = os.path.realpath(path)
    kind = not_replaceable(path)
    if kind is not None and kind != "a directory":
        raise ToolFailed(f"{shown} is {kind}, not a regular file")
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    except FileExistsError:
        raise ToolFailed(f"cannot create the directory for {shown}: a file is in the way") from None
    except OSError as exc:
        raise _write_failed(shown, exc) from None
    if os.path.isdir(path):
        raise ToolFailed(f"is a directory, not a file: {shown}")
    try:  # the existing file's mode, or the one a plain open() would give
        atomic_write(path, data, _existing_mode(path), new=0o666)
    except OSError as exc:
        raise _write_failed(shown, exc) from None


def _write_failed(shown: str, exc: OSError) -> ToolFailed:
    if isinstance(exc, PermissionError):
        return ToolFailed(f"permission denied: {shown}")
    return ToolFailed(f"cannot write {shown}: {exc.strerror or exc}")


def _existing_mode(path: str) -> int | None:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return None

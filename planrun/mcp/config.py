"""MCP config files (`.mcp.json`, Claude, Cursor, VS Code): read, variables expanded, each
server entry checked."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

from planrun import untrusted_json
from planrun.errors import UsageError
from planrun.inputfiles import NotARegularFile, read_regular_file
from planrun.plan.definition import ServerEntry, transport_kind
from planrun.plan.dotenv import MAX_DOTENV_BYTES, dotenv_pairs
from planrun.suggest import did_you_mean

HTTP_TYPES = ("http", "streamable-http", "sse")
STDIO_TYPES = ("stdio",)

# Extra keys that client UIs (Claude, Cursor, Cline, VS Code) keep in their entries; they
# mean nothing to planrun, so a pasted config file loads without complaint.
_IGNORED_KEYS = frozenset(
    {
        "disabled",
        "alwaysAllow",
        "autoApprove",
        "timeout",
        "description",
        "dev",
        "gallery",
        "version",
    }
)
_STDIO_KEYS = frozenset({"type", "command", "args", "env", "cwd", "envFile"})
_HTTP_KEYS = frozenset({"type", "url", "headers"})


def parse_mcp_config(path: str) -> dict[str, ServerEntry]:
    """Load a `.mcp.json` / Claude / Cursor (`mcpServers`) or VS Code (`servers`) file.

    Returns server name -> entry, each either stdio (type "stdio", command, args, env, cwd,
    envFile) or remote (type, url, headers), its type always set. The file's own variables are expanded
    here (`${VAR}` / `${VAR:-default}` from the environment as Claude Code does, and VS Code's
    `${workspaceFolder}`, `${userHome}`, `${env:VAR}`), so the entries hold plain values.
    Raises UsageError with a one-line message on any problem.
    """
    try:
        text = read_regular_file(path).decode("utf-8")  # a FIFO is refused, never read
    except NotARegularFile as exc:
        raise UsageError(f"{path}: cannot read MCP config: it is {exc.kind}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read MCP config: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: cannot read MCP config: not UTF-8 text") from None
    try:
        doc = untrusted_json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except ValueError:  # a number too long for Python to read, or nesting too deep
        raise UsageError(f"{path}: invalid JSON: a number too long or nesting too deep") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: an MCP config must be a JSON object")
    key = "mcpServers" if "mcpServers" in doc else "servers" if "servers" in doc else None
    if key is None:
        raise UsageError(f"{path}: no 'mcpServers' (Claude, Cursor) or 'servers' (VS Code) object")
    servers = doc[key]
    if not isinstance(servers, dict):
        raise UsageError(f"{path}: '{key}' must be an object of name -> server entry")

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(folder) == ".vscode":
        folder = os.path.dirname(folder)
    out: dict[str, ServerEntry] = {}
    for name, raw in servers.items():
        where = f"{path}: server '{name}'"
        if not isinstance(raw, dict):
            raise UsageError(f"{where}: entry must be an object")
        if raw.get("disabled") is True:
            continue
        expanded = _expand_config_vars(raw, folder, where)
        out[name] = normalize_server_entry(expanded, where)
    return out


def normalize_server_entry(entry: dict[str, Any], where: str) -> ServerEntry:
    """Check one server entry; the ServerEntry, its type filled in (raises UsageError)."""
    kind = transport_kind(entry.get("type"), entry.get("url"), entry.get("command"))
    if kind not in STDIO_TYPES + HTTP_TYPES:
        raise UsageError(
            f"{where}: unknown type {kind!r} (expected stdio, http, sse or streamable-http)"
        )
    allowed = _STDIO_KEYS if kind == "stdio" else _HTTP_KEYS
    unknown = sorted(set(entry) - allowed - _IGNORED_KEYS)
    if unknown:
        raise UsageError(
            f"{where}: unknown key {unknown[0]!r} for a {kind} server{suggest_name(unknown[0], allowed)}"
        )
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise UsageError(f"{where}: 'command' must be a non-empty string")
        args = entry.get("args", [])
        if not isinstance(args, list):
            raise UsageError(f"{where}: 'args' must be a list")
        env = entry.get("env") or {}
        if not isinstance(env, dict):
            raise UsageError(f"{where}: 'env' must be an object")
        for opt in ("cwd", "envFile"):
            if entry.get(opt) is not None and not isinstance(entry[opt], str):
                raise UsageError(f"{where}: '{opt}' must be a string")
        return ServerEntry(
            type="stdio",
            command=command,
            args=[str(a) for a in args],
            env={str(k): "" if v is None else str(v) for k, v in env.items()},
            cwd=entry.get("cwd"),
            envFile=entry.get("envFile"),
        )
    url = entry.get("url")
    if not isinstance(url, str) or not url:
        raise UsageError(f"{where}: 'url' must be a non-empty string")
    headers = entry.get("headers") or {}
    if not isinstance(headers, dict):
        raise UsageError(f"{where}: 'headers' must be an object")
    return ServerEntry(
        type=kind,  # type: ignore[arg-type]  # one of HTTP_TYPES: checked above
        url=url,
        headers={str(k): str(v) for k, v in headers.items()},
    )


_CONFIG_VAR = re.compile(r"\$\{([^}]*)\}")


def _expand_config_vars(value: Any, folder: str, where: str) -> Any:
    """Expand the variables the config file's own client would expand."""
    if isinstance(value, dict):
        return {k: _expand_config_vars(v, folder, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_config_vars(v, folder, where) for v in value]
    if not isinstance(value, str):
        return value

    def repl(m: re.Match[str]) -> str:
        body = m.group(1)
        if body == "workspaceFolder":
            return folder
        if body == "userHome":
            return os.path.expanduser("~")
        if body.startswith("env:"):
            return os.environ.get(body[4:], "")
        if body.startswith("input:"):
            raise UsageError(
                f"{where}: VS Code input variable ${{{body}}} is not supported; use ${{env:NAME}}"
            )
        name, sep, default = body.partition(":-")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"{where}: unsupported variable ${{{body}}}")
        if name in os.environ:
            return os.environ[name]
        if sep:
            return default
        raise UsageError(
            f"{where}: environment variable {name} is not set (write ${{{name}:-default}} for a default)"
        )

    return _CONFIG_VAR.sub(repl, value)


def suggest_name(word: str, choices: Iterable[str]) -> str:
    hint = did_you_mean(word, choices)
    return f" ({hint})" if hint else ""


def load_env_file(path: str) -> dict[str, str]:
    """Read an `envFile` by the rules of a plan's `dotenv:` files: PlanInvalid at file:line:col
    for a bad line, OSError for a file that cannot be read (never a FIFO) or is over 1 MiB."""
    return dotenv_pairs(read_regular_file(path, MAX_DOTENV_BYTES), path)

"""The `resume with: ...` hint of a failed or interrupted run: the command that resumes the
same selection, with the targets, `--var`s and options that selected the run and the words
after `--` (`cli_args`), quoted for the shell. A `--var` of a secret is left out and named in a shell comment at the end (its value is
never shown, and `***` would resume with the wrong value)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from planrun.cache import url_userinfo
from planrun.plan.defaultplan import looks_like_plan
from planrun.plan.discovery import INVOCATION_DIR
from planrun.plan.params import CLI_ARGS, GivenText
from planrun.run.request import RunRequest

__all__ = ["resume_hint"]

# Options that decide what a resume runs and how (repeated as given); the others (output,
# reports...) are the reader's to add. The caches are repeated: a resumed CI job shares what
# the run shared (its --cache-dir, the remote), and a read-only run (a pull-request build)
# must not upload when resumed.
_REPEATED = (
    ("vars_file", "--vars-file"),
    ("state", "--state"),
    ("cache_dir", "--cache-dir"),
    ("mcp_config", "--mcp-config"),
    ("planner", "--planner"),
    ("remote_cache_timeout", "--remote-cache-timeout"),
)


def resume_hint(
    req: RunRequest,
    targets: Iterable[str] | None,
    secrets: Iterable[str],
    params: Mapping[str, Any] | None = None,
) -> str:
    """`planrun resume PLAN [TARGET...] [--var K=V...] [options]` for this run; `targets`: the
    ids it selected (its targets as given, or those a resume read from the state); `params`:
    the plan's (a param's `--var` is read by its type, not as YAML). A default plan found in a
    parent directory is not named: the resume, started where the run was, finds it again."""
    words = ["planrun", "resume"] if req.plan_found else ["planrun", "resume", req.plan]
    for t in req.only or targets or ():
        plan_like = req.plan_found and len(words) == 2 and looks_like_plan(t, os.getcwd())
        words.append(f"--only={t}" if t.startswith("-") or plan_like else t)
    hidden = set(secrets)
    left_out = []
    passed = req.variables.get(CLI_ARGS)
    after = passed if isinstance(passed, list) and all(isinstance(w, str) for w in passed) else []
    for name, value in req.variables.items():
        if name == INVOCATION_DIR or (name == CLI_ARGS and value is after):
            continue  # planrun's own: set again by the resume (the words after `--` at the end)
        if name in hidden:
            left_out.append(name)
        else:
            words += ["--var", f"{name}={_as_given(value, (params or {}).get(name))}"]
    for attribute, option in _REPEATED:
        value = getattr(req, attribute)
        if value:
            words += [option, _as_given_path(req, str(value)) if option in _PATHS else str(value)]
    remote = req.remote_cache
    remote_left_out = bool(remote) and bool(url_userinfo(str(remote)))  # never in a hint
    if remote and not remote_left_out:
        words += ["--remote-cache", remote]
    if req.remote_cache_read_only:
        words.append("--remote-cache-read-only")
    if req.no_cache:  # a run kept off the cache: its resume too
        words.append("--no-cache")
    if req.keep_going:
        words.append("--keep-going")
    if after:
        words += ["--", *after]
    command = " ".join(map(_quote, words))
    notes = []
    if left_out:
        names = " ".join(f"--var {name}=..." for name in left_out)
        notes.append(f"and {names}: secrets are not repeated")
    if remote_left_out:
        notes.append("and --remote-cache URL: its password is not repeated")
    if notes:
        command += "  # " + "; ".join(notes)
    return command


_PATHS = frozenset(("--vars-file", "--state", "--mcp-config", "--cache-dir"))


def _as_given_path(req: RunRequest, path: str) -> str:
    """A path option as it was given where planrun started: a run whose plan was found in a
    parent directory has its paths joined to that directory (the resume starts there too)."""
    started = req.variables.get(INVOCATION_DIR)
    if req.plan_found and isinstance(started, str) and path.startswith(started + os.sep):
        return path[len(started) + 1 :]
    return path


_SAFE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)


def _quote(word: str) -> str:
    """`word` as one shell word (shlex.quote's rule; shlex itself is not imported at start)."""
    if _SAFE.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def _as_given(value: Any, param: Any) -> str:
    """The text `--var` reads back as `value`: a `--var`'s own text as typed; a param's value
    as its type reads it (a string as is); anything else as `_as_typed`."""
    if isinstance(value, GivenText):
        return str(value)
    if param is not None:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return _as_typed(value)


def _as_typed(value: Any) -> str:
    """The text `--var` reads back as `value`: a string as it is when it reads back as itself,
    anything else as JSON (YAML's flow style reads it)."""
    from planrun.plan.expressions import parse_cli_value

    if isinstance(value, str):
        try:
            if parse_cli_value(value) == value:
                return value
        except ValueError:  # `.nan` as text: quoted, or --var would refuse it
            pass
    return json.dumps(value, ensure_ascii=False)

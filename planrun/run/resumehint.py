"""The `resume with: ...` hint of a failed or interrupted run: the command that resumes the
same selection the same way, with the targets, `--var`s and options that selected the run and
decided how it ran, and the words after `--` (`cli_args`), quoted for the shell (one line: a
word with a line break or a control character is written `$'…'`). A `--var` of a secret is
left out and named in a shell comment at the end (its value is never shown, and `***` would
resume with the wrong value); so is a URL or address holding a password."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from planrun.cache import url_userinfo
from planrun.plan.discovery import INVOCATION_DIR, looks_like_plan
from planrun.plan.params import CLI_ARGS, GivenText
from planrun.run.request import RunRequest
from planrun.text import shell_word

__all__ = ["resume_hint"]

# Options that decide what a resume runs and how (repeated as given); the others (output,
# reports...) are the reader's to add. The caches are repeated: a resumed CI job shares what
# the run shared (its --cache-dir, the remote), and a read-only run (a pull-request build)
# must not upload when resumed. So are -j, the executor and the grace: a run limited to one
# step at once (a shared machine) or sent to a Dask cluster is resumed the same way. Never
# repeated: --force (a forced step is never kept, so the resume would run again what the run
# did) and --yes (an approval is given again, not carried by a copied line).
_REPEATED = (
    ("vars_file", "--vars-file"),
    ("state", "--state"),
    ("jobs", "--jobs"),
    ("executor", "--executor"),
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
    words = ["planrun"]
    for directory in req.directories:  # where the run was, from where its command was typed
        words += ["-C", directory]
    words += ["resume"] if req.plan_found else ["resume", req.plan]
    first = len(words)  # a first target that looks like a plan is written --only=ID
    for t in req.only or targets or ():
        plan_like = req.plan_found and len(words) == first and looks_like_plan(t, os.getcwd())
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
    notes = []
    for option, value, what in (
        ("--address", req.address, "ADDRESS"),
        ("--remote-cache", req.remote_cache, "URL"),
    ):
        if value and url_userinfo(str(value)):  # a password is never in a hint
            notes.append(f"and {option} {what}: its password is not repeated")
        elif value:
            words += [option, str(value)]
    if req.grace is not None:
        words += ["--grace", _seconds(req.grace)]
    if req.remote_cache_read_only:
        words.append("--remote-cache-read-only")
    if req.no_cache:  # a run kept off the cache: its resume too
        words.append("--no-cache")
    if req.keep_going:
        words.append("--keep-going")
    if after:
        words += ["--", *after]
    command = " ".join(map(shell_word, words))
    if left_out:  # each name quoted too: a name holding a line break would end the comment
        names = " ".join(f"--var {shell_word(name + '=...')}" for name in left_out)
        notes.insert(0, f"and {names}: secrets are not repeated")
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


def _seconds(seconds: float) -> str:
    """`--grace`'s value as a duration that reads back as the same seconds (`0.00001s`, never
    `1e-05s`, which no duration is)."""
    from decimal import Decimal

    text = format(Decimal(repr(seconds)), "f")
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "s"


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

"""The modules `python` steps import from their directories belong to the run that imported them.

A `python` step imports `module:attr` with its working directory at the end of `sys.path`. A
process that runs plan after plan (`planrun run --watch`, `planrun mcp`, a library caller) kept
what the first run imported: a later run called that code, not the file as it is now (an edited
`helpers.py`, another plan's `helpers.py`), and `sys.path` kept every directory. Now, once the
last of the runs under way in the process ends, the modules imported meanwhile from a directory
a `python` step imported from are forgotten (`sys.modules`), and the directories the tool put
on `sys.path` leave it. Overlapping runs (`planrun mcp`) share what they import until then.

What is not the plan's own stays imported: modules imported before the runs' first `python`
step, and those of the interpreter's installation and virtual environment, of planrun itself
and of any other `sys.path` directory inside the step's (a project's `.venv`), which an import
cannot always load twice in one process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_runs = 0  # runs under way in this process
_before: set[str] | None = None  # sys.modules' names before their first python step's import
_directories: set[str] = set()  # the directories python steps imported from meanwhile
_added: list[str] = []  # those of them the python tool appended to sys.path


@contextlib.contextmanager
def run_scope() -> Iterator[None]:
    """A run: what its `python` steps import is forgotten when it, and every run overlapping
    it, have ended."""
    global _runs
    with _lock:
        _runs += 1
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0:
                _forget()


def importable(directory: str) -> None:
    """Make `directory` importable (at the end of sys.path) for the import a `python` step is
    about to make; what is imported from it is the runs' under way."""
    global _before
    with _lock:
        if _runs and _before is None:
            _before = set(sys.modules)
        if _runs:
            _directories.add(directory)
        if directory not in sys.path:
            sys.path.append(directory)
            if _runs:
                _added.append(directory)


def _forget() -> None:
    global _before
    before, directories, added = _before, set(_directories), list(_added)
    _before = None
    _directories.clear()
    _added.clear()
    for directory in added:
        with contextlib.suppress(ValueError):
            sys.path.remove(directory)
    if before is None:
        return
    roots = _forms(directories)
    kept = _forms(
        {
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # planrun's package
        }
        | {p for p in sys.path if p and any(_under(_dir(p), r) for r in roots)}
    )
    for name in set(sys.modules) - before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if not isinstance(file, str):
            continue
        file = os.path.abspath(file)
        if any(_under(file, r) for r in roots) and not any(_under(file, k) for k in kept):
            sys.modules.pop(name, None)


def _forms(directories: set[str]) -> set[str]:
    """Each directory as given (absolute) and with its links resolved, ending in a separator."""
    out: set[str] = set()
    for d in directories:
        out.add(_dir(d))
        out.add(_dir(os.path.realpath(d)))
    return out


def _dir(path: str) -> str:
    return os.path.join(os.path.abspath(path), "")


def _under(path: str, directory: str) -> bool:
    """`path` is inside `directory` (which ends in a separator), not `directory` itself."""
    return path.startswith(directory) and path != directory

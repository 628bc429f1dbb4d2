"""Report files never land on a file the run reads, nor on each other.

`--junit plan.yaml` (a slip of the keyboard) would replace the plan with XML, and `--events`
would append JSON lines to it: the files a run writes (`--events`, `--junit`, `--report`,
`report -o`) are checked against the files it reads (the plan, the vars file, the state file
and its journal, the dotenv files) and against each other before anything runs. Two names are
the same file when they lead to the same inode (links and `..` included), or, for files not
yet there, to the same real path.
"""

from __future__ import annotations

import os

from planrun.errors import UsageError

__all__ = ["refuse_clobbering"]

Named = tuple[str, str]  # (what it is, as said in the message: "--junit", "the plan file"; path)


def _identity(path: str) -> tuple[int, int] | str:
    try:
        st = os.stat(path)
    except OSError:  # not there yet (or unreadable): compared by where it would be made
        return os.path.realpath(path)
    return (st.st_dev, st.st_ino)


def refuse_clobbering(outputs: list[Named], inputs: list[Named], cwd: str) -> None:
    """UsageError when an output names an input, or two outputs name one file."""
    seen: dict[tuple[int, int] | str, Named] = {}
    for what, path in inputs:
        seen.setdefault(_identity(os.path.join(cwd, path)), (what, path))
    outs: dict[tuple[int, int] | str, Named] = {}
    for option, path in outputs:
        key = _identity(os.path.join(cwd, path))
        if key in seen:
            what, _ = seen[key]
            raise UsageError(f"{option} {path} is {what}: refusing to overwrite it")
        if key in outs:
            other, _ = outs[key]
            raise UsageError(f"{other} and {option} name the same file {path}: give each its own")
        outs[key] = (option, path)

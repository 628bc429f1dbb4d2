"""`plan.schema.json` beside a plan: the schema an editor reads offline, written once, whole."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: pydantic (the schema) only when writing it.
import contextlib
import errno
import json
import os

SCHEMA_FILE = "plan.schema.json"
"""The name `planrun init`'s first line gives the schema (`$schema=./plan.schema.json`): the
YAML language server reads a relative path from the plan's own directory."""


def schema_text() -> str:
    """The JSON Schema of plan files, as `planrun schema` prints it."""
    from planrun.plan.model import plan_json_schema

    return json.dumps(plan_json_schema(), indent=2) + "\n"


def schema_path(plan_path: str) -> str:
    """Where the schema of the plan at `plan_path` goes: plan.schema.json beside it."""
    return os.path.join(os.path.dirname(plan_path), SCHEMA_FILE)


def write_schema_beside(plan_path: str) -> bool:
    """Write the schema as plan.schema.json in the directory of `plan_path` (write_new): False
    when a file of that name (or a symlink, even a dangling one) is there, which is kept."""
    path = schema_path(plan_path)
    if os.path.lexists(path):
        return False  # before the schema is made: that imports pydantic
    return write_new(path, schema_text().encode())


def write_new(path: str, data: bytes) -> bool:
    """Create the file `path` holding `data`, whole or not at all; False, nothing written, when
    `path` exists (a symlink, even a dangling one, is never written through). Raises OSError
    when it cannot be written (a full disk); nothing of it is left then.

    The data goes to a temporary file beside `path` that is then linked in under its name: a
    link, unlike a rename, fails when the name exists, so no file is ever replaced (one made
    meanwhile neither) and none is seen half written.
    """
    if os.path.lexists(path):
        return False
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return _link_new(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _link_new(tmp: str, path: str) -> bool:
    """Give `tmp` the name `path` unless that exists (False then)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False  # made meanwhile: that one is kept
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        # a file system without hard links (FAT): a rename, after one more look
        if os.path.lexists(path):
            return False
        os.rename(tmp, path)
    return True

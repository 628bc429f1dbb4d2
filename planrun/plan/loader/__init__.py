"""Read a plan file (YAML or JSON) into plain data, keeping the source position of every key and value.

Design, in short (docs/loader.md has the user-facing rules):

* YAML in the common block-style subset is read by a small line-based reader (fast path,
  loader/_fastyaml.py; PLANRUN_NO_FAST_YAML=1 turns it off);
  at anything outside that subset it gives up and libyaml (PyYAML's C parser) composes
  nodes, after which one walk builds plain data with our own scalar rules (JSON types
  only: no dates, no yes/no booleans, no Python objects, no unknown tags).  libyaml is
  the reference; the tests check that the fast path agrees with it.  The garbage
  collector is paused while either runs.
* JSON is parsed by ``json.loads`` (fast, exact error positions).
* Positions are found lazily: nothing position-related is built while loading.  The
  first ``Document.pos`` call re-composes the YAML text (or scans the JSON text) once and
  then walks down the requested path.  Loading stays fast and light, and only a plan
  that has something to report pays for positions.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the YAML reader (PyYAML), the JSON reader
# and positions only for the files that need them (a plan from the plan cache needs none).
import os
from typing import Any

from planrun.errors import PlanInvalid, UsageError
from planrun.inputfiles import NotARegularFile, read_regular_file
from planrun.plan.loader._base import (
    TOO_DEEP,
    Document,
    LazyDocument,
    NotJsonNumber,
    check_top_level,
    gc_paused,
    invalid,
    utf8_text,
)

# PyYAML (loader/_compose.py) is imported on first use: when the fast reader (_fastyaml.py)
# gives up, or a position is asked for (_positions.py). A plan from the plan cache
# (planrun/plan/cache.py) or in the fast reader's subset costs no `import yaml`.

__all__ = [
    "Document",
    "LazyDocument",
    "NotJsonNumber",
    "load_bytes",
    "load_document",
    "load_text",
    "read_plan",
]

_JSON_EXTENSIONS = {".json"}
_YAML_EXTENSIONS = {".yaml", ".yml"}


# --------------------------------------------------------------------------- entry points


def load_document(path: str | os.PathLike[str]) -> Document:
    """Read and parse the plan file at `path`.

    Raises UsageError if the file does not exist, PlanInvalid for anything wrong with it.
    """
    file = os.fspath(path)
    return load_bytes(read_plan(file), file)


def read_plan(path: str, file: str | None = None) -> bytes:
    """The bytes of the plan file at `path`; UsageError if it does not exist, PlanInvalid if it
    cannot be read or is not a regular file. Errors name it `file` (as the user gave it;
    default `path`)."""
    file = path if file is None else file
    try:
        return read_regular_file(path)  # a FIFO or a device is refused, never opened blocking
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"plan file not found: {file}") from None
    except NotARegularFile as exc:
        raise invalid(file, 1, 1, f"{file} is {exc.kind}, not a plan file") from None
    except OSError as exc:
        raise invalid(file, 1, 1, f"cannot read plan file: {exc.strerror or exc}") from None


def load_bytes(raw: bytes, file: str) -> Document:
    """Parse the bytes of the plan file `file` (its extension picks the format)."""
    suffix = os.path.splitext(file)[1].lower()
    fmt = "json" if suffix in _JSON_EXTENSIONS else "yaml" if suffix in _YAML_EXTENSIONS else None
    return _load(_decode(raw, file), file, fmt)


def load_text(text: str | bytes, file: str = "<inline>", fmt: str | None = None) -> Document:
    """Parse plan text; `fmt` is "yaml", "json" or None to sniff (JSON if it starts with { or [)."""
    if fmt not in (None, "yaml", "json"):
        raise ValueError(f"fmt must be 'yaml', 'json' or None, not {fmt!r}")
    if isinstance(text, bytes | bytearray):
        text = _decode(bytes(text), file)
    elif text.startswith("\ufeff"):
        text = text[1:]
    return _load(text, file, fmt)


def _load(text: str, file: str, fmt: str | None) -> Document:
    if not text.strip():
        raise invalid(file, 1, 1, "plan file is empty")
    if fmt is None and text.lstrip()[:1] in ("{", "["):
        # A file that merely looks like JSON may be YAML flow style ({a: 1}): if JSON
        # refuses it, give YAML a chance, and report the JSON problem if both refuse.
        try:
            return _load_json(text, file)
        except PlanInvalid as json_error:
            try:
                return _load_yaml(text, file)
            except PlanInvalid:
                raise json_error from None
    return _load_json(text, file) if fmt == "json" else _load_yaml(text, file)


def _load_json(text: str, file: str) -> Document:
    from planrun.plan.loader._json import load_json  # Lazy import: a YAML plan needs none of it

    return load_json(text, file)


def _decode(raw: bytes, file: str) -> str:
    """UTF-8 (a BOM is allowed); anything else is an error pointing at the first bad byte."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise invalid(file, 1, 1, "plan file is not UTF-8 (it looks like UTF-16); save it as UTF-8")
    return utf8_text(raw, file, "plan file is not valid UTF-8")


def _load_yaml(text: str, file: str) -> Document:
    from planrun.plan.loader._positions import YamlLocator

    data = gc_paused(lambda: _parse_yaml(text, file))
    return Document(file, data, YamlLocator(text))


def _parse_yaml(text: str, file: str) -> Any:
    """Compose and build; runs with the GC paused.

    The node tree (~90 MB for a 10,000-step plan) is garbage once the data is built, and
    it is freed here, before the GC is resumed: otherwise the first collection afterwards
    would walk all of it.
    """
    from planrun.plan.loader._fastyaml import Bail, fast_yaml

    if os.environ.get("PLANRUN_NO_FAST_YAML") != "1":
        try:
            return fast_yaml(text)
        except Bail:
            pass
    # PyYAML only now: a plan in the fast reader's subset never imports it.
    from yaml.nodes import ScalarNode

    from planrun.plan.loader._compose import (
        Builder,
        BuildError,
        compose_or_raise,
        node_diagnostic,
        node_error,
    )

    root = compose_or_raise(text, file)
    if root is None or (
        root.__class__ is ScalarNode
        and root.tag.__class__ is slice
        and root.value == ""
        and root.style == ""
    ):
        raise invalid(file, 1, 1, "plan file is empty")
    builder = Builder(text)
    try:
        data = builder.build(root)
    except BuildError as exc:
        diagnostics = node_error(file, exc.node, exc.message).diagnostics
        raise (NotJsonNumber if builder.not_finite else PlanInvalid)(diagnostics) from None
    except RecursionError:
        raise invalid(file, 1, 1, TOO_DEEP) from None
    if builder.errors:
        diagnostics = [node_diagnostic(file, node, message) for node, message in builder.errors]
        diagnostics.sort(key=lambda diag: (diag.line, diag.col))
        raise (NotJsonNumber if builder.not_finite else PlanInvalid)(diagnostics)
    root_pos = (root.start_mark.line + 1, root.start_mark.column + 1)
    del root, builder
    check_top_level(data, file, lambda: root_pos)
    return data

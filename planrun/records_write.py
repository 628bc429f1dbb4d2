"""Writes planrun/records_written.py, the methods of every record (planrun.records), from the
records' own fields: `python -m planrun.records_write` after changing a record or adding one
(tests/test_records.py fails while the written module differs from what this writes).
"""

from __future__ import annotations

import importlib
import os
import sys

from planrun.records import auto_doc, fingerprint, methods_source, record_key

# The modules that define records (tests/test_records.py checks no other module does).
MODULES = (
    "planrun.errors",
    "planrun.plan.definition",
    "planrun.plan.expressions",
    "planrun.run.context",
    "planrun.run.request",
    "planrun.run.scope",
    "planrun.state.model",
    "planrun.tools.base",
)

HEADER = '''"""Generated from the records' fields by `python -m planrun.records_write`: do not edit.

For each record of planrun.records: the function that makes its methods, and the fingerprint of
the fields that function was written from (planrun.records uses it only while they are the same).
"""

# mypy: ignore-errors
# ruff: noqa
# fmt: off
'''


def records() -> list[type]:
    """Every record of MODULES, in the order of their keys."""
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            is_record = isinstance(value, type) and "__record_options__" in vars(value)
            if is_record and value.__module__ == name:
                found.append(value)
    return sorted(found, key=record_key)


def source() -> str:
    """The text of planrun/records_written.py."""
    parts = [HEADER]
    made = []
    for cls in records():
        parts.append("\n" + methods_source(cls))
        key = record_key(cls)
        doc = None if cls.__record_options__[1] else auto_doc(cls)  # type: ignore[attr-defined]
        maker = key.replace(".", "_")
        made.append(f"    {key!r}: ({fingerprint(cls)!r}, {maker}, {doc!r}),\n")
    parts.append("\nMAKERS = {\n" + "".join(made) + "}\n")
    return "".join(parts)


def main() -> int:
    """Writes the module next to this one."""
    text = source()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "records_written.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

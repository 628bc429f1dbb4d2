"""`planrun --help`, `planrun COMMAND --help` and `--version` answered without importing click.

The click commands stay the one source of the help: `python -m planrun.quickhelp` asks click
for every command's `--help` (at the 78 columns click uses for any terminal of 80 columns or
more, a pipe or a file) and for `--version`, and writes what it prints to
planrun/helptext.py; tests/test_quickhelp.py fails as soon as that file differs from what
click prints today. Anything else (a narrower terminal, more arguments) goes to click.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: click and the CLI only when the stored help
# must be (re)generated.
import contextlib
import io
import os
import sys

__all__ = ["stored_output", "generate_source"]

HELP_FLAGS = ("--help", "-h")
WIDTH = 78  # click's width at 80 columns and more: min(columns, 80) - 2
_TARGET = os.path.join(os.path.dirname(__file__), "helptext.py")


def _columns() -> int:
    """The terminal width as click reads it (shutil.get_terminal_size), without shutil."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def stored_output(args: list[str]) -> str | None:
    """What click would print for `planrun ARGS`, when that is stored; else None."""
    if not args or len(args) > 3:
        return None
    *path, flag = args
    if flag == "--version" and not path:
        key = flag
    elif flag in HELP_FLAGS:
        key = " ".join(path)
    else:
        return None
    from planrun.helptext import TEXTS

    text = TEXTS.get(key)
    if text is None or (key != "--version" and _columns() < WIDTH + 2):
        return None
    return text


# ---- generating planrun/helptext.py (imports click; never on the start-up path) ---------------


def _click_prints(args: list[str]) -> str:
    """What `planrun ARGS` prints on stdout through click, at a wide terminal."""
    import click.formatting

    from planrun.cli import main

    buf = io.StringIO()
    forced, click.formatting.FORCED_WIDTH = click.formatting.FORCED_WIDTH, WIDTH
    try:
        with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
            main.main(args=args, prog_name="planrun")
    finally:
        click.formatting.FORCED_WIDTH = forced
    return buf.getvalue()


def _command_paths() -> list[list[str]]:
    """Every command and sub-command, as the words that name it (the group itself: [])."""
    import click

    from planrun.cli import main

    paths: list[list[str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        paths.append(path)
        if isinstance(command, click.Group):
            for name in sorted(command.commands):
                walk(command.commands[name], [*path, name])

    walk(main, [])
    return paths


def generate_texts() -> dict[str, str]:
    """Every stored text, from click: key "COMMAND ..." for `--help`, "--version"."""
    texts: dict[str, str] = {}
    for path in _command_paths():
        text = _click_prints([*path, "--help"])
        for flag in HELP_FLAGS[1:]:
            if _click_prints([*path, flag]) != text:
                raise SystemExit(f"`planrun {' '.join(path)} {flag}` differs from --help")
        texts[" ".join(path)] = text
    texts["--version"] = _click_prints(["--version"])
    return texts


def generate_source() -> str:
    """The text of planrun/helptext.py."""
    import json

    lines = [
        '"""What click prints for `--help` of each command and for `--version` (generated)."""',
        "",
        "# Written by `python -m planrun.quickhelp` from the click commands; do not edit.",
        "# tests/test_quickhelp.py fails when this no longer matches what click prints.",
        "",
        "TEXTS = {",
    ]
    # JSON string syntax is Python's too, and in the quotes ruff's formatter keeps.
    lines += [f"    {json.dumps(k)}: {json.dumps(t)}," for k, t in generate_texts().items()]
    lines += ["}", ""]
    return "\n".join(lines)


def main() -> None:
    """Write planrun/helptext.py from the click commands."""
    with open(_TARGET, "w", encoding="utf-8") as f:
        f.write(generate_source())
    print(f"wrote {_TARGET}", file=sys.stderr)


if __name__ == "__main__":
    main()

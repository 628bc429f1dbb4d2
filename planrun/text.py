"""Text shown in one line: the first line of an error or a description, cut to a width; a value's
kind; a count and its noun; a duration; why a file operation failed, in plain words; a command
shown to be copied, its words quoted for the shell."""

from __future__ import annotations

import re
from typing import Any


def first_line(text: object, width: int | None = None) -> str:
    """The first non-blank-trimmed line of `text` ("" for None or blank), at most `width`
    characters (cut with "…")."""
    stripped = "" if text is None else str(text).strip()
    line = stripped.splitlines()[0] if stripped else ""
    if width is not None and len(line) > width:
        return line[: width - 1] + "…"
    return line


# A value's type as messages name it: (class, its JSON name, its kind in words or "" for its
# type's name); the first row that matches.
_NAMES: tuple[tuple[Any, str, str], ...] = (
    (bool, "boolean", "a boolean"),
    (int | float, "number", "a number"),
    (str, "string", "a string"),
    (list, "array", "a list"),
    (tuple, "array", ""),
    (dict, "object", "a mapping"),
)


def type_name(value: object) -> str:
    """The JSON name of a value's type, for messages (`string`, `object`, ...)."""
    return _named(value, 1) or type(value).__name__


def kind_of(value: object) -> str:
    """A JSON value's kind as messages name it: "null", "a boolean", "a number", "a string", ..."""
    return _named(value, 2) or f"a {type(value).__name__}"


def _named(value: object, column: int) -> str:
    if value is None:
        return "null"
    return next((row[column] for row in _NAMES if isinstance(value, row[0])), "")


def counted(n: int, word: str) -> str:
    """`1 step`, `2 steps`: a count and its noun, singular for one."""
    return f"{n} {word}{'s' if n != 1 else ''}"


def format_duration(seconds: object) -> str:
    """A duration as planrun shows it everywhere (console, live view, status, report, JUnit):
    0.42s, 12.3s, 2m03s, 1h02m; "-" when unknown (None, or not a number)."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return "-"
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def title_beyond_id(step_id: str, title: object) -> str | None:
    """A step's title where it says more than the step's id, else None: every view (the
    console, JUnit, the report) names a step by its id, then this title when there is one. A
    title is compared with the step's own id (`grid` for a sub-plan's `sp/grid`: an untitled
    step's title is its id), and an instance's (`lint[2]`) with its step's id too, ignoring
    case."""
    if not isinstance(title, str) or not title:
        return None
    own_id = step_id.rpartition("/")[2].casefold()
    said = title.casefold()
    if said == own_id or (own_id.endswith("]") and said == own_id.rpartition("[")[0]):
        return None
    return title


def os_cause(exc: OSError) -> str:
    """Why a file operation failed, in plain words (`a directory is in the way`), for a message
    that names the path itself: never the system's `[Errno 21] Is a directory: '...'`."""
    import errno  # Lazy import: only for an error

    causes = {
        errno.EISDIR: "a directory is in the way",
        errno.ENOTDIR: "a file is in the way of a directory",
        errno.ELOOP: "a symbolic link is in the way",
        errno.ENOENT: "it does not exist",
        errno.EEXIST: "something is in the way",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "the disk quota is used up",
        errno.EROFS: "the file system is read-only",
        errno.ENAMETOOLONG: "the name is too long",
    }
    cause = causes.get(exc.errno or 0)
    if cause is not None:
        return cause
    text = exc.strerror or first_line(exc) or type(exc).__name__
    return text[:1].lower() + text[1:]


# Compiled when a command is first shown (re's cache), not at import. _CONTROL: what a terminal
# could act on, or a shell line could not hold: C0 and C1 controls (the line break among them),
# DEL, and the lone surrogates a byte that is not UTF-8 was read as.
_SAFE = r"(?a)[\w@%+=:,./-]+"
_CONTROL = r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]"
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def shell_word(word: str) -> str:
    """`word` as one shell word for a command shown to be copied (shlex.quote's rule; shlex
    itself is not imported at start); one with a control character in `$'…'` with escapes, as
    bash's `printf %q` writes it, so the command stays one line that no terminal acts on."""
    if re.fullmatch(_SAFE, word):
        return word
    if not re.search(_CONTROL, word):
        return "'" + word.replace("'", "'\"'\"'") + "'"
    return "$'" + "".join(map(_escaped, word)) + "'"


def _escaped(char: str) -> str:
    """One character inside `$'…'`: a control character as its bytes (`\\x1b`; a C1 control
    as its two UTF-8 bytes, a surrogate as the byte it was read from)."""
    if char in _ESCAPES:
        return _ESCAPES[char]
    if not re.fullmatch(_CONTROL, char):
        return char
    try:
        data = char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte gives (from a JSON `\\ud800`)
        return f"\\u{ord(char):04x}"
    return "".join(f"\\x{byte:02x}" for byte in data)


def command_shown(*words: str) -> str:
    """A command a message tells the user to type, in quotes (`'planrun run p.yaml'`); one
    whose words need quoting for the shell is shown without them (`planrun run 'my plan.yaml'`),
    as quotes inside quotes could not be copied."""
    quoted = [shell_word(w) for w in words]
    line = " ".join(quoted)
    return f"'{line}'" if quoted == list(words) else line

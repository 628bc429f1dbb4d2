"""Values interpolated into a `shell` string `cmd` reach the command as data, whatever the quoting.

The command text is read the way /bin/sh reads it (quotes, `$(…)`, `${…}`, `$((…))`, backticks,
comments, here-documents) to learn the context of each `${…}`. Then:

- A value made only of characters no shell context gives a meaning to (`[A-Za-z0-9_./:,@%+-]`,
  not a reserved word) is written in place, so that plain commands stay readable; but not in
  a tilde prefix (`~${x}` would read it as a login name) nor inside `${…}` (`%` after `${y%`
  would make the operator `%%`).
- Any other value is passed in an environment variable, `PLANRUN_V_<n>`, and the command gets
  a reference to it fitting the context: `"${PLANRUN_V_0}"` unquoted, `${PLANRUN_V_0}` inside
  `"…"` and in here-document bodies, `'"${PLANRUN_V_0}"'` inside `'…'` (close, expand, reopen).
  The shell substitutes a parameter's value without reading it again as code, so `$(…)`,
  backticks, `$X`, quotes, backslashes and newlines in a value stay what they are.
- A here-document whose delimiter is quoted (`<<'EOF'`) expands nothing, so a reference would
  stay literal; when it holds a value, it is rewritten to the equivalent unquoted form (its
  text with `\\`, `$` and backticks escaped) and the value goes in by reference like above.
- An unquoted here-document body is lexed like "…"; in backticks `\\\\` (in "…" also `\\"`) is
  one character read again; a `case` pattern's `)` closes no `$(…)`.
- Inside `$((…))` (and bash's `((…))`) a value is evaluated as arithmetic: it must be an integer.

Hence no byte of a value ever becomes shell syntax: it is inert text or a parameter's value.
What cannot be done safely is a step error (a NUL byte, a value after a backslash...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ENV_PREFIX = "PLANRUN_V_"

_INERT = re.compile(r"[A-Za-z0-9_./:,@%+-]+")
_INTEGER = re.compile(r"-?[0-9]+")
_PATTERN_OPERATOR = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])[#%]")
_GLOB = re.compile(r"[*?[\\]")
_PLAIN_DELIMITER = re.compile(r"[A-Za-z0-9_.-]+")
_RESERVED = frozenset(
    {"case", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in"}
    | {"select", "then", "time", "until", "while"}
)
_OPERATOR_CHARS = frozenset(";&|()<> \t\n")
_BEFORE_COMMAND = frozenset(
    {"!", "{", "do", "elif", "else", "if", "then", "time", "until", "while"}
)


class QuotingError(Exception):
    """A value that cannot be put into the command safely (one line)."""


@dataclass(frozen=True, slots=True)
class Hole:
    """The n-th interpolated value in a command template."""

    index: int


class _Heredoc:
    """A here-document: its delimiter word and where its body is, with the holes in it."""

    __slots__ = ("delimiter", "quoted", "strip_tabs", "word", "body", "holes", "in_backticks")

    def __init__(
        self, delimiter: str, quoted: bool, strip_tabs: bool, word: tuple[int, int]
    ) -> None:
        self.delimiter = delimiter
        self.quoted = quoted
        self.strip_tabs = strip_tabs
        self.word = word  # the delimiter word's span in the items
        self.body = (0, 0)  # the body's span (terminator line excluded), once it is read
        self.holes: list[int] = []
        self.in_backticks = False  # they would undo the escaping of a rewritten body


class _Frame:
    """One open quoting context of the lexer (the innermost is the last on its stack)."""

    __slots__ = ("kind", "close", "depth", "in_dq", "word", "command", "cases")

    def __init__(self, kind: str, close: str = "", in_dq: bool = False) -> None:
        self.kind = kind  # cmd | sq | dq | heredoc | param | arith | comment
        self.close = close  # ends a cmd frame: ")" for $(…), "`" for backticks, "" at top level
        self.depth = 0  # brackets opened inside it
        self.in_dq = in_dq  # a ${…}, $((…)) or backticks in double quotes (or a here-document)
        self.word = ""  # a cmd frame's current word, as written (a value in it is a NUL)
        self.command = True  # whether that word is where a command name (or reserved word) goes
        self.cases = 0  # open `case … esac` in a cmd frame: a pattern's `)` closes no $(…)


Item = str | Hole


class _Lexer:
    """Finds the context of each hole in a command made of characters and holes."""

    def __init__(self, items: list[Item], start: int = 0, end: int | None = None) -> None:
        self.items = items
        self.i = start
        self.end = len(items) if end is None else end  # a here-document body is lexed alone
        self.stack = [_Frame("cmd")]
        self.contexts: dict[int, str] = {}
        self.glob_free: set[int] = set()  # values in a here-document's ${…#…} pattern
        self.heredocs: list[_Heredoc] = []
        self.pending: list[_Heredoc] = []
        self.escaped = False
        self.word_start = True
        self.tilde = False  # in an unquoted tilde prefix (`~user`): a value there is a name

    def at(self, k: int) -> Item | None:
        j = self.i + k
        return self.items[j] if j < self.end else None

    def run(self) -> None:
        while self.i < self.end:
            item = self.items[self.i]
            if isinstance(item, Hole):
                self._hole(item)
            else:
                self._char(item)
            self.i += 1

    def _hole(self, hole: Hole) -> None:
        frame = self.stack[-1]
        if self.escaped:
            context = "escaped"
        elif self._in_arithmetic():
            context = "arith"  # also in ${…} or "…" there: what they expand to is evaluated
        elif frame.kind in ("sq", "dq", "arith", "heredoc"):
            context = frame.kind
        elif frame.kind == "param":
            # never in place: `%` after `${y%` would make the operator `%%`
            context = "param-dq" if frame.in_dq else "param"
        else:
            context = "tilde" if self.tilde else "unquoted"
        self.contexts[hole.index] = context
        if self._heredoc_pattern():
            self.glob_free.add(hole.index)
        frame.word += "\0"
        self.escaped = False
        self.word_start = False

    def _heredoc_pattern(self) -> bool:
        """In a here-document's ${…#…} or ${…%…} pattern dash ignores quotes: values are globs."""
        pattern = False
        for frame in reversed(self.stack):
            if frame.kind == "param":
                pattern = pattern or bool(_PATTERN_OPERATOR.match(frame.word))
            elif frame.kind == "heredoc":
                return pattern
            elif frame.kind not in ("sq", "dq"):
                return False
        return False

    def _in_arithmetic(self) -> bool:
        """Whether the innermost command (or here-document body) is inside a $((…))."""
        for frame in reversed(self.stack):
            if frame.kind == "arith":
                return True
            if frame.kind == "cmd":
                return False
        return False

    def _char(self, c: str) -> None:
        frame = self.stack[-1]
        if self.escaped:
            self.escaped = False
            self.word_start = False
            return
        kind = frame.kind
        if kind == "sq":
            if c == "'":
                self.stack.pop()
            return
        if kind == "comment":
            if c == "\n":
                self.stack.pop()
                self._newline()
            return
        if c == "\\":
            nxt = self.at(1)
            reread = nxt == "\\" or (nxt == '"' and frame.in_dq)
            if frame.close == "`" and isinstance(nxt, str) and reread:
                # Inside backticks `\\` (and within "…" `\"`) is read again as one character
                self.i += 1
                self._char(nxt)
                return
            self.escaped = True
            return
        if kind == "dq" and c == '"':
            self.stack.pop()
            return
        if self._expansion(c, in_dq=kind in ("dq", "heredoc") or frame.in_dq):
            return
        if kind in ("dq", "heredoc"):
            return
        if kind == "param":
            self._param_char(frame, c)
            return
        if kind == "arith":
            self._arith_char(frame, c)
            return
        self._cmd_char(frame, c)

    def _expansion(self, c: str, *, in_dq: bool) -> bool:
        """`$((`, `$(`, `${` and backticks open a nested frame in every context but '…'."""
        if c == "`":
            if self.stack[-1].kind == "cmd" and self.stack[-1].close == "`":
                self.stack.pop()
            else:
                self.stack.append(_Frame("cmd", close="`", in_dq=in_dq))
                self.word_start = True
            return True
        if c != "$":
            return False
        nxt, nxt2 = self.at(1), self.at(2)
        if nxt == "(" and nxt2 == "(":
            self.stack.append(_Frame("arith", in_dq=in_dq))
            self.i += 2
        elif nxt == "(":
            self.stack.append(_Frame("cmd", close=")"))
            self.i += 1
            self.word_start = True
        elif nxt == "{":
            self.stack.append(_Frame("param", in_dq=in_dq))
            self.i += 1
        else:
            return False
        return True

    def _param_char(self, frame: _Frame, c: str) -> None:
        self._track_tilde(c)
        if c == "}":
            if frame.depth == 0:
                self.stack.pop()
            else:
                frame.depth -= 1
        elif c == "{":
            frame.depth += 1
        elif c == '"':
            self.stack.append(_Frame("dq"))
        elif c == "'" and (not frame.in_dq or _PATTERN_OPERATOR.match(frame.word)):
            # in "…", '…' quotes only in a pattern (`"${y#'a*'}"`); in `"${y:-'a'}"` it is text
            self.stack.append(_Frame("sq"))
        frame.word += c

    def _arith_char(self, frame: _Frame, c: str) -> None:
        if c == "(":
            frame.depth += 1
        elif c == ")":
            if frame.depth > 0:
                frame.depth -= 1
            elif self.at(1) == ")":
                self.stack.pop()
                self.i += 1

    def _track_tilde(self, c: str) -> None:
        if c == "~":
            self.tilde = True
        elif c == "/" or c in _OPERATOR_CHARS or c in "'\"}":
            self.tilde = False

    def _end_word(self, frame: _Frame, c: str) -> None:
        """Count `case … esac` (as reserved words, where a command goes) in this frame."""
        word, frame.word = frame.word, ""
        if word:
            if frame.command and word == "case":
                frame.cases += 1
            elif frame.command and word == "esac" and frame.cases:
                frame.cases -= 1
            frame.command = word in _BEFORE_COMMAND
        if c in ";&|(\n":
            frame.command = True

    def _cmd_char(self, frame: _Frame, c: str) -> None:
        self._track_tilde(c)
        if c in _OPERATOR_CHARS:
            self._end_word(frame, c)
        else:
            frame.word += c
        start = self.word_start
        self.word_start = c in _OPERATOR_CHARS
        if c == "'":
            self.stack.append(_Frame("sq"))
        elif c == '"':
            self.stack.append(_Frame("dq"))
        elif c == "#" and start:
            self.stack.append(_Frame("comment"))
        elif c == "(" and start and self.at(1) == "(":
            self.stack.append(_Frame("arith"))  # bash's ((…)); in dash merely odd, never wrong
            self.i += 1
        elif c == "(" and frame.close == ")":
            frame.depth += 1
        elif c == ")" and frame.close == ")":
            if frame.depth:
                frame.depth -= 1
            elif frame.cases:
                frame.command = True  # a pattern's `)`: a command follows
            else:
                self.stack.pop()
        elif c == "<" and self.at(1) == "<":
            if self.at(2) == "<":
                self.i += 2  # bash's here-string <<<, not a here-document
            else:
                self._heredoc_operator()
        elif c == "\n":
            self._newline()

    def _heredoc_operator(self) -> None:
        self.i += 2
        strip = self.at(0) == "-"
        if strip:
            self.i += 1
        while self.at(0) in (" ", "\t"):
            self.i += 1
        start = self.i
        word: list[str] = []
        quoted = False
        quote: str | None = None
        while self.i < self.end:
            c = self.items[self.i]
            if isinstance(c, Hole):
                raise QuotingError("a ${…} value cannot be a here-document's delimiter")
            if quote:
                if c == quote:
                    quote = None
                else:
                    word.append(c)
            elif c in ("'", '"'):
                quote, quoted = c, True
            elif c == "\\":
                quoted = True
                nxt = self.at(1)
                if isinstance(nxt, str):
                    word.append(nxt)
                    self.i += 1
            elif c in _OPERATOR_CHARS:
                break
            else:
                word.append(c)
            self.i += 1
        doc = _Heredoc("".join(word), quoted, strip, (start, self.i))
        doc.in_backticks = any(f.close == "`" for f in self.stack)
        self.pending.append(doc)
        self.i -= 1  # the loop in run() steps past the word's last character
        self.word_start = True

    def _newline(self) -> None:
        """After a newline, the bodies of the here-documents opened on that line follow."""
        self.word_start = True
        pending, self.pending = self.pending, []
        for doc in pending:
            doc.body = self._body(doc)
            self.heredocs.append(doc)

    def _body(self, doc: _Heredoc) -> tuple[int, int]:
        start, end = self._body_span(doc)
        if not doc.quoted:
            # An unquoted body expands like "…" (without its quotes): a value in its $(…),
            # backticks or $((…)) is in that context, so the body is lexed like a command.
            sub = _Lexer(self.items, start, end)
            sub.stack = [_Frame("heredoc")]
            sub.run()
            self.contexts.update(sub.contexts)
            self.glob_free |= sub.glob_free
            self.heredocs.extend(sub.heredocs)
        return start, end

    def _body_span(self, doc: _Heredoc) -> tuple[int, int]:
        start = self.i + 1
        line_start = start
        j = start
        escaped = False
        while j <= self.end:
            item = self.items[j] if j < self.end else "\n"
            if item == "\n":
                line = self.items[line_start:j]
                text = "".join(x for x in line if isinstance(x, str))
                if doc.strip_tabs:
                    text = text.lstrip("\t")
                if text == doc.delimiter and not any(isinstance(x, Hole) for x in line):
                    self.i = min(j, self.end - 1)
                    return start, line_start
                line_start = j + 1
                escaped = False
            elif isinstance(item, Hole):
                self.contexts[item.index] = "escaped" if escaped else "heredoc"
                doc.holes.append(item.index)
                escaped = False
            else:
                escaped = not escaped and item == "\\" and not doc.quoted
            j += 1
        self.i = self.end - 1  # no terminator: the body runs to the end, as in sh
        return start, self.end


def _reference(n: int, context: str) -> str:
    name = "${" + ENV_PREFIX + str(n) + "}"
    if context in ("unquoted", "tilde", "param", "param-dq"):
        return f'"{name}"'
    if context == "sq":
        return f"'\"{name}\"'"
    return name  # inside "…", ${…} in "…", here-document bodies


def quote_command(
    items: list[Item], values: list[str], unknown: frozenset[int] = frozenset()
) -> tuple[str, dict[str, str]]:
    """The command to run and the environment variables it reads; QuotingError when a value
    cannot go in safely. `unknown` values (dry-run placeholders) always go by reference."""
    lexer = _Lexer(items)
    lexer.run()
    out: list[str] = []
    env: dict[str, str] = {}
    rewrite = {d.word: d for d in lexer.heredocs if d.quoted and d.holes}
    escaped_spans = [d.body for d in rewrite.values()]
    for d in rewrite.values():
        if d.in_backticks:
            raise QuotingError("a ${…} value in a <<'…' here-document inside backticks: use $(…)")
        if not _PLAIN_DELIMITER.fullmatch(d.delimiter):
            raise QuotingError(
                f"a ${{…}} value in a here-document needs a plain delimiter, not {d.delimiter!r}"
            )
    k = 0
    while k < len(items):
        item = items[k]
        span = next((w for w in rewrite if w[0] == k), None)
        if span is not None:
            out.append(rewrite[span].delimiter)  # <<'EOF' becomes <<EOF: its body expands now
            k = span[1]
            continue
        if isinstance(item, str):
            if item in "\\$`" and any(a <= k < b for a, b in escaped_spans):
                out.append("\\")
            out.append(item)
        else:
            out.append(_value(item.index, values[item.index], lexer, env, item.index in unknown))
        k += 1
    return "".join(out), env


def _value(n: int, text: str, lexer: _Lexer, env: dict[str, str], unknown: bool) -> str:
    context = lexer.contexts.get(n, "unquoted")
    if "\0" in text:
        raise QuotingError("the value contains a NUL byte, which no command can receive")
    if context == "escaped":
        raise QuotingError("a ${…} value cannot follow a backslash")
    if n in lexer.glob_free and _GLOB.search(text):
        raise QuotingError(
            "a value in a here-document's ${…#…} pattern cannot hold * ? [ or \\ (glob there)"
        )
    if unknown:
        env[f"{ENV_PREFIX}{n}"] = text
        return _reference(n, "dq" if context == "arith" else context)
    if context == "arith":
        if not _INTEGER.fullmatch(text):
            raise QuotingError(f"a value inside $((…)) must be an integer, got {text[:40]!r}")
        return text
    inert = context in ("unquoted", "dq", "sq") and _INERT.fullmatch(text)
    if inert and not (context == "unquoted" and text in _RESERVED):
        return text
    if context in ("unquoted", "tilde", "param") and text == "":
        return "''"
    env[f"{ENV_PREFIX}{n}"] = text
    return _reference(n, context)

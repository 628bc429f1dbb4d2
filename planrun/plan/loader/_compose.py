"""YAML through libyaml: compose nodes, then build plain data with planrun's own scalar rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.error import Mark, MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from planrun.errors import Diagnostic, PlanInvalid
from planrun.plan.loader._base import (
    MAX_DEPTH,
    MAX_NODES,
    TOO_DEEP,
    TOO_MANY,
    invalid,
    line_col,
)
from planrun.plan.loader._scalars import (
    BOOL,
    FLOAT,
    INT,
    MAP,
    MAYBE_NOT_STR,
    NULL_SCALAR,
    SEQ,
    STR,
    TAG,
    NotFinite,
    plain_value,
)

try:
    from yaml._yaml import CParser as _ParserBase
except ImportError:  # pragma: no cover - PyYAML built without libyaml: correct, but slower
    _ParserBase = yaml.SafeLoader  # type: ignore[misc,assignment]


# --------------------------------------------------------------------------- YAML: composing


class _Composer(_ParserBase):  # type: ignore[valid-type,misc]
    """libyaml's composer with cheap resolver hooks, refusing deep nesting as it goes.

    The composer calls resolve/descend_resolver/ascend_resolver for every node.  `slice`
    takes up to three arguments and keeps them, so an implicit scalar's node.tag becomes
    a slice whose .step is (plain_implicit, quoted_implicit), while an explicit tag stays
    a str; the stock resolver would cost a third of the compose time.

    The depth limit is not optional: libyaml's composer recurses in C once per level, so
    a hostile "[[[[..." of ~80,000 levels overflows the C stack and kills the process,
    and deep flow nesting also makes libyaml quadratic.  Every node counts here, scalars
    too, so a scalar inside level MAX_DEPTH is depth MAX_DEPTH + 1; a collection at level
    MAX_DEPTH + 1 is then refused as the parent of its first child, or by the builder if
    it is empty (both report the collection's own position).
    """

    resolve = slice
    depth = 0
    nodes = 0  # and a cap on their number: the node tree is what costs memory

    def descend_resolver(self, parent: Any, index: Any) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH + 1:
            raise _TooDeep(parent)
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooMany(parent)

    def ascend_resolver(self) -> None:
        self.depth -= 1


class _TooDeep(Exception):
    def __init__(self, node: Node) -> None:
        super().__init__("too deep")
        self.node = node


class _TooMany(_TooDeep):
    pass


def compose_document(text: str) -> Node | None:
    composer = _Composer(text)
    try:
        node: Node | None = composer.get_single_node()
        return node
    finally:
        composer.dispose()


def compose_or_raise(text: str, file: str) -> Node | None:
    """Compose YAML text to nodes, turning every parser complaint into PlanInvalid."""
    try:
        return compose_document(text)
    except MarkedYAMLError as exc:
        raise _too_deep_before(exc, text, file) or _yaml_error(exc, text, file) from None
    except ReaderError as exc:
        # libyaml reports a byte offset into the UTF-8 encoding.
        prefix = text.encode("utf-8", "surrogatepass")[: exc.position]
        line, col = line_col(text, len(prefix.decode("utf-8", "ignore")))
        char = exc.character
        shown = f"#x{ord(char):04x}" if isinstance(char, str) else f"#x{char:02x}"
        raise invalid(file, line, col, f"invalid YAML: character {shown} is not allowed") from None
    except UnicodeEncodeError as exc:
        line, col = line_col(text, exc.start)
        bad = text[exc.start]
        raise invalid(
            file, line, col, f"text is not valid Unicode: lone surrogate U+{ord(bad):04X}"
        ) from None
    except _TooDeep as exc:
        message = TOO_MANY if isinstance(exc, _TooMany) else TOO_DEEP
        raise node_error(file, exc.node, message) from None
    except yaml.YAMLError as exc:  # pragma: no cover - every libyaml error is one of the above
        raise invalid(file, 1, 1, f"invalid YAML: {exc}") from None


def _too_deep_before(exc: MarkedYAMLError, text: str, file: str) -> PlanInvalid | None:
    """Our depth error, if the text passes MAX_DEPTH before the point libyaml refused.

    libyaml's scanner reads ahead of the composer (up to a line), and newer libyaml
    refuses deep flow nesting there with its own message and limit: composing the text
    up to the refused point finds our limit first, so the message does not depend on the
    libyaml version.
    """
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return None
    line_start = 0
    for _ in range(mark.line):
        line_start = text.find("\n", line_start) + 1
        if line_start == 0:
            return None
    try:
        compose_document(text[: line_start + mark.column])
    except _TooDeep as deep:
        return node_error(file, deep.node, TOO_MANY if isinstance(deep, _TooMany) else TOO_DEEP)
    except (yaml.YAMLError, UnicodeEncodeError):
        pass
    return None


def _yaml_error(exc: MarkedYAMLError, text: str, file: str) -> PlanInvalid:
    mark = exc.problem_mark or exc.context_mark
    line, col = _place(mark, text) if mark is not None else (1, 1)
    problem = exc.problem or exc.context or "cannot parse"
    context = exc.context or ""
    context_line = _place(exc.context_mark, text)[0] if exc.context_mark is not None else None
    if problem == "but found another document":
        message = "a plan file holds one YAML document, but a second one starts here"
    elif context.startswith("found duplicate anchor"):
        message = f"invalid YAML: duplicate anchor (first at line {context_line})"
    else:
        message = f"invalid YAML: {problem}"
        if exc.problem and context and context_line is not None:
            message += f" ({context} at line {context_line})"
    return invalid(file, line, col, message)


def _place(mark: Mark, text: str) -> tuple[int, int]:
    """1-based (line, col) of libyaml's 0-based mark, kept inside the text: libyaml puts the
    end of a text without a final line break at the start of a line after it."""
    if mark.index >= len(text) and mark.line > 0 and mark.column == 0 and text[-1:] not in "\n\r":
        # the end of the last line: as many characters after the last line break
        return mark.line, len(text) - max(text.rfind("\n"), text.rfind("\r"))
    return mark.line + 1, mark.column + 1


# --------------------------------------------------------------------------- YAML: values


class BuildError(Exception):
    def __init__(self, node: Node, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.message = message


class Builder:
    """Turns a composed node tree into plain data (one walk, GC paused by the caller)."""

    def __init__(self, text: str) -> None:
        # Anchors, tags and merge keys need bookkeeping the common case can skip:
        # without '&' there are no aliases, without '!' no tags, without '<<' no merges.
        self.careful = "&" in text or "!" in text or "<<" in text
        self.active: set[int] = set()  # collections being built (alias cycles)
        self.budget = 100_000 + 2 * len(text)  # values built, against alias bombs
        self.errors: list[tuple[Node, str]] = []
        self.not_finite = False  # a scalar read as infinity or NaN is among the errors

    def build(self, node: Node, depth: int = 0) -> Any:
        cls = node.__class__
        if cls is ScalarNode:
            tag = node.tag
            if tag.__class__ is slice:
                value = node.value
                if tag.step[0] and (not value or value[0] in MAYBE_NOT_STR):
                    try:
                        return plain_value(value)
                    except NotFinite as exc:
                        self.not_finite = True
                        self.errors.append((node, str(exc)))
                        return None
                return value
            return self._tagged_scalar(node)
        if depth >= MAX_DEPTH:
            raise BuildError(node, TOO_DEEP)
        if self.careful:
            return self._careful_collection(node, depth)
        build = self.build
        depth += 1
        if cls is SequenceNode:
            return [build(item, depth) for item in node.value]
        pairs = node.value
        try:
            result = {key.value: build(value, depth) for key, value in pairs}
        except TypeError:
            self._check_keys(pairs)  # a list or mapping used as a key: say so
            raise
        if len(result) != len(pairs):
            self._check_keys(pairs)
        return result

    def _check_keys(self, pairs: list[tuple[Node, Node]]) -> None:
        """Report non-string and duplicate keys of a mapping built by the fast path."""
        seen: dict[str, Node] = {}
        for key_node, _ in pairs:
            name = _key_text(key_node)
            if name in seen:
                first = seen[name].start_mark.line + 1
                self.errors.append((key_node, f"duplicate key '{name}' (first at line {first})"))
            else:
                seen[name] = key_node

    def _careful_collection(self, node: Node, depth: int) -> Any:
        cls = node.__class__
        tag = node.tag
        expected = SEQ if cls is SequenceNode else MAP
        if tag.__class__ is not slice and tag != expected:
            where = "here" if tag in (MAP, SEQ) else "in a plan"
            raise BuildError(node, f"YAML tag '{_short_tag(tag)}' is not allowed {where}")
        ident = id(node)
        if ident in self.active:
            raise BuildError(node, "recursive YAML alias: this anchored node contains itself")
        self.budget -= len(node.value)
        if self.budget < 0:
            raise BuildError(node, "YAML aliases expand to too much data")
        self.active.add(ident)
        try:
            if cls is SequenceNode:
                return [self.build(item, depth + 1) for item in node.value]
            return self._mapping(node, depth + 1)
        finally:
            self.active.discard(ident)

    def _mapping(self, node: Node, depth: int) -> dict[str, Any]:
        """The full mapping rules: string keys, no duplicates, `<<` merge keys."""
        result: dict[str, Any] = {}
        first_seen: dict[str, Node] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if _is_merge_key(key_node):
                merges.append(value_node)
                continue
            name = _key_text(key_node)
            if name in first_seen:
                first = first_seen[name].start_mark.line + 1
                self.errors.append((key_node, f"duplicate key '{name}' (first at line {first})"))
                continue
            first_seen[name] = key_node
            result[name] = self.build(value_node, depth)
        for source in _merge_sources(merges):
            merged = self.build(source, depth)
            for name, value in merged.items():
                result.setdefault(name, value)
        return result

    def _tagged_scalar(self, node: Node) -> Any:
        tag, value = node.tag, node.value
        if tag == STR:
            return value
        if tag in (INT, FLOAT, BOOL, NULL_SCALAR):
            try:
                result = plain_value(value.strip()) if value.strip() else None
            except NotFinite as exc:
                self.not_finite = True
                self.errors.append((node, str(exc)))
                return None
            if tag == FLOAT and isinstance(result, int) and not isinstance(result, bool):
                result = float(result)
            wanted = {INT: int, FLOAT: float, BOOL: bool, NULL_SCALAR: type(None)}[tag]
            if type(result) is wanted:
                return result
            raise BuildError(node, f"'{value}' is not a valid {_short_tag(tag)}")
        raise BuildError(node, f"YAML tag '{_short_tag(tag)}' is not allowed in a plan")


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(TAG) :] if tag.startswith(TAG) else tag


def _is_merge_key(node: Node) -> bool:
    return (
        node.__class__ is ScalarNode
        and node.value == "<<"
        and node.tag.__class__ is slice
        and bool(node.tag.step[0])
    )


def _key_text(node: Node) -> str:
    """Mapping keys are strings: a scalar key is taken as written (`1:` is the key "1")."""
    if node.__class__ is not ScalarNode:
        kind = "a list" if node.__class__ is SequenceNode else "a mapping"
        raise BuildError(node, f"a mapping key must be a string, not {kind}")
    value: str = node.value
    return value


def _merge_sources(merges: list[Node]) -> Iterator[Node]:
    """The mappings named by `<<` keys, earliest first (earlier ones win)."""
    for value in merges:
        if value.__class__ is MappingNode:
            yield value
        elif value.__class__ is SequenceNode and all(
            item.__class__ is MappingNode for item in value.value
        ):
            yield from value.value
        else:
            raise BuildError(value, "a merge key '<<' needs a mapping or a list of mappings")


def _mapping_entries(node: Node) -> dict[str, tuple[Node, Node]]:
    """key -> (key node, value node) of a mapping node, merges included (for positions)."""
    entries: dict[str, tuple[Node, Node]] = {}
    merges = []
    for key_node, value_node in node.value:
        if _is_merge_key(key_node):
            merges.append(value_node)
        elif key_node.__class__ is ScalarNode:
            entries.setdefault(key_node.value, (key_node, value_node))
    try:
        sources = list(_merge_sources(merges))
    except BuildError:
        sources = []
    for source in sources:
        for name, pair in _mapping_entries(source).items():
            entries.setdefault(name, pair)
    return entries


def node_diagnostic(file: str, node: Node, message: str) -> Diagnostic:
    return Diagnostic(file, node.start_mark.line + 1, node.start_mark.column + 1, "error", message)


def node_error(file: str, node: Node, message: str) -> PlanInvalid:
    return PlanInvalid([node_diagnostic(file, node, message)])


# --------------------------------------------------------------------------- YAML: positions

# A position packed in one int (line << 32 | col): ints are not tracked by the garbage
# collector, so a big position tree costs later collections almost nothing.
_Packed = int
# A compact position tree: a scalar is its packed position; a mapping is
# (position, {key: (key position, child)}); a sequence is (position, [child, ...]).
_PosTree = Any


def _pack(node: Node) -> _Packed:
    mark = node.start_mark
    return (mark.line + 1) << 32 | (mark.column + 1)


def position_tree(node: Node, memo: dict[int, _PosTree]) -> _PosTree:
    """The positions of a node tree, without the nodes (which are far bigger); read by
    loader._positions, which unpacks them."""
    cls = node.__class__
    if cls is ScalarNode:
        return _pack(node)
    done = memo.get(id(node))  # an aliased node: same positions as where it is written
    if done is not None:
        return done
    tree: _PosTree
    if cls is SequenceNode:
        tree = (_pack(node), [position_tree(item, memo) for item in node.value])
    else:
        entries = _mapping_entries(node)
        tree = (
            _pack(node),
            {
                name: (_pack(key_node), position_tree(value_node, memo))
                for name, (key_node, value_node) in entries.items()
            },
        )
    memo[id(node)] = tree
    return tree

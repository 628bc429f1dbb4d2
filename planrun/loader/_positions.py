"""Source positions of a YAML document, found lazily on the first Document.pos call."""

from __future__ import annotations

import re
from typing import Any

from yaml.nodes import Node, ScalarNode, SequenceNode

from planrun.loader._base import PathPart, Position, _gc_paused, _line_col
from planrun.loader._compose import _compose, _mapping_entries

# A position packed in one int (line << 32 | col): ints are not tracked by the garbage
# collector, so a big position tree costs later collections almost nothing.
_Packed = int
# A compact position tree: a scalar is its packed position; a mapping is
# (position, {key: (key position, child)}); a sequence is (position, [child, ...]).
_PosTree = Any


def _pack(node: Node) -> _Packed:
    mark = node.start_mark
    return (mark.line + 1) << 32 | (mark.column + 1)


def _unpack(packed: _Packed) -> Position:
    return packed >> 32, packed & 0xFFFFFFFF


def _position_tree(node: Node, memo: dict[int, _PosTree]) -> _PosTree:
    """The positions of a node tree, without the nodes (which are far bigger)."""
    cls = node.__class__
    if cls is ScalarNode:
        return _pack(node)
    done = memo.get(id(node))  # an aliased node: same positions as where it is written
    if done is not None:
        return done
    tree: _PosTree
    if cls is SequenceNode:
        tree = (_pack(node), [_position_tree(item, memo) for item in node.value])
    else:
        entries = _mapping_entries(node)
        tree = (
            _pack(node),
            {
                name: (_pack(key_node), _position_tree(value_node, memo))
                for name, (key_node, value_node) in entries.items()
            },
        )
    memo[id(node)] = tree
    return tree


class _YamlLocator:
    """Positions in YAML text: composed again on first use into a compact position tree."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tree: _PosTree = None  # None: not built yet; False: not available

    def _build(self) -> _PosTree:
        root = _compose(self._text)
        if root is None:
            return False
        # The memo is keyed by id(): the node tree must stay alive until it is done.
        tree = _position_tree(root, {})
        del root  # freed while the GC is still paused (see _parse_yaml)
        return tree

    def pos(self, path: tuple[PathPart, ...], key: bool) -> Position:
        if self._tree is None:
            try:
                self._tree = _gc_paused(self._build)
            except Exception:  # the text loaded, so this should not happen: search lines then
                self._tree = False
        if self._tree is False:
            return _search_keys(self._text, path)
        tree = self._tree
        found = tree if isinstance(tree, int) else tree[0]
        for i, part in enumerate(path):
            if isinstance(tree, int):
                break
            children = tree[1]
            if isinstance(children, dict) and isinstance(part, str) and part in children:
                key_pos, tree = children[part]
                if key and i == len(path) - 1:
                    found = key_pos
                    break
            elif (
                isinstance(children, list)
                and isinstance(part, int)
                and not isinstance(part, bool)
                and -len(children) <= part < len(children)
            ):
                tree = children[part]
            else:
                break
            found = tree if isinstance(tree, int) else tree[0]
        return _unpack(found)


def _search_keys(text: str, path: tuple[PathPart, ...]) -> Position:
    """A fallback position: each string key of `path` searched for as `key:` below the last.

    Used only if composing the text again for positions fails, so that diagnostics still
    point near their place rather than all at 1:1.
    """
    offset = found = 0
    for part in path:
        if not isinstance(part, str):
            continue
        match = re.compile(rf"^[ \t-]*[\"']?{re.escape(part)}[\"']?[ \t]*:", re.M).search(
            text, offset
        )
        if match is None:
            break
        found = offset = match.start() + len(match.group()) - len(match.group().lstrip(" \t-"))
    return _line_col(text, found)

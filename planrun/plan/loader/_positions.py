"""Source positions of a YAML document, found lazily on the first Document.pos call."""

from __future__ import annotations

import re
from typing import Any

from planrun.plan.loader._base import PathPart, Position, _gc_paused, _line_col


def _unpack(packed: int) -> Position:
    """A position packed by loader._compose (line << 32 | col)."""
    return packed >> 32, packed & 0xFFFFFFFF


class _YamlLocator:
    """Positions in YAML text: composed again on first use into a compact position tree."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tree: Any = None  # None: not built yet; False: not available

    def _build(self) -> Any:
        # PyYAML only now: a plan that reports nothing never composes its text again.
        from planrun.plan.loader._compose import _compose, _position_tree

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

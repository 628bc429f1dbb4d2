"""Instance ids of `foreach` steps (`lint[2]`): naming them and ordering them after their step.

Kept free of heavy imports: the state file and `planrun status` read these too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def instance_id(sid: str, n: int | str) -> str:
    """`lint[2]`: step ids never hold brackets, so an instance id never names a step."""
    return f"{sid}[{n}]"


def parent_of(sid: str) -> str | None:
    """The step an instance id belongs to, None for a step id."""
    if sid.endswith("]") and "[" in sid:
        return sid[: sid.rindex("[")]
    return None


def grouped(ids: Iterable[str], instances: Mapping[str, list[str]]) -> list[str]:
    """Step ids with each foreach step's instance ids right after it."""
    out: list[str] = []
    for sid in ids:
        out.append(sid)
        out.extend(instances.get(sid, ()))
    return out


def group_instances(ids: Iterable[str]) -> list[str]:
    """Ids (steps and instances, in any order) with instances moved right after their step,
    in index order; instances whose step is not listed stay where they are."""
    listed = list(ids)
    present = set(listed)
    under: dict[str, list[tuple[int, str]]] = {}
    rest: list[str] = []
    for sid in listed:
        parent = parent_of(sid)
        if parent is not None and parent in present:
            try:
                n = int(sid[len(parent) + 1 : -1])
            except ValueError:
                rest.append(sid)
                continue
            under.setdefault(parent, []).append((n, sid))
        else:
            rest.append(sid)
    return grouped(rest, {p: [s for _, s in sorted(v)] for p, v in under.items()})

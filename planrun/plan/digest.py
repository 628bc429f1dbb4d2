"""The plan's digest (`run.started`, the state file): worked out once per plan object, and
kept with the plan cache's entry so that a hit does not dump the whole plan again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planrun.plan.definition import Plan

_KEEP = 8  # plans whose digest is known: a run has one or two, `planrun mcp` a few at a time
# id -> (the plan itself, so the id stays its own; its digest, or what checks a stored one)
_known: dict[int, tuple[Plan, str | Callable[[], str | None]]] = {}


def plan_digest(plan: Plan) -> str:
    """16 hex digits of SHA-256 over the plan's dump. Its value is pinned: state files compare
    it, so it is worked out exactly as before (to_dict is pydantic's model_dump(mode="json"))."""
    known = _known.get(id(plan))
    if known is not None and known[0] is plan:
        found = known[1] if isinstance(known[1], str) else known[1]()
        if found is not None:
            remember(plan, found)
            return found
    data = plan.to_dict()
    if data.get("grace") is None:  # a key added later: a plan without it digests as before
        data.pop("grace", None)
    blob = json.dumps(data, sort_keys=True, default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
    remember(plan, digest)
    return digest


def remember(plan: Plan, digest: str | Callable[[], str | None]) -> None:
    """Take `digest` as the digest of this plan object (plans are frozen: it cannot change);
    or a stored digest, checked when it is first asked for (None: worked out after all). A dry
    run, which reports no digest, does not check it."""
    _known.pop(id(plan), None)
    if len(_known) >= _KEEP:
        del _known[next(iter(_known))]
    _known[id(plan)] = (plan, digest)


def seal(secret: bytes, key: str, digest: str, entry: bytes) -> str:
    """What binds a stored digest to the plan-cache entry it was worked out for (the entry's
    bytes before it): an entry edited in any byte does not match, and its digest is worked out
    again from the plan it holds."""
    import hmac  # (only when an entry is written, or a run asks for a stored digest)

    message = b"\0".join((key.encode(), digest.encode(), entry))
    return hmac.new(secret, message, hashlib.sha256).hexdigest()

"""The plan's digest (`run.started`, the state file): worked out once per plan object, and
kept with the plan cache's entry so that a hit does not dump the whole plan again."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planrun.plan.definition import Plan

_KEEP = 8  # plans whose digest is known: a run has one or two, `planrun mcp` a few at a time
_known: dict[int, tuple[Plan, str]] = {}  # id -> (the plan itself, so the id stays its own)


def plan_digest(plan: Plan) -> str:
    """16 hex digits of SHA-256 over the plan's dump. Its value is pinned: state files compare
    it, so it is worked out exactly as before (to_dict is pydantic's model_dump(mode="json"))."""
    known = _known.get(id(plan))
    if known is not None and known[0] is plan:
        return known[1]
    data = plan.to_dict()
    if data.get("grace") is None:  # a key added later: a plan without it digests as before
        data.pop("grace", None)
    blob = json.dumps(data, sort_keys=True, default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
    remember(plan, digest)
    return digest


def remember(plan: Plan, digest: str) -> None:
    """Take `digest` as the digest of this plan object (plans are frozen: it cannot change)."""
    if len(_known) >= _KEEP:
        del _known[next(iter(_known))]
    _known[id(plan)] = (plan, digest)


def seal(secret: bytes, key: str, digest: str, plan_data: bytes) -> str:
    """What binds a stored digest to the stored plan it was worked out from: an entry whose
    plan or digest was edited does not match, and its digest is worked out again."""
    message = b"\0".join((key.encode(), digest.encode(), plan_data))
    return hmac.new(secret, message, hashlib.sha256).hexdigest()

"""The plan's digest (`run.started`, the state file). A checked plan works it out once
(`CheckedPlan.digest`), and the plan cache keeps it with its entry, sealed, so that a hit does
not dump the whole plan again."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planrun.plan.definition import Plan


def plan_digest(plan: Plan) -> str:
    """16 hex digits of SHA-256 over the plan's dump. Its value is pinned: state files compare
    it, so it is worked out exactly as before (to_dict is pydantic's model_dump(mode="json"))."""
    data = plan.to_dict()
    if data.get("grace") is None:  # a key added later: a plan without it digests as before
        data.pop("grace", None)
    blob = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def seal(secret: bytes, key: str, digest: str, entry: bytes) -> str:
    """What binds a stored digest to the plan-cache entry it was worked out for (the entry's
    bytes before it): an entry edited in any byte does not match, and its digest is worked out
    again from the plan it holds."""
    import hmac  # (only when an entry is written, or a run asks for a stored digest)

    message = b"\0".join((key.encode(), digest.encode(), entry))
    return hmac.new(secret, message, hashlib.sha256).hexdigest()

"""Key material that holds a secret, digested so that no one without this user's key can guess it.

A cache is shared (another checkout, CI, a network file system): everything in an entry is
readable by everyone who shares it, the entry's name (its key) included. A plain SHA-256 of a
step's args with a 5-digit PIN in them is undone by trying the 100 000 PINs. So when a
secret is part of what a step's key covers (its args, the environment it reads or gets, a
dotenv file holding one, its upstream's results, its file names), every digest of that step
(key, args, env, upstream, dotenv files, sources) is an HMAC-SHA256 under a key that is not
in the cache:

- `PLANRUN_CACHE_SIGNING_KEY` when set (machines that set the same one share such hits);
- else this user's own secret (planrun.usersecret, 0600 under the user's cache home): such
  steps then hit only on this user's machine;
- else (no place for one) a key of this process: they never hit.

The key is derived from the given one with a label, so that it is never the same key as the
one planrun signs entries or keys its plan cache with.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Iterable

from planrun.cache import ENV_SIGNING_KEY
from planrun.cache.keys import Seal
from planrun.usersecret import user_secret

_LABEL = b"planrun cache: key material of steps that read a secret"
_own: list[bytes] = []  # the process's key, made when there is no other


def material_key() -> bytes:
    """The HMAC key for key material that holds a secret (see the module's doc)."""
    given = os.environ.get(ENV_SIGNING_KEY)
    base = given.encode("utf-8", "surrogatepass") if given else user_secret()
    if base is None:
        if not _own:
            _own.append(os.urandom(32))
        base = _own[0]
    return hmac.new(base, _LABEL, hashlib.sha256).digest()


def keyed_seal(key: bytes) -> Seal:
    """A digest of bytes under `key` (HMAC-SHA256, hex)."""

    def seal(data: bytes) -> str:
        return hmac.new(key, data, hashlib.sha256).hexdigest()

    return seal


def holds_secret(data: bytes, forms: Iterable[bytes]) -> bool:
    """Whether `data` (canonical key material) holds one of a secret's forms."""
    return any(f in data for f in forms)


def names_secret(texts: Iterable[str], names: Iterable[str]) -> bool:
    """Whether a text with an expression names one of the `secrets:` (`${pin | int + 1}` holds
    no form of the PIN, yet is made of it). Rough on purpose: a text that names one outside
    its `${…}` counts too, which costs only a hit shared with fewer machines."""
    wanted = [re.escape(n) for n in names if n]
    if not wanted:
        return False
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(wanted) + r")(?!\w)")
    return any("${" in t and pattern.search(t) for t in texts)

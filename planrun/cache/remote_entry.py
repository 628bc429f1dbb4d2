"""An entry as the remote holds it: the local entry with its small output files inside, signed.

`URL/ac/KEY` holds an entry file as the local store writes one (store.entry_bytes), whose
document may carry one field more: `inline`, a list of `[SHA256, BASE64]` pairs, the bytes of
output files of at most INLINE_BLOB bytes each (Bazel's ActionResult carries small outputs the
same way), so that a hit on a step with small outputs is one request. Every blob is uploaded to
`URL/cas/` all the same: a reader that does not know `inline` (an older planrun) still finds it
there. With a signing key, a first line `planrun-signed HEX` holds an HMAC-SHA256 over the key
and the rest, inline bytes included.

What a reader gets is data anyone who can write to the server may have made. An inline blob is
checked as a downloaded one is (its size and SHA-256 against the entry's manifest), and any
inline value that is off (not base64, too large, given twice, naming a blob the entry does not
list) rejects the whole entry before anything of it is written; the size of an entry is bounded
by its reader, so is the memory this takes. The local store keeps its own entries, without
`inline`: its blobs hold those bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from planrun.cache.store import MAX_ENTRY_BYTES, CorruptCache, Entry, entry_bytes, entry_doc, is_key

INLINE_BLOB = 16 << 10  # an output file at most this large travels inside its entry
INLINE_TOTAL = 1 << 20  # and those of one entry together up to this
# The most an entry on the remote may be: a local entry, its inline blobs in base64 and JSON,
# and a signature line. A larger answer is refused before it is read.
MAX_PACKED = MAX_ENTRY_BYTES + (2 << 20)
_B64_MAX = 4 * -(-INLINE_BLOB // 3)  # INLINE_BLOB bytes in base64
_SIGNED = b"planrun-signed "


def sign(key: bytes, entry_key: str, raw: bytes) -> bytes:
    """The entry as stored on the remote: a signature line (HMAC-SHA256 over its key and its
    bytes), then the bytes."""
    mac = hmac.new(key, entry_key.encode() + b"\n" + raw, hashlib.sha256).hexdigest()
    return _SIGNED + mac.encode() + b"\n" + raw


def unsign(key: bytes | None, entry_key: str, body: bytes) -> bytes:
    """The entry's bytes from what the remote holds; CorruptCache when a signing key is set and
    the signature is missing or wrong."""
    signed = body.startswith(_SIGNED)
    head, _, raw = body.partition(b"\n") if signed else (b"", b"", body)
    if key is None:
        return raw
    if not signed:
        raise CorruptCache("unsigned")
    mac = hmac.new(key, entry_key.encode() + b"\n" + raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(head[len(_SIGNED) :], mac.encode()):
        raise CorruptCache("badly signed")
    return raw


def pack(entry: Entry, blobs: Mapping[str, bytes], signing_key: bytes | None) -> bytes:
    """What to upload to `ac/KEY`: `entry` with `blobs` (digest -> bytes, each of the entry's
    output files) inside as far as they are small, signed when there is a key."""
    doc = entry.to_json()
    inline: list[list[str]] = []
    total = 0
    for digest, data in blobs.items():
        if len(data) <= INLINE_BLOB and total + len(data) <= INLINE_TOTAL:
            inline.append([digest, base64.b64encode(data).decode("ascii")])
            total += len(data)
    if inline:
        doc["inline"] = inline
    raw = entry_bytes(doc)
    return sign(signing_key, entry.key, raw) if signing_key else raw


def unpack(body: bytes, key: str, signing_key: bytes | None) -> tuple[Entry, dict[str, bytes]]:
    """The entry the remote answered for `key` and its inline blobs (digest -> bytes, each
    checked against the manifest); CorruptCache when any of it is not sound."""
    doc = entry_doc(unsign(signing_key, key, body))
    pairs = doc.pop("inline", None) if isinstance(doc, dict) else None
    entry = Entry.from_json(doc, key)
    return entry, ({} if pairs is None else _inline(pairs, entry))


def _inline(pairs: Any, entry: Entry) -> dict[str, bytes]:
    listed = {o.hash: o.size for o in entry.outputs}
    if not isinstance(pairs, list):
        raise CorruptCache("inline blobs malformed")
    blobs: dict[str, bytes] = {}
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(p) is str for p in pair)):
            raise CorruptCache("inline blob malformed")
        digest, text = pair
        if not is_key(digest):
            raise CorruptCache("inline blob name is not a SHA-256")
        size = listed.get(digest)
        if size is None:
            raise CorruptCache(f"inline blob {digest[:12]} is not one of the entry's outputs")
        if digest in blobs:
            raise CorruptCache(f"inline blob {digest[:12]} given twice")
        if size > INLINE_BLOB or len(text) > _B64_MAX:
            raise CorruptCache(f"inline blob {digest[:12]} too large")
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise CorruptCache(f"inline blob {digest[:12]} is not base64") from None
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise CorruptCache(f"blob {digest[:12]} is not what its name says")
        blobs[digest] = data
    return blobs

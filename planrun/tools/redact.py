"""Secrets masked in a byte stream on its way to a file (a cut output's whole log), however
the stream is split into chunks: a secret that straddles two reads of a pipe is masked too."""

from __future__ import annotations

import re

MASK = b"***"


class Redactor:
    """Feeds bytes through, with every occurrence of a secret's form replaced by `***`.

    Holds back at most the longest form less one byte (what could be the start of a secret
    the next chunk completes), so memory stays bounded whatever the stream's size.
    """

    def __init__(self, forms: list[str]) -> None:
        encoded = sorted({f.encode() for f in forms if f}, key=len, reverse=True)
        self._pattern = re.compile(b"|".join(map(re.escape, encoded))) if encoded else None
        self._keep = max(map(len, encoded), default=1) - 1
        self._carry = b""

    def feed(self, chunk: bytes) -> bytes:
        """The bytes of `chunk` (after what was held back) that can be written now, masked."""
        if self._pattern is None:
            return chunk
        buf = self._carry + chunk
        safe = len(buf) - self._keep  # a secret starting from here on may not be whole yet
        out: list[bytes] = []
        pos = 0
        for match in self._pattern.finditer(buf):
            if match.start() >= safe:
                break
            out += (buf[pos : match.start()], MASK)
            pos = match.end()  # a match starting before `safe` is whole: the longest fits
        cut = max(pos, safe)
        out.append(buf[pos:cut])
        self._carry = buf[cut:]
        return b"".join(out)

    def close(self) -> bytes:
        """What was held back, masked: the end of the stream."""
        rest, self._carry = self._carry, b""
        return self._pattern.sub(MASK, rest) if self._pattern is not None else rest

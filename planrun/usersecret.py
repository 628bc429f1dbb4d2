"""A random secret of this user's, kept outside every working directory: what a file shipped
under a repository's `.planrun/` cannot know.

The plan cache mixes it into its keys. Everything else in a key (the plan's bytes, planrun's
install) can be the same on an attacker's machine; without the secret, a `.planrun/plans/`
entry made there and shipped in a repository would be a hit here, and the plan it holds (its
gates and policy removed) would run instead of the file the user reads.

The file is `$XDG_CACHE_HOME/planrun/secret` (default `~/.cache/planrun/secret`): 32 random
bytes, mode 0600, made once with an exclusive link so two first runs agree on it. It must be a
regular file of this user, not a link; when it cannot be read or made, there is no secret
(None) and the caller does without what needs it.
"""

from __future__ import annotations

import contextlib
import os

from planrun.cache.safeio import read_regular_stat

SIZE = 32
_known: dict[str, bytes | None] = {}  # path -> secret, once per process


def secret_path() -> str | None:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # relative: ignored, as the XDG rules say
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "planrun", "secret")


def user_secret() -> bytes | None:
    """This user's secret, made on first use; None when there is no usable place for it."""
    path = secret_path()
    if path is None:
        return None
    if path not in _known:
        _known[path] = _read(path) or _make(path)
    return _known[path]


def _read(path: str) -> bytes | None:
    try:  # a regular file (never through a link), this user's own, private, of the right size
        data, st = read_regular_stat(path, SIZE, flags=os.O_NOFOLLOW)
    except OSError:
        return None
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None
    return data if len(data) == SIZE else None


def _make(path: str) -> bytes | None:
    """Write a new secret under a temporary name and link it into place: the first writer
    wins and every reader sees a whole file; then read back whichever won."""
    directory = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(SIZE))
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return _read(path)

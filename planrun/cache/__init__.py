"""Incremental runs: source globs, keys, stat records and the content-addressed cache store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planrun.masking import Masker
    from planrun.plan.definition import Step

# The reasons a step is or is not taken from the cache that need no comparison (the others are
# made by planrun.cache.reasons, imported only on a miss).
NO_ENTRY = "no cache entry"
FORCED = "forced"
OFF = "cache off"
CACHED = "cached"
ALL_FORCED = "*"  # what a bare --force stands for among the --force IDs

ENV_URL = "PLANRUN_REMOTE_CACHE"  # the remote cache (planrun.cache.remote)
ENV_TOKEN = "PLANRUN_REMOTE_CACHE_TOKEN"
ENV_SIGNING_KEY = "PLANRUN_CACHE_SIGNING_KEY"  # (planrun.cache.sealing, planrun.cache.remote)


def step_cached(step: Step) -> bool:
    """`cache: true`, or `sources`/`outputs` given and `cache` not false.

    Here, not in planrun.cache.session, so that a run can ask it without importing the cache
    machinery (~10 ms) for a plan that caches nothing.
    """
    if step.cache is not None:
        return step.cache
    return bool(step.sources or step.outputs)


def cache_credentials(url: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The cache's secrets, masked by every run, its dry run and `show` (and so never stored):
    the signing key, the remote's bearer token and the password inside the remote's URL
    (`--remote-cache URL`, and the environment's, which every step receives), as written and
    percent-decoded; name -> value, for a Masker.

    Here, not in planrun.cache.remote: a run that does not use the cache (`--no-cache`, a plan
    caching nothing) masks them all the same, without importing the cache machinery."""
    found = {name: environ.get(name) or "" for name in (ENV_TOKEN, ENV_SIGNING_KEY)}
    for n, text in enumerate((url, environ.get(ENV_URL))):
        password = _password(text or "")
        found[f"{ENV_URL} password {n}"] = password
        found[f"{ENV_URL} password {n}, decoded"] = _decoded(password)
    return {name: value for name, value in found.items() if value}


def credentials_masker(url: str | None, environ: Mapping[str, str]) -> Masker | None:
    """A Masker of cache_credentials; None when there is none."""
    found = cache_credentials(url, environ)
    if not found:
        return None
    from planrun.masking import Masker

    return Masker(list(found), {}, found)


def url_userinfo(url: str) -> str:
    """A URL's user information (`http://me:PASSWORD@host/` gives `me:PASSWORD`; none, ""),
    read as plain text so that a URL that does not parse gives it too."""
    rest = url.partition("://")[2]
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return authority.rpartition("@")[0]


def _password(url: str) -> str:
    return url_userinfo(url).partition(":")[2]


def _decoded(text: str) -> str:
    if "%" not in text:
        return text  # (urllib not imported: ~5 ms a start, and most runs have no remote)
    from urllib.parse import unquote

    return unquote(text)

"""`planrun cache info|clean|prune`: thin click commands over planrun.cache.prune."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the cache store and the model only when a
# `cache` subcommand runs.
import json
import os
from typing import Any

import click

from planrun.cli.edge import guard
from planrun.errors import PlanrunError, StateError, UsageError


def _root(cache_dir: str | None, *, changes: bool = False) -> str:
    """The cache directory; UsageError when it is a file or below one (no cache can be there);
    for a command that `changes` it, StateError when it is reached through a link a repository
    may have shipped (`.planrun`, `.planrun/cache`), UsageError when it is not a planrun cache
    (other files and no mark, or a linked subdirectory)."""
    from planrun.cache.cachedir import not_a_directory, refusal
    from planrun.cache.session import ENV_DIR, cache_directory, linked_place

    cwd = os.getcwd()
    default = cache_dir is None and not os.environ.get(ENV_DIR)
    link = linked_place(cwd, cache_dir) if changes and default else None
    if link is not None:
        raise StateError(
            f"{link} is a symbolic link: refusing to remove anything through it "
            "(name the directory with --cache-dir)"
        )
    root = cache_directory(cwd, cache_dir)
    if not changes:
        why = not_a_directory(root)
        if why is not None:
            raise UsageError(f"{why}: no cache can be there (choose another with --cache-dir)")
        return root
    why = refusal(root)
    if why is not None:
        raise UsageError(f"{why}: refusing to remove anything from it")
    return root


_DIR_HELP = "The cache directory (default $PLANRUN_CACHE_DIR, else .planrun/cache)."


def _human(n: int) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _remote_info(url: str | None, check: bool, timeout: str | None) -> dict[str, Any] | None:
    """The remote cache as `info` shows it; with `check`, whether it answers (and why not)
    within `timeout` (--remote-cache-timeout, read as `run` reads it)."""
    from planrun.cache.remote import remote_options
    from planrun.cache.wiring import seconds

    limit = seconds(timeout)  # checked even when there is no remote, as by `run`
    options = remote_options(url, False, limit, os.environ)
    if options is None:
        return None
    doc: dict[str, Any] = {"url": options.shown, "read_only": options.read_only}
    if check:
        import asyncio

        from planrun.cache.remote import RemoteCache
        from planrun.cache.store import CacheStore

        store = CacheStore(os.devnull, lambda _m: None)  # `check` reads and writes nothing
        error = asyncio.run(RemoteCache(options, store, lambda _m: None).check())
        doc["ok"] = error is None
        if error is not None:
            doc["error"] = error
    return doc


@click.group()
def cache() -> None:
    """Inspect, empty or trim the cache of step results and outputs."""


@cache.command()
@click.option("--cache-dir", type=click.Path(file_okay=False), help=_DIR_HELP)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--remote-cache", metavar="URL", help="Remote cache URL (default $PLANRUN_REMOTE_CACHE)."
)
@click.option("--check", is_flag=True, help="Ask the remote cache whether it answers.")
@click.option(
    "--remote-cache-timeout",
    metavar="SECONDS",
    help="Seconds the --check request may take (default 5).",
)
@guard
def info(
    cache_dir: str | None,
    output: str,
    remote_cache: str | None,
    check: bool,
    remote_cache_timeout: str | None,
) -> None:
    """Show the cache directory, its number of entries and its size on disk."""
    from planrun.cache.prune import cache_info

    doc: dict[str, Any] = dict(cache_info(_root(cache_dir)))
    remote = _remote_info(remote_cache, check, remote_cache_timeout)
    if remote is not None:
        doc["remote"] = remote
    if output == "json":
        click.echo(json.dumps(doc, indent=2))
        return
    size, n = int(doc["bytes"]), int(doc["entries"])
    entries = f"{n} entr{'y' if n == 1 else 'ies'}"
    click.echo(f"{doc['dir']}: {entries}, {_human(size)} ({size} bytes)")
    if remote is not None:
        mode = " (read-only)" if remote["read_only"] else ""
        answer = ""
        if "ok" in remote:
            answer = ": answers" if remote["ok"] else f": does not answer ({remote['error']})"
        click.echo(f"remote {remote['url']}{mode}{answer}")


@cache.command()
@click.option("--cache-dir", type=click.Path(file_okay=False), help=_DIR_HELP)
@guard
def clean(cache_dir: str | None) -> None:
    """Remove every entry and stored output."""
    from planrun.cache.prune import clean as do_clean

    root = _root(cache_dir, changes=True)
    failed: list[str] = []
    _say_removed(do_clean(root, failed), root, failed)


def _say_removed(n: int, root: str, failed: list[str]) -> None:
    """How many entries were removed, then one line per path under a name planrun writes that
    planrun did not write (kept); then, when a file that was to go could not be removed (a
    read-only file system, no permission), the first such failure as the error (exit 1)."""
    from planrun.cache.prune import squatters

    click.echo(f"removed {n} entr{'y' if n == 1 else 'ies'} from {root}", err=True)
    kept = squatters(root)
    for path in kept[:5]:
        click.echo(
            f"kept {path}: not planrun's (it is not a file planrun wrote); remove it yourself"
            " to let planrun store what belongs under that name",
            err=True,
        )
    if len(kept) > 5:
        click.echo(f"kept {len(kept) - 5} more such paths", err=True)
    if failed:
        more = f" (and {len(failed) - 1} more files)" if len(failed) > 1 else ""
        raise PlanrunError(f"{failed[0]}{more}")


@cache.command()
@click.option("--max-size", metavar="SIZE", help="Trim to SIZE bytes (K, M, G: powers of 1024).")
@click.option("--older-than", metavar="DURATION", help="Drop entries unused for DURATION.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help=_DIR_HELP)
@guard
def prune(max_size: str | None, older_than: str | None, cache_dir: str | None) -> None:
    """Drop entries, least recently used first, until the cache fits."""
    from planrun.cache.prune import parse_size
    from planrun.cache.prune import prune as do_prune
    from planrun.plan.durations import parse_duration

    if max_size is None and older_than is None:
        raise UsageError("cache prune needs --max-size SIZE or --older-than DURATION")
    try:
        size = parse_size(max_size) if max_size is not None else None
        age = parse_duration(older_than) if older_than is not None else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    root = _root(cache_dir, changes=True)
    failed: list[str] = []
    _say_removed(do_prune(root, size, age, failed), root, failed)

"""The remote cache: an HTTP server in the layout of Bazel's HTTP cache behind the local store.

`URL/ac/KEY` holds an entry (a local entry with its small output files inside, signed when a
signing key is set: remote_entry.py) and `URL/cas/SHA256` a blob. A local miss asks the remote;
what it answers is checked (the entry as the local store checks its own, each blob against its
SHA-256, the signature) and written into the local store, where the ordinary lookup takes it,
with every rule of a local hit. A step stored after a miss is uploaded blobs first, entry last,
so no reader sees an entry whose blobs are missing.

The remote only ever speeds a run up: a refused connection, a timeout, a 4xx/5xx or a corrupt
answer is one warning per run and a miss, never a failure. A server that cannot be reached is
not asked again in the same run, and every request still waiting on it gives up at that moment,
so an unreachable remote costs one timeout in all, not one per step.

Each request's clock starts when it is asked for, not when httpx2 gets to it: the wait for a
free connection, for the connection and for the head of the answer all count. A body then streams
with each read (or write) waiting at most the timeout (httpx2's own), and the transfer as a whole
keeping pace: PACE bytes per timeout on average, a first timeout of grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from planrun.cache import ENV_SIGNING_KEY, ENV_TOKEN, ENV_URL
from planrun.cache.remote_entry import INLINE_BLOB, INLINE_TOTAL, MAX_PACKED, pack, unpack
from planrun.cache.store import (
    CHUNK,
    INLINE_MAX,
    CacheStore,
    CorruptCache,
    Entry,
    is_key,
    write_problem,
)
from planrun.errors import UsageError

if TYPE_CHECKING:
    import httpx2

ENV_READ_ONLY = "PLANRUN_REMOTE_CACHE_READ_ONLY"
DEFAULT_TIMEOUT = 5.0
PARALLEL = 16  # transfers at once over one connection pool
ASK_FIRST = 64 << 10  # a blob this large is uploaded only after a HEAD says the server lacks it
# A transfer must move this much per timeout on average (after a first timeout of grace): a
# server that sends (or takes) one byte within each timeout would otherwise hold a run for hours.
PACE = 1 << 20
# Bodies of answers held at once, whatever the remote sends: a GET reserves what its answer's
# Content-Length says before it reads (the most an entry may be when the answer says nothing;
# a Content-Length over that is refused unread), an upload what its entry holds. Ordinary
# entries are kilobytes and go PARALLEL at a time; one of the largest goes alone.
BODY_BUDGET = MAX_PACKED
# Bytes of downloaded blobs one hit keeps in hand for its restore; the others are read back
# from the local store (an entry may list any number of them).
HELD_MAX = 64 << 20


class RemoteFault(Exception):
    """The remote did not answer as a cache should (why, in a few words)."""


class ByteBudget:
    """Bytes held at once by the tasks of one event loop: `hold(n)` waits while others hold
    so much that `n` more would pass the total (a hold of more than the total is the total:
    it waits for every other to end, then goes alone)."""

    def __init__(self, total: int) -> None:
        self.total, self.held = total, 0
        self._waiting: list[asyncio.Future[None]] = []

    @contextlib.asynccontextmanager
    async def hold(self, size: int) -> AsyncIterator[None]:
        size = min(size, self.total)
        while self.held + size > self.total:
            freed = asyncio.get_running_loop().create_future()
            self._waiting.append(freed)
            try:
                await freed
            finally:
                if freed in self._waiting:
                    self._waiting.remove(freed)
        self.held += size
        try:
            yield
        finally:
            self.held -= size
            waiting, self._waiting = self._waiting, []
            for freed in waiting:  # each looks again whether its part fits now
                if not freed.done():
                    freed.set_result(None)


@dataclass(frozen=True)
class RemoteOptions:
    """Where the remote is and how to use it: from the flags, else the environment."""

    url: str
    token: str | None = None
    signing_key: bytes | None = None
    timeout: float = DEFAULT_TIMEOUT
    read_only: bool = False

    @property
    def shown(self) -> str:
        """The URL as it may be printed: no user name, password, query or fragment."""
        return shown_url(self.url)


def shown_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address, bracketed as in the URL
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _shown_safely(url: str) -> str:
    """shown_url, for a URL that may not parse: then its scheme and host as written."""
    try:
        return shown_url(url)
    except ValueError:  # (plain string work: no user name or password shown)
        scheme, _, rest = url.partition("://")
        netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
        return f"{scheme}://{netloc}"


def _spellable(host: str) -> None:
    """UnicodeError when a host name cannot go on the wire (IDNA for a name beyond ASCII)."""
    if not host.isascii():
        host.encode("idna")


def remote_options(
    url: str | None,
    read_only: bool,
    timeout: float | None,
    environ: Mapping[str, str],
) -> RemoteOptions | None:
    """The remote cache of a run or of `cache info`, or None; a URL that is not http(s), or
    has a query or a fragment, is a usage error."""
    url = url or environ.get(ENV_URL) or None
    if url is None:
        return None
    # urlsplit drops a line break, a tab and leading spaces the request would still send
    if not url.isprintable() or url != url.strip():
        raise UsageError(
            f"--remote-cache: {_shown_safely(url)!r} is not an http(s) URL: it holds a line"
            " break, a tab or another control character, or a space at an end"
        )
    try:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(url)
        if parts.port == 0:  # (a port that is not a number, or out of range: ValueError)
            raise ValueError(url)
        _spellable(parts.hostname)
    except ValueError:  # (UnicodeError too: a host name IDNA cannot spell)
        raise UsageError(f"--remote-cache: {_shown_safely(url)!r} is not an http(s) URL") from None
    if "?" in url or "#" in url:  # (an empty one too: `URL/ac/KEY` would follow it)
        raise UsageError(
            f"--remote-cache: {_shown_safely(url)!r} has a query or fragment: entries go at"
            " URL/ac/KEY and URL/cas/SHA256, below its path"
        )
    if timeout is not None and not timeout > 0:
        raise UsageError("--remote-cache-timeout must be more than 0 seconds")
    token = environ.get(ENV_TOKEN) or None
    if token is not None and not (token.isascii() and token.isprintable()):
        # (httpx2 would fail on it at the first request, beyond ASCII with an error of its own)
        raise UsageError(f"{ENV_TOKEN} cannot go in an HTTP header: use printable ASCII only")
    key = environ.get(ENV_SIGNING_KEY)
    return RemoteOptions(
        url=url.rstrip("/"),
        token=token,
        signing_key=key.encode() if key else None,
        timeout=timeout or DEFAULT_TIMEOUT,
        read_only=read_only or _read_only_from(environ),
    )


def _read_only_from(environ: Mapping[str, str]) -> bool:
    """PLANRUN_REMOTE_CACHE_READ_ONLY as yes or no; a value that is neither is a usage error
    (read as `no`, a misspelt guard of a pull-request build would let it upload)."""
    value = environ.get(ENV_READ_ONLY, "")
    flag = value.strip().lower()
    if flag in ("1", "true", "yes", "on"):
        return True
    if flag in ("", "0", "false", "no", "off"):
        return False
    raise UsageError(
        f"{ENV_READ_ONLY}={value!r} is neither yes nor no: use 1 (read the remote cache, never"
        " upload) or 0"
    )


class RemoteCache:
    """One run's use of the remote: fetch into the local store, upload from it."""

    def __init__(
        self, options: RemoteOptions, store: CacheStore, warn: Callable[[str], None]
    ) -> None:
        self.options, self.store, self.warn = options, store, warn
        self.down = False  # unreachable: not asked again in this run
        self._warned = False
        self._client: httpx2.AsyncClient | None = None
        self._base = ""  # the URL requests are made under, with a `/` at its end
        # requests waiting on the remote, with their clocks: all cut short when it goes down
        self._waits: dict[asyncio.Timeout, asyncio.TimerHandle] = {}
        self._budget = ByteBudget(BODY_BUDGET)

    # ---- the connection ----------------------------------------------------------------------

    def _http(self) -> httpx2.AsyncClient:
        """The run's one client (one pool of kept-alive HTTP/1.1 connections), made by the
        first request. httpx2 is imported then, in the event loop's thread: importing it in
        another thread while this one hashes sources was measured slower (the two take turns
        on the interpreter's lock at every system call of the hashing)."""
        if self._client is None:
            self._client = self._new_client()
            self._base = str(self._client.base_url)
        return self._client

    def _prepared(
        self, client: httpx2.AsyncClient, method: str, path: str, body: Any = None
    ) -> httpx2.Request:
        """A request to `path` below the remote's URL, as the client's `build_request` makes it
        (its headers and cookies; its timeout, which `send` sets), with its URL parsed once
        from the whole text rather than parsed and then merged with the client's base URL."""
        import httpx2

        url = httpx2.URL(self._base + path)
        return httpx2.Request(
            method, url, headers=client.headers, cookies=client.cookies, content=body
        )

    def _new_client(self) -> httpx2.AsyncClient:
        import httpx2  # only when a remote is used

        # The bytes are read as the server holds them (`aiter_raw`): offer no encoding they
        # would have to be decoded from (httpx2 offers gzip and deflate by default).
        headers = {"User-Agent": "planrun", "Accept-Encoding": "identity"}
        if self.options.token:
            headers["Authorization"] = f"Bearer {self.options.token}"
        # Plain http needs no TLS context (loading the CA bundle costs ~50 ms).
        https = self.options.url.startswith("https:")
        verify: Any = httpx2.create_ssl_context() if https else False
        return httpx2.AsyncClient(
            verify=verify,
            base_url=self.options.url + "/",
            headers=headers,
            timeout=self.options.timeout,
            limits=httpx2.Limits(max_connections=PARALLEL, max_keepalive_connections=PARALLEL),
            follow_redirects=False,
            trust_env=False,
        )

    async def aclose(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    @contextlib.asynccontextmanager
    async def _clock(self) -> AsyncIterator[Callable[[], None]]:
        """One request's wait, its clock started as it is asked for; yields `answered`, to call
        when the answer begins (its clock stops). When a clock runs out, the remote is down at
        that moment and every wait still running ends with it, before any of them can take a
        connection another freed. RemoteFault when it is down already, and for any transport
        error of httpx2's in the block (the server is then down)."""
        import httpx2

        if self.down:
            raise RemoteFault("not asked again")
        try:
            async with asyncio.timeout(None) as wait:
                clock = asyncio.get_running_loop().call_later(self.options.timeout, self._no_answer)
                self._waits[wait] = clock
                try:
                    yield clock.cancel
                finally:
                    clock.cancel()
                    del self._waits[wait]
        except (TimeoutError, httpx2.TimeoutException):
            raise RemoteFault(f"no answer within {self.options.timeout:g} s") from None
        except httpx2.HTTPError as exc:
            raise RemoteFault(_transport_reason(exc)) from None

    def _no_answer(self) -> None:
        self._fault(f"no answer within {self.options.timeout:g} s", down=True)

    def _fault(self, what: str, *, down: bool) -> None:
        """One warning per run; `down`: the server is not asked again, and the requests still
        waiting on it give up now."""
        if down and not self.down:
            self.down = True
            now = asyncio.get_running_loop().time()
            for wait in self._waits:
                if not wait.expired():
                    wait.reschedule(now)
        if not self._warned:
            self._warned = True
            self.warn(f"remote cache {self.options.shown}: {what}; going on without it")

    async def _request(
        self, method: str, path: str, body: bytes | AsyncIterator[bytes] | None = None
    ) -> Any:
        """One request; RemoteFault for a transport error (the server is then down). A body is
        sent at its own pace: the clock then bounds only the wait for the client."""
        async with self._clock() as answered:
            client = self._http()
            if body is not None:
                answered()
            return await client.send(self._prepared(client, method, path, body))

    @contextlib.asynccontextmanager
    async def _streamed(self, path: str) -> AsyncIterator[httpx2.Response]:
        """A GET of `path` whose body is read as it comes (the client's `stream`), closed after."""
        client = self._http()
        response = await client.send(self._prepared(client, "GET", path), stream=True)
        try:
            yield response
        finally:
            await response.aclose()

    async def _get(self, path: str, limit: int) -> bytes | None:
        """The body at `path` (None for 404), read up to `limit` bytes once the run's budget
        has room for what its Content-Length says (for `limit` when it says nothing)."""
        # The part of the budget is given back once the answer is closed, with no wait
        # between that and the caller's check of the body (nothing else runs meanwhile).
        async with contextlib.AsyncExitStack() as held:
            async with self._clock() as answered, self._streamed(path) as response:
                answered()  # each read of the body waits at most the timeout (httpx2's)
                if response.status_code == 404:
                    return None
                if response.status_code != 200:
                    raise RemoteFault(f"GET answered {response.status_code}")
                expected = _content_length(response.headers.get("content-length"), limit)
                await held.enter_async_context(self._budget.hold(expected))
                body = await self._body(response, expected)
            return body

    async def _body(self, response: httpx2.Response, limit: int) -> bytes:
        """An answer's body, read as it comes; CorruptCache past `limit` bytes."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self._paced(response.aiter_raw()):
            size += len(chunk)
            if size > limit:
                parts.clear()  # (not kept alive by the exception while the answer closes)
                raise CorruptCache("answer larger than expected")
            parts.append(chunk)
        return b"".join(parts)

    def _allowed(self, size: int) -> float:
        """The seconds a transfer of `size` bytes may take in all."""
        return self.options.timeout * (1 + size / PACE)

    def _too_slow(self) -> RemoteFault:
        return RemoteFault(f"slower than {PACE >> 20} MiB per {self.options.timeout:g} s")

    async def _paced(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The parts of an answer's body, as long as they keep pace (RemoteFault when not)."""
        loop = asyncio.get_running_loop()
        start, got = loop.time(), 0
        async for chunk in chunks:
            got += len(chunk)
            if loop.time() - start > self._allowed(got):
                raise self._too_slow()
            yield chunk

    # ---- fetching ----------------------------------------------------------------------------

    async def fetch(self, key: str) -> tuple[Entry, dict[str, bytes]] | None:
        """Bring the entry `key` and its blobs into the local store; the entry when it is there
        now, with the bytes of the blobs this fetch had in hand, checked against their SHA-256
        (digest -> bytes), which a restore then writes without reading them back (a miss, a
        fault or a rejected entry: None). The blobs inside the entry are checked before
        anything is written; only the others are downloaded."""
        if self.down or not is_key(key):
            return None
        try:
            body = await self._get(f"ac/{key}", MAX_PACKED)
            if body is None:
                return None
            # (checked as soon as it is read, no await between: no other body is read meanwhile)
            entry, inline = unpack(body, key, self.options.signing_key)
            del body
            held, wanted = self._blobs_in_hand(entry, inline)
            if wanted:
                held.update(
                    await self._fetch_blobs(wanted, HELD_MAX - sum(map(len, held.values())))
                )
            self.store.put(entry)
            return entry, held
        except RemoteFault as exc:
            self._fault(str(exc), down=True)
        except (CorruptCache, ValueError) as exc:  # (ValueError: too large for the local store)
            self._fault(f"entry {key[:12]} rejected ({exc}): treated as a miss", down=False)
        except OSError as exc:  # the local store could not take it
            self._fault(f"entry {key[:12]} not stored locally: {write_problem(exc)}", down=False)
        return None

    def _blobs_in_hand(
        self, entry: Entry, inline: dict[str, bytes]
    ) -> tuple[dict[str, bytes], dict[str, int]]:
        """The entry's blobs that need no request: those inside it (checked already) are put
        into the local store unless it has them, those it has otherwise are left there.
        Returns (digest -> bytes in hand, digest -> size of each blob still to download)."""
        held: dict[str, bytes] = {}
        wanted: dict[str, int] = {}
        for digest, size in _blobs(entry).items():
            data = inline.get(digest)
            if self.store.has_blob(digest):
                if data is not None:
                    held[digest] = data
            elif data is not None:
                self.store.add_blob(data, digest)
                held[digest] = data
            else:
                wanted[digest] = size
        return held, wanted

    async def _fetch_blobs(self, wanted: dict[str, int], room: int) -> dict[str, bytes]:
        """Download the blobs `wanted` (digest -> size) into the local store, PARALLEL at a time
        (an entry may list any number); the bytes of those that fit in `room` bytes, in order,
        which the restore then need not read back. The first failure stops the others from
        starting more and is raised."""
        keep: set[str] = set()
        for digest, size in wanted.items():
            if size <= INLINE_MAX and size <= room:
                keep.add(digest)
                room -= size
        todo = iter(wanted.items())
        got: dict[str, bytes] = {}
        failed = False

        async def download() -> None:
            nonlocal failed
            for digest, size in todo:
                if failed:
                    return
                try:
                    data = await self._fetch_blob(digest, size)
                except BaseException:
                    failed = True
                    raise
                if data is not None and digest in keep:
                    got[digest] = data

        await asyncio.gather(*(download() for _ in range(min(PARALLEL, len(wanted)))))
        return got

    async def _fetch_blob(self, digest: str, size: int) -> bytes | None:
        """One blob the entry did not hold, downloaded into the local store and checked. Its
        bytes (None: too large for memory, streamed into the store instead)."""
        if size <= INLINE_MAX:
            data = await self._get(f"cas/{digest}", size)
            if data is None:
                raise RemoteFault(f"blob {digest[:12]} missing (404)")
            if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
                raise CorruptCache(f"blob {digest[:12]} is not what its name says")
            self.store.add_blob(data, digest)
            return data
        await self._fetch_large(digest, size)
        return None

    async def _fetch_large(self, digest: str, size: int) -> None:
        """A blob too large for memory: streamed into the store, checked there."""
        async with self._clock() as answered, self._streamed(f"cas/{digest}") as response:
            answered()
            if response.status_code != 200:
                raise RemoteFault(f"GET blob answered {response.status_code}")
            await self.store.put_blob_chunks(digest, size, self._paced(response.aiter_raw(CHUNK)))

    # ---- uploading ---------------------------------------------------------------------------

    async def upload(self, entry: Entry) -> None:
        """Send `entry`, as this run made and stored it, and its blobs: blobs first, the entry
        last (with the small ones inside it). Not the local cache's file read back: anyone
        who shares that directory may have put another there since, which this run would
        then sign."""
        if self.down or self.options.read_only:
            return
        key = entry.key
        try:
            async with self._budget.hold(self.store.entry_size(key)):
                await self._upload(entry)
        except RemoteFault as exc:
            self._fault(str(exc), down=True)
        except (CorruptCache, OSError) as exc:
            self._fault(f"entry {key[:12]} not uploaded ({exc})", down=False)

    async def _upload(self, entry: Entry) -> None:
        key = entry.key
        blobs = _blobs(entry)
        inline = {d: self.store.read_blob(d, n) for d, n in _inlined(blobs).items()}
        todo = iter(blobs.items())

        async def send() -> None:  # PARALLEL at a time: an entry may list any number
            for d, n in todo:
                data = inline.get(d)
                if data is None and n <= INLINE_MAX:
                    data = self.store.read_blob(d, n)
                await self._put_blob(d, n, data)

        await asyncio.gather(*(send() for _ in range(min(PARALLEL, len(blobs)))))
        packed = pack(entry, inline, self.options.signing_key)
        await self._put(f"ac/{key}", packed, len(packed))

    async def _put_blob(self, digest: str, size: int, data: bytes | None) -> None:
        """A small blob (`data`, read already) is sent at once (one request, not two); a larger
        one only when a HEAD says the server lacks it, streamed from its file."""
        if size >= ASK_FIRST and (await self._request("HEAD", f"cas/{digest}")).status_code == 200:
            return
        # streamed: the receiver checks it against its name
        await self._put(
            f"cas/{digest}",
            data if data is not None else self.store.blob_chunks(digest, size),
            size,
        )

    async def _put(self, path: str, body: bytes | AsyncIterator[bytes], size: int) -> None:
        """An upload of `size` bytes, its answer included, within the time its size allows."""
        try:
            async with asyncio.timeout(self._allowed(size) + self.options.timeout):
                response = await self._request("PUT", path, body)
        except TimeoutError:
            raise self._too_slow() from None
        if response.status_code not in (200, 201, 204):
            raise RemoteFault(f"PUT answered {response.status_code}")

    # ---- `cache info --check` ----------------------------------------------------------------

    async def check(self) -> str | None:
        """None when the remote answers as a cache does (a 404 or 200 for an unknown entry),
        else why not."""
        try:
            response = await self._request("HEAD", "ac/" + "0" * 64)
        except RemoteFault as exc:
            return str(exc)
        finally:
            await self.aclose()
        if response.status_code in (200, 404):
            return None
        return f"HEAD answered {response.status_code}"


def _inlined(blobs: dict[str, int]) -> dict[str, int]:
    """The blobs (digest -> size) whose bytes go inside the entry (remote_entry.pack takes
    those of at most INLINE_BLOB bytes, INLINE_TOTAL in all): only those are read to upload;
    every other is streamed from its file."""
    chosen: dict[str, int] = {}
    total = 0
    for digest, size in blobs.items():
        if size <= INLINE_BLOB and total + size <= INLINE_TOTAL:
            chosen[digest] = size
            total += size
    return chosen


def _content_length(header: str | None, limit: int) -> int:
    """The bytes an answer says its body holds (`limit` when it says nothing it can be taken
    at); CorruptCache, before anything is read, when that is over `limit`."""
    if header is None or not header.strip().isdigit():
        return limit
    size = int(header)
    if size > limit:
        raise CorruptCache(f"answer of {size >> 20} MiB, over the {limit >> 20} MiB it may hold")
    return size


def _blobs(entry: Entry) -> dict[str, int]:
    """The blobs a hit needs (the entry's output files), each once: digest -> size."""
    return {o.hash: o.size for o in entry.outputs}


def _transport_reason(exc: Exception) -> str:
    """A transport error in a few words, without the URL (which may hold credentials)."""
    text = type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower()
        cause = cause.__cause__ or cause.__context__
    return {"ConnectError": "cannot connect", "ReadError": "connection broken"}.get(text, text)

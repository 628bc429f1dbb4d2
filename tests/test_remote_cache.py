"""The remote cache: a real nginx with WebDAV PUT on 127.0.0.1, two checkouts with their own
local caches sharing it, and a stub server for the faults a remote can have."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from bench._black_hole import black_hole
from bench._nginx import free_port, nginx_binary, nginx_server
from tests.conftest import assert_no_traceback, planrun, serve_http
from tests.testkit import peak_run

PLAN = """
name: remote
steps:
  - id: build
    tool: shell
    args: {cmd: "mkdir -p out && cat src/*.txt src/*.txt > out/app.bin && chmod 750 out/app.bin && echo built"}
    sources: ["src/*.txt"]
    outputs: ["out/app.bin"]
  - id: size
    tool: shell
    args: {cmd: "wc -c < out/app.bin > out/size.txt"}
    depends_on: [build]
    sources: ["out/app.bin"]
    outputs: ["out/size.txt"]
  - id: note
    tool: shell
    args: {cmd: "echo noted"}
    depends_on: [size]
    cache: true
"""


@contextlib.contextmanager
def nginx(root: Path, token: str | None = None, *, log: bool = False) -> Iterator[tuple[str, Path]]:
    """A real nginx with WebDAV PUT on 127.0.0.1 (bench/_nginx.py); yields its URL and the
    directory it stores in (`log`: requests logged to root/access.log, one `METHOD PATH STATUS`
    a line). CI installs nginx: there a missing one fails, elsewhere it skips."""
    if nginx_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is not installed: .ci/run installs it")
        pytest.skip("nginx is not installed (Debian: apt-get install nginx-core)")
    with nginx_server(root, token, log=log) as served:
        yield served


def checkout(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    for n in range(3):
        (root / "src" / f"m{n}.txt").write_text(f"line {n}\n" * 1000)
    (root / "plan.yaml").write_text(PLAN.lstrip())
    return root


# What a remote gets to answer unless a test is about its timeout (a later option wins): the
# default 5 s is a wall-clock deadline a loaded machine can miss, turning a hit into a miss.
PATIENT = ("--remote-cache-timeout", "120")


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    r = planrun(
        "run", "plan.yaml", "--output", "json", "--events", "ev.jsonl", *PATIENT, *args,
        cwd=cwd, env=env,
    )  # fmt: skip
    assert_no_traceback(r)
    return r


def events(cwd: Path) -> list[dict[str, Any]]:
    path = cwd / "ev.jsonl"
    lines = path.read_text().splitlines()
    path.unlink()
    return [json.loads(line) for line in lines]


def cached_sources(cwd: Path) -> dict[str, str]:
    return {e["step"]: e["source"] for e in events(cwd) if e["event"] == "step.cached"}


def statuses(r: Any) -> dict[str, str]:
    return {s["id"]: s["status"] for s in r.json["steps"]}


def test_a_second_checkout_hits_the_remote_with_identical_outputs(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as (url, data):
        a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
        first = run(a, "--remote-cache", url)
        assert first.code == 0, first
        assert set(statuses(first).values()) == {"succeeded"}
        assert len(list((data / "ac").iterdir())) == 3  # every entry uploaded
        second = run(b, "--remote-cache", url, "--explain")
        assert second.code == 0, second
        assert set(statuses(second).values()) == {"cached"}
        assert cached_sources(b) == {"build": "remote", "size": "remote", "note": "remote"}
        assert "cached (remote)" in second.err
        for name in ("app.bin", "size.txt"):
            assert (b / "out" / name).read_bytes() == (a / "out" / name).read_bytes()
        assert (b / "out" / "app.bin").stat().st_mode & 0o777 == 0o750
        # the state, `status` and the report say where the hits came from
        status = planrun("status", "plan.yaml", cwd=b)
        assert status.out.count("cached (remote)") == 3, status
        report = planrun("report", "plan.yaml", "-o", "-", cwd=b)
        assert report.out.count('<span class="tag">remote</span>') == 3
        # now in b's local cache: the next run hits locally
        third = run(b, "--remote-cache", url)
        assert set(statuses(third).values()) == {"cached"}
        assert set(cached_sources(b).values()) == {"local"}


def test_many_remote_hits_at_once_restore_every_output_and_record_it(tmp_path: Path) -> None:
    """Independent steps' hits land (store and outputs) while other lookups are still going:
    every output is restored byte-identical with its mode, and the next run hits locally."""
    steps = "".join(
        f"  - id: s{n}\n    tool: shell\n"
        f'    args: {{cmd: "mkdir -p out && cat src/m{n % 3}.txt > out/{n}.txt && echo {n}'
        f' >> out/{n}.txt && chmod 640 out/{n}.txt"}}\n'
        f'    sources: ["src/m{n % 3}.txt"]\n    outputs: ["out/{n}.txt"]\n'
        for n in range(24)
    )
    with nginx(tmp_path / "nginx") as (url, _data):
        a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
        for d in (a, b):
            (d / "plan.yaml").write_text("name: many\nsteps:\n" + steps)
        assert run(a, "--remote-cache", url, "-j", "4").code == 0
        r = run(b, "--remote-cache", url, "-j", "4")
        assert r.code == 0, r
        assert set(cached_sources(b).values()) == {"remote"} and len(statuses(r)) == 24
        for n in range(24):
            got, want = b / "out" / f"{n}.txt", a / "out" / f"{n}.txt"
            assert got.read_bytes() == want.read_bytes()
            assert got.stat().st_mode & 0o777 == 0o640
        again = run(b, "--remote-cache", url)
        assert set(cached_sources(b).values()) == {"local"} and len(statuses(again)) == 24


def test_the_remote_from_the_environment_read_only_uploads_nothing(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as (url, data):
        a = checkout(tmp_path / "a")
        env = {"PLANRUN_REMOTE_CACHE": url, "PLANRUN_REMOTE_CACHE_READ_ONLY": "1"}
        r = run(a, env=env)
        assert r.code == 0, r
        assert not (data / "ac").exists() and not (data / "cas").exists()
        r = run(checkout(tmp_path / "b"), "--remote-cache", url, "--remote-cache-read-only")
        assert r.code == 0 and not (data / "ac").exists()


@pytest.mark.parametrize(
    ("value", "read_only"),
    [("1", True), ("true", True), ("TRUE", True), (" yes ", True), ("on", True)]
    + [
        ("0", False),
        ("false", False),
        ("False", False),
        ("no", False),
        ("off", False),
        ("", False),
    ],
)
def test_read_only_from_the_environment_takes_the_usual_spellings(
    tmp_path: Path, value: str, read_only: bool
) -> None:
    env = {"PLANRUN_REMOTE_CACHE_READ_ONLY": value}
    r = planrun(
        "cache", "info", "--output", "json", "--remote-cache", "http://x", cwd=tmp_path, env=env
    )
    assert r.code == 0 and r.json["remote"]["read_only"] is read_only, r


@pytest.mark.parametrize("value", ["ture", "2", "enabled", "1\n1"])
def test_a_read_only_setting_that_is_neither_yes_nor_no_is_a_usage_error(
    tmp_path: Path, value: str
) -> None:
    """A misspelt PLANRUN_REMOTE_CACHE_READ_ONLY (a pull-request build's guard) was read as
    `no` and the build uploaded: it now stops `run` and `cache info` before anything is sent
    or run, on one line naming the variable (exit 2)."""
    a = checkout(tmp_path / "a")
    env = {"PLANRUN_REMOTE_CACHE_READ_ONLY": value}
    remote = ("--remote-cache", f"http://127.0.0.1:{free_port()}")
    for args in (("run", "plan.yaml", *remote), ("cache", "info", "--check", *remote)):
        r = planrun(*args, cwd=a, env=env)
        assert_no_traceback(r)
        assert r.code == 2, r
        assert r.err.startswith("planrun: error: PLANRUN_REMOTE_CACHE_READ_ONLY"), r
        assert len(r.err.strip().splitlines()) == 1, r
    assert not (a / "out").exists()  # no step ran


def test_the_token_is_sent_and_masked(tmp_path: Path) -> None:
    token = "tok-" + os.urandom(8).hex()
    with nginx(tmp_path / "nginx", token=token) as (url, data):
        a = checkout(tmp_path / "a")
        plan = (
            PLAN
            + '  - id: leak\n    tool: shell\n    args: {cmd: "echo $PLANRUN_REMOTE_CACHE_TOKEN"}\n'
        )
        (a / "plan.yaml").write_text(plan.lstrip())
        env = {"PLANRUN_REMOTE_CACHE_TOKEN": token}
        r = run(a, "--remote-cache", url, env=env)
        assert r.code == 0, r
        assert len(list((data / "ac").iterdir())) == 3  # accepted with the token
        assert token not in r.out + r.err
        assert token not in (a / "ev.jsonl").read_text()
        state = "".join(p.read_text() for p in (a / ".planrun" / "state").glob("*.json"))
        assert token not in state
        # without the token the server says 401: one warning, the run as without the remote
        b = checkout(tmp_path / "b")
        r = run(b, "--remote-cache", url)
        assert r.code == 0, r
        assert set(statuses(r).values()) == {"succeeded"}
        assert r.err.count("remote cache") == 1, r.err


def test_signed_entries(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as (url, _data):
        key = {"PLANRUN_CACHE_SIGNING_KEY": "one key"}
        assert run(checkout(tmp_path / "a"), "--remote-cache", url, env=key).code == 0
        ok = run(checkout(tmp_path / "b"), "--remote-cache", url, env=key)
        assert set(statuses(ok).values()) == {"cached"}, ok
        other = {"PLANRUN_CACHE_SIGNING_KEY": "another key"}
        bad = run(checkout(tmp_path / "c"), "--remote-cache", url, env=other)
        assert set(statuses(bad).values()) == {"succeeded"}, bad
        assert "badly signed" in bad.err and bad.err.count("remote cache") == 1
    with nginx(tmp_path / "nginx2") as (url, _data):  # entries uploaded unsigned
        assert run(checkout(tmp_path / "d"), "--remote-cache", url).code == 0
        r = run(checkout(tmp_path / "e"), "--remote-cache", url, env=key)
        assert set(statuses(r).values()) == {"succeeded"}
        assert "unsigned" in r.err


# ---- small outputs inside the entry ------------------------------------------------------------


def answered_gets(root: Path) -> list[str]:
    """The paths of the GETs nginx answered 200 (read once nginx has stopped)."""
    lines = (root / "access.log").read_text().splitlines()
    return [line.split()[1] for line in lines if line.startswith("GET ") and line.endswith(" 200")]


def rewrite_entries(data: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit each entry the remote holds as someone who can write to the server could, keeping
    it well-formed: its checksum made anew, a signature line kept as it was."""
    for path in (data / "ac").iterdir():
        text, signature = path.read_bytes(), b""
        if text.startswith(b"planrun-signed "):
            line, _, text = text.partition(b"\n")
            signature = line + b"\n"
        head, _, body = text.partition(b"\n")
        doc = json.loads(body)
        change(doc)
        body = json.dumps(doc).encode()
        head = b" ".join([*head.split(b" ")[:2], hashlib.sha256(body).hexdigest().encode()])
        path.write_bytes(signature + head + b"\n" + body)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_small_outputs_come_inside_the_entry_one_request_per_hit(tmp_path: Path) -> None:
    """size.txt (a few bytes) comes inside its entry; app.bin (42,000 bytes, over 16 KiB) is
    still a blob of its own, fetched."""
    with nginx(tmp_path / "nginx", log=True) as (url, data):
        a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
        assert run(a, "--remote-cache", url).code == 0
        assert len(list((data / "cas").iterdir())) == 2  # every blob is uploaded all the same
        r = run(b, "--remote-cache", url)
        assert set(statuses(r).values()) == {"cached"}, r
        assert set(cached_sources(b).values()) == {"remote"}
    for name in ("app.bin", "size.txt"):
        assert (b / "out" / name).read_bytes() == (a / "out" / name).read_bytes()
    gets = answered_gets(tmp_path / "nginx")  # a's lookups were 404s
    app = sha((a / "out" / "app.bin").read_bytes())
    assert sorted(gets) == sorted(
        [*(f"/ac/{k.name}" for k in (data / "ac").iterdir()), f"/cas/{app}"]
    )


def test_a_remote_hit_writes_the_bytes_it_checked_not_a_bad_local_copy(tmp_path: Path) -> None:
    """The local store holds a damaged blob under the name of size.txt's bytes: the remote hit
    restores the bytes that came inside its entry, checked against that name."""
    with nginx(tmp_path / "nginx") as (url, _data):
        a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
        assert run(a, "--remote-cache", url).code == 0
        blobs = b / ".planrun" / "cache" / "blobs"
        blobs.mkdir(parents=True)
        (blobs / sha((a / "out" / "size.txt").read_bytes())).write_bytes(b"damaged\n")
        r = run(b, "--remote-cache", url)
        assert r.code == 0, r
        assert cached_sources(b) == {"build": "remote", "size": "remote", "note": "remote"}, r
    for name in ("app.bin", "size.txt"):
        assert (b / "out" / name).read_bytes() == (a / "out" / name).read_bytes()


def test_an_entry_without_inline_bytes_still_hits(tmp_path: Path) -> None:
    """An entry written before small outputs went inside it: its blobs are fetched."""
    with nginx(tmp_path / "nginx", log=True) as (url, data):
        a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
        assert run(a, "--remote-cache", url).code == 0
        rewrite_entries(data, lambda doc: doc.pop("inline", None))
        r = run(b, "--remote-cache", url)
        assert set(statuses(r).values()) == {"cached"}, r
        assert set(cached_sources(b).values()) == {"remote"}
        assert "remote cache" not in r.err, r.err
    for name in ("app.bin", "size.txt"):
        assert (b / "out" / name).read_bytes() == (a / "out" / name).read_bytes()
    assert len([g for g in answered_gets(tmp_path / "nginx") if g.startswith("/cas/")]) == 2


def _alter(doc: dict[str, Any]) -> None:
    for pair in doc.get("inline", []):
        data = base64.b64decode(pair[1])
        pair[1] = base64.b64encode(data.replace(b"0", b"9")).decode()


def _not_base64(doc: dict[str, Any]) -> None:
    for pair in doc.get("inline", []):
        pair[1] = "*not base64*"


def _too_large(doc: dict[str, Any]) -> None:
    for pair in doc.get("inline", []):
        pair[1] = base64.b64encode(bytes(1 << 20)).decode()


def _duplicated(doc: dict[str, Any]) -> None:
    if doc.get("inline"):
        doc["inline"] = doc["inline"] * 2


def _unlisted(doc: dict[str, Any]) -> None:
    if doc.get("inline"):
        doc["inline"].append([sha(b"planted\n"), base64.b64encode(b"planted\n").decode()])


@pytest.mark.parametrize("change", [_alter, _not_base64, _too_large, _duplicated, _unlisted])
def test_a_bad_inline_blob_is_a_miss_that_writes_nothing(
    tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    with nginx(tmp_path / "nginx") as (url, data):
        a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
        assert run(a, "--remote-cache", url).code == 0
        rewrite_entries(data, change)
        r = run(b, "--remote-cache", url)
    assert r.code == 0, r
    assert statuses(r)["size"] == "succeeded" and statuses(r)["build"] == "cached", r
    assert r.err.count("remote cache") == 1 and "rejected" in r.err, r.err
    for name in ("app.bin", "size.txt"):
        assert (b / "out" / name).read_bytes() == (a / "out" / name).read_bytes()
    blobs = {p.name for p in (b / ".planrun" / "cache" / "blobs").iterdir()}
    assert blobs <= {p.name for p in (a / ".planrun" / "cache" / "blobs").iterdir()}, blobs
    for blob in (b / ".planrun" / "cache" / "blobs").iterdir():  # nothing planted or altered
        assert sha(blob.read_bytes()) == blob.name


def test_a_signed_entry_with_altered_inline_bytes_is_rejected(tmp_path: Path) -> None:
    key = {"PLANRUN_CACHE_SIGNING_KEY": "one key"}
    with nginx(tmp_path / "nginx") as (url, data):
        a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
        assert run(a, "--remote-cache", url, env=key).code == 0
        rewrite_entries(data, _alter)
        r = run(b, "--remote-cache", url, env=key)
    assert r.code == 0, r
    assert statuses(r)["size"] == "succeeded" and statuses(r)["build"] == "cached", r
    assert "badly signed" in r.err and r.err.count("remote cache") == 1, r.err
    assert (b / "out" / "size.txt").read_bytes() == (a / "out" / "size.txt").read_bytes()


# ---- faults --------------------------------------------------------------------------------


class Stub:
    """A remote that misbehaves as told: `mode` is one of ok, 500, truncate, tamper."""

    def __init__(self, mode: str) -> None:
        self.mode, self.files, self.requests = mode, {}, []  # type: ignore[var-annotated]
        self.auth: set[str | None] = set()  # the Authorization headers sent
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes = b"", length: int | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_PUT(self) -> None:
                with stub.lock:
                    stub.requests.append(("PUT", self.path))
                    stub.auth.add(self.headers.get("Authorization"))
                body = self.rfile.read(int(self.headers["Content-Length"]))
                stub.files[self.path] = body
                self._send(201)

            def do_GET(self) -> None:
                with stub.lock:
                    stub.requests.append((self.command, self.path))
                    stub.auth.add(self.headers.get("Authorization"))
                body = stub.files.get(self.path)
                if body is None:
                    return self._send(404)
                if stub.mode == "500":
                    return self._send(500)
                if stub.mode == "truncate" and "/cas/" in self.path:
                    self._send(200, body[: len(body) // 2], length=len(body))
                    self.close_connection = True
                    return None
                if stub.mode == "tamper" and "/cas/" in self.path:
                    return self._send(200, body[::-1])
                return self._send(200, body)

            do_HEAD = do_GET

        return Handler


@pytest.mark.parametrize("mode", ["500", "truncate", "tamper"])
def test_a_faulty_remote_is_one_warning_and_the_same_run(tmp_path: Path, mode: str) -> None:
    stub = Stub("ok")
    with serve_http(stub.handler()) as url:
        a = checkout(tmp_path / "a")
        assert run(a, "--remote-cache", url).code == 0
        assert any(k.startswith("/ac/") for k in stub.files)
        stub.mode = mode
        b = checkout(tmp_path / "b")
        r = run(b, "--remote-cache", url, "--remote-cache-timeout", "2")
    assert r.code == 0, r
    # the steps with outputs run (`note` has none: its entry alone is sound, and may hit;
    # size.txt comes inside its entry, so a remote that only garbles blobs serves it sound)
    assert statuses(r)["build"] == "succeeded"
    assert statuses(r)["size"] == ("cached" if mode == "tamper" else "succeeded")
    assert r.err.count("remote cache") == 1, r.err
    assert (b / "out" / "app.bin").read_bytes() == (a / "out" / "app.bin").read_bytes()
    blobs = list((b / ".planrun" / "cache" / "blobs").iterdir())
    for blob in blobs:  # nothing wrong was kept
        assert (
            blob.name.startswith(".") or hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
        )


@pytest.mark.parametrize("created", ["nan", "inf", "-Infinity"])
def test_an_entry_whose_time_is_not_a_number_is_rejected_not_kept_unreadable(
    tmp_path: Path, created: str
) -> None:
    """`created` as a string Python reads as a float that JSON cannot hold: taken, the local
    copy would be written with NaN in it, which the next run reads as a corrupt entry."""
    stub = Stub("ok")
    with serve_http(stub.handler()) as url:
        assert run(checkout(tmp_path / "a"), "--remote-cache", url).code == 0
        for path, body in list(stub.files.items()):
            if "/ac/" in path:
                head, _, text = body.partition(b"\n")
                doc = json.loads(text)
                doc["created"] = created
                text = json.dumps(doc).encode()
                head = b" ".join([*head.split(b" ")[:2], sha(text).encode()])
                stub.files[path] = head + b"\n" + text
        b = checkout(tmp_path / "b")
        first = run(b, "--remote-cache", url)
        again = run(b, "--remote-cache", url)
    assert first.code == 0 and again.code == 0, (first, again)
    assert "corrupt" not in first.err + again.err, (first.err, again.err)
    assert set(statuses(first).values()) == {"succeeded"}, first
    assert first.err.count("remote cache") == 1 and "rejected" in first.err, first.err
    for entry in (b / ".planrun" / "cache" / "entries").iterdir():
        json.loads(entry.read_bytes().partition(b"\n")[2], parse_constant=pytest.fail)


def test_a_remote_under_a_path_with_a_user_and_password_in_its_url(tmp_path: Path) -> None:
    """Entries live under the URL's path; its user and password go as Basic authentication
    and are never shown."""
    stub = Stub("ok")
    with serve_http(stub.handler()) as url:
        remote = url.replace("http://", "http://me:s%40cret@") + "/team/cache/"
        assert run(checkout(tmp_path / "a"), "--remote-cache", remote).code == 0
        b = checkout(tmp_path / "b")
        r = run(b, "--remote-cache", remote)
    assert set(statuses(r).values()) == {"cached"}, r
    assert set(cached_sources(b).values()) == {"remote"}
    paths = [path for _method, path in stub.requests]
    assert paths and all(p.startswith(("/team/cache/ac/", "/team/cache/cas/")) for p in paths)
    assert stub.auth == {"Basic " + base64.b64encode(b"me:s@cret").decode()}


def test_a_refused_connection_is_one_warning(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    a = checkout(tmp_path / "a")
    r = run(a, "--remote-cache", f"http://127.0.0.1:{port}")
    assert r.code == 0, r
    assert set(statuses(r).values()) == {"succeeded"}
    assert r.err.count("remote cache") == 1, r.err
    again = run(a, "--remote-cache", f"http://127.0.0.1:{port}")
    assert set(statuses(again).values()) == {"cached"}  # the local cache works on


def test_a_black_hole_leaves_no_thread_that_could_take_another_server_s_connections() -> None:
    """Its accept thread ends before its port closes: a thread still in `accept` on a closed
    descriptor takes the connections of whatever socket gets that number next (the next test's
    server), and the run asking that server hangs or is reset."""
    before = set(threading.enumerate())
    with black_hole() as (url, _accepted):
        assert url.startswith("http://127.0.0.1:")
    assert set(threading.enumerate()) <= before


def test_a_run_after_a_black_hole_in_the_same_process_is_served(tmp_path: Path) -> None:
    """One process, two runs (as `planrun mcp` runs plans): the first's remote never answers,
    the second's answers; nothing of the first run's connections reaches the second's."""
    with black_hole() as (url, _accepted):
        a = checkout(tmp_path / "a")
        r = run(a, "--remote-cache", url, "--remote-cache-timeout", "0.5")
        assert r.code == 0 and r.err.count("remote cache") == 1, r
    stub = Stub("ok")
    with serve_http(stub.handler()) as url:
        r = run(checkout(tmp_path / "b"), "--remote-cache", url)
    assert r.code == 0 and "remote cache" not in r.err, r
    assert any(path.startswith("/ac/") for path in stub.files), stub.requests


def test_a_remote_that_never_answers_costs_one_timeout(tmp_path: Path) -> None:
    """The steps form a chain, so a remote asked once per step would be asked three times;
    after the first timeout it is not asked again."""
    with black_hole() as (url, accepted):
        a = checkout(tmp_path / "a")
        r = run(a, "--remote-cache", url, "--remote-cache-timeout", "0.5")
        assert r.code == 0, r
        assert set(statuses(r).values()) == {"succeeded"}
        assert "no answer within 0.5 s" in r.err and r.err.count("remote cache") == 1
        assert len(accepted) == 1


def test_requests_queued_behind_a_black_hole_give_up_with_the_first(tmp_path: Path) -> None:
    """40 independent steps ask at once; the pool holds 16 connections: the queued requests
    give up with the first ones, they do not take the freed connections and wait again."""
    with black_hole() as (url, accepted):
        a = tmp_path / "a"
        a.mkdir()
        steps = "".join(
            f'  - {{id: s{n}, tool: shell, args: {{cmd: "echo {n}"}}, cache: true}}\n'
            for n in range(40)
        )
        (a / "plan.yaml").write_text("steps:\n" + steps)
        r = run(a, "--remote-cache", url, "--remote-cache-timeout", "1", "-j", "2")
        assert r.code == 0, r
        assert set(statuses(r).values()) == {"succeeded"}
        assert r.err.count("remote cache") == 1, r.err
        assert len(accepted) <= 16, len(accepted)


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def test_a_black_hole_costs_one_timeout_in_all_not_one_per_lookup_in_flight(
    tmp_path: Path,
) -> None:
    """`a` asks at once; `b` asks when `slow` is done, while `a`'s request still hangs. When
    `a`'s request times out, `b`'s gives up with it: the run waits one timeout in all (the
    remote's own; not a second one that `b`'s request would start)."""
    timeout = 3.0  # `slow` (1 s) ends well within it, even on a loaded machine
    plan = (
        "steps:\n"
        '  - {id: a, tool: shell, args: {cmd: "echo a"}, cache: true}\n'
        '  - {id: slow, tool: shell, args: {cmd: "sleep 1"}}\n'
        '  - {id: b, tool: shell, args: {cmd: "echo b"}, cache: true, depends_on: [slow]}\n'
    )
    with black_hole() as (url, accepted):
        a = tmp_path / "a"
        a.mkdir()
        (a / "plan.yaml").write_text(plan)
        r = run(a, "--remote-cache", url, "--remote-cache-timeout", f"{timeout:g}")
        assert r.code == 0, r
        assert set(statuses(r).values()) == {"succeeded"}
        assert r.err.count("remote cache") == 1, r.err
        assert len(accepted) == 2  # both asked
    started = {e["step"]: _ts(e) for e in events(a) if e["event"] == "step.started"}
    assert started["b"] - started["slow"] > 0.9  # `b` asked after `slow`, during `a`'s wait
    # ... and gave up with `a`: a clock of its own would have run out a second later (`slow`'s
    # second: `b` asked that much after `a`), at `a`'s give-up plus one second at the least
    assert abs(started["b"] - started["a"]) < 0.5, started


def test_small_blobs_are_sent_without_asking_first(tmp_path: Path) -> None:
    """A blob under 64 KiB is PUT at once (one request, not a HEAD and a PUT); a larger one
    only after a HEAD says the server lacks it."""
    plan = PLAN + (
        "  - id: large\n    tool: shell\n"
        '    args: {cmd: "mkdir -p out && head -c 100000 /dev/zero > out/large.bin"}\n'
        '    outputs: ["out/large.bin"]\n'
    )
    stub = Stub("ok")
    with serve_http(stub.handler()) as url:
        a = checkout(tmp_path / "a")
        (a / "plan.yaml").write_text(plan.lstrip())
        r = run(a, "--remote-cache", url)
        assert r.code == 0 and "remote cache" not in r.err, r
    large = "/cas/" + hashlib.sha256(bytes(100000)).hexdigest()
    heads = [path for method, path in stub.requests if method == "HEAD"]
    assert heads == [large], stub.requests
    blobs = [path for method, path in stub.requests if method == "PUT" and "/cas/" in path]
    assert len(blobs) == 3 and large in blobs, stub.requests  # app.bin, size.txt, large.bin
    assert len([path for path in stub.files if path.startswith("/ac/")]) == 4


def test_cache_info_shows_and_checks_the_remote(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as (url, _data):
        r = planrun("cache", "info", "--remote-cache", url, "--check", cwd=tmp_path)
        assert r.code == 0 and f"remote {url}" in r.out and "answers" in r.out, r
        r = planrun(
            "cache",
            "info",
            "--output",
            "json",
            "--check",
            cwd=tmp_path,
            env={"PLANRUN_REMOTE_CACHE": url},
        )
        assert r.json["remote"] == {"url": url, "read_only": False, "ok": True}
    port = free_port()
    r = planrun(
        "cache", "info", "--remote-cache", f"http://127.0.0.1:{port}", "--check", cwd=tmp_path
    )
    assert r.code == 0 and "does not answer" in r.out, r


def test_cache_info_check_gives_up_after_the_remote_cache_timeout(tmp_path: Path) -> None:
    """`--check` asks the remote, so it takes `--remote-cache-timeout` as `run` does: a remote
    that never answers is given that long, not the default 5 s."""
    import time

    with black_hole() as (url, accepted):
        started = time.monotonic()
        r = planrun(
            "cache",
            "info",
            "--remote-cache",
            url,
            "--check",
            "--remote-cache-timeout",
            "0.5",
            cwd=tmp_path,
        )
        took = time.monotonic() - started
    assert r.code == 0, r
    assert "does not answer (no answer within 0.5 s)" in r.out, r
    assert took < 4, took
    assert len(accepted) == 1
    bad = planrun("cache", "info", "--remote-cache-timeout", "soon", cwd=tmp_path)
    assert bad.code == 2 and "--remote-cache-timeout: 'soon' is not a number of seconds" in bad.err


def test_a_bad_remote_url_is_a_usage_error(tmp_path: Path) -> None:
    a = checkout(tmp_path / "a")
    r = planrun("run", "plan.yaml", "--remote-cache", "ftp://x", cwd=a)
    assert r.code == 2 and "not an http(s) URL" in r.err, r
    r = planrun(
        "run", "plan.yaml", "--remote-cache", "http://x", "--remote-cache-timeout", "-1", cwd=a
    )
    assert r.code == 2 and "--remote-cache-timeout" in r.err, r
    for url in ("http://x:abc", "http://x:99999", "http://\u00fc..x/", "http://[::1"):
        r = planrun("run", "plan.yaml", "--remote-cache", url, cwd=a)
        assert_no_traceback(r)
        assert r.code == 2 and "not an http(s) URL" in r.err, r
        assert len(r.err.strip().splitlines()) == 1, r


@pytest.mark.parametrize(
    "url",
    [
        "http://u:s3cret@127.0.0.1:1/c\n",
        "http://u:s3cret@127.0.0.1:1/c\t",
        "http://127.0.0.1:1/c\r\nX-Evil: 1",
        " http://u:s3cret@127.0.0.1:1/c",
        "http://127.0.0.1:0/c",
    ],
)
def test_a_remote_url_with_a_control_character_is_a_usage_error(tmp_path: Path, url: str) -> None:
    """A URL with a line break or tab (a CI variable saved with its newline), a space before
    it or port 0 cannot be asked: one line, exit 2, its password not shown, for `run` (URL
    from the flag or the environment) and `cache info --check`."""
    a = checkout(tmp_path / "a")
    calls = [
        (("run", "plan.yaml", "--remote-cache", url), {}),
        (("run", "plan.yaml"), {"PLANRUN_REMOTE_CACHE": url}),
        (("cache", "info", "--check", "--remote-cache", url), {}),
    ]
    for args, env in calls:
        r = planrun(*args, cwd=a, env=env)
        assert_no_traceback(r)
        assert r.code == 2 and "not an http(s) URL" in r.err, r
        assert len(r.err.strip().splitlines()) == 1 and "s3cret" not in r.err, r
        if not url.isprintable() or url != url.strip():
            assert "control character" in r.err, r  # says why: the URL shown looks fine
    assert not (a / "out").exists()  # no step ran


def test_an_ipv6_remote_is_shown_with_its_brackets(tmp_path: Path) -> None:
    port = free_port()
    r = planrun("cache", "info", "--remote-cache", f"http://u:pw@[::1]:{port}/c", cwd=tmp_path)
    assert r.code == 0 and f"remote http://[::1]:{port}/c" in r.out, r


@pytest.mark.parametrize(
    "url", ["http://x/cache?token=s3cret", "http://x/cache#s3cret", "http://x/?"]
)
def test_a_remote_url_with_a_query_or_fragment_is_a_usage_error(tmp_path: Path, url: str) -> None:
    """Entries live at URL/ac/KEY: after a query or a fragment those paths would be part of
    it, and every entry one resource. Refused on one line that does not show what followed."""
    a = checkout(tmp_path / "a")
    for args in (("run", "plan.yaml"), ("cache", "info", "--check")):
        r = planrun(*args, "--remote-cache", url, cwd=a)
        assert_no_traceback(r)
        assert r.code == 2 and "query or fragment" in r.err, r
        assert len(r.err.strip().splitlines()) == 1 and "s3cret" not in r.err, r
    assert not (a / "out").exists()  # no step ran


@pytest.mark.parametrize("token", ["t\u00f8ken", "tok\nen", "tok\r\nX-Evil: 1"])
def test_a_token_no_header_can_carry_is_a_usage_error(tmp_path: Path, token: str) -> None:
    """A token that cannot go in an `Authorization` header (beyond ASCII, a line break) stops
    the run and `cache info` before anything is sent, on one line that does not show it."""
    a = checkout(tmp_path / "a")
    env = {"PLANRUN_REMOTE_CACHE_TOKEN": token}
    remote = ("--remote-cache", f"http://127.0.0.1:{free_port()}")
    for args in (("run", "plan.yaml", *remote), ("cache", "info", "--check", *remote)):
        r = planrun(*args, cwd=a, env=env)
        assert_no_traceback(r)
        assert r.code == 2, r
        assert r.err.startswith("planrun: error: PLANRUN_REMOTE_CACHE_TOKEN"), r
        assert len(r.err.strip().splitlines()) == 1, r
        assert token not in r.err, r
    assert not (a / "out").exists()  # no step ran


def test_a_large_output_streams_both_ways(tmp_path: Path) -> None:
    """An output over the size held in memory goes up and comes down in parts, checked."""
    big = (
        "steps:\n  - id: big\n    tool: shell\n"
        '    args: {cmd: "mkdir -p out && head -c 9437184 /dev/urandom > out/big.bin"}\n'
        '    outputs: ["out/big.bin"]\n'
    )
    with nginx(tmp_path / "nginx") as (url, data):
        a, b = tmp_path / "a", tmp_path / "b"
        for d in (a, b):
            d.mkdir()
            (d / "plan.yaml").write_text(big)
        assert run(a, "--remote-cache", url).code == 0
        r = run(b, "--remote-cache", url)
        assert statuses(r) == {"big": "cached"}, r
        assert (b / "out" / "big.bin").read_bytes() == (a / "out" / "big.bin").read_bytes()


def test_a_large_blob_altered_in_the_local_cache_is_not_uploaded(tmp_path: Path) -> None:
    """Someone who can write the local cache directory (shared by checkouts) puts other bytes
    under a large blob's name: a run that stores that output finds the blob there, and its
    upload must not give the remote bytes that are not what their name says (every reader
    would then reject the entry, for good: an uploader asks before sending a large blob)."""
    big = (
        "steps:\n  - id: big\n    tool: shell\n"
        '    args: {cmd: "mkdir -p out && head -c 9437184 /dev/zero > out/big.bin"}\n'
        '    outputs: ["out/big.bin"]\n'
    )
    with nginx(tmp_path / "nginx") as (url, data):
        a = tmp_path / "a"
        a.mkdir()
        (a / "plan.yaml").write_text(big)
        assert run(a).code == 0  # the local cache only
        cache = a / ".planrun" / "cache"
        blob = max((cache / "blobs").iterdir(), key=lambda p: p.stat().st_size)
        blob.write_bytes(b"\1" * blob.stat().st_size)  # same size, other bytes
        for entry in (cache / "entries").iterdir():
            entry.unlink()
        r = run(a, "--remote-cache", url)
        assert r.code == 0 and statuses(r) == {"big": "succeeded"}, r
        assert r.err.count("remote cache") == 1 and "not uploaded" in r.err, r.err
        for sent in (data / "cas").iterdir() if (data / "cas").exists() else ():
            assert sha(sent.read_bytes()) == sent.name
        assert not (data / "ac").exists() or not list((data / "ac").iterdir())


def test_an_entry_swapped_in_the_local_cache_before_its_upload_is_not_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone who can write the shared local cache swaps the entry a run just stored for one
    of their own (same key, another result) before the run uploads it: the run must upload
    what it made, never sign what someone else put there."""
    from planrun.cache.remote import RemoteCache

    original = RemoteCache.upload

    async def swapped_first(self: RemoteCache, *args: Any) -> None:
        for path in (Path(self.store.root) / "entries").glob("*.json"):
            head, _, body = path.read_bytes().partition(b"\n")
            doc = json.loads(body)
            doc["result"] = {"stdout": "forged\n", "stderr": "", "exit_code": 0}
            doc["stdout"] = "forged\n"
            body = json.dumps(doc).encode()
            head = b" ".join([*head.split(b" ")[:2], sha(body).encode()])
            path.write_bytes(head + b"\n" + body)
        await original(self, *args)

    monkeypatch.setattr(RemoteCache, "upload", swapped_first)
    key = {"PLANRUN_CACHE_SIGNING_KEY": "one key"}
    stub = Stub("ok")
    with serve_http(stub.handler()) as url:
        a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
        assert run(a, "--remote-cache", url, env=key).code == 0
        monkeypatch.setattr(RemoteCache, "upload", original)
        r = run(b, "--remote-cache", url, env=key)
    shown = {s["id"]: s["result"] for s in r.json["steps"]}
    assert "forged" not in json.dumps(shown), shown
    assert b"forged" not in b"".join(stub.files.values())


# ---- the remote's credentials are secrets of every run ---------------------------------------

LEAK = (
    "steps:\n  - id: leak\n    tool: shell\n"
    '    args: {cmd: "echo token=$PLANRUN_REMOTE_CACHE_TOKEN url=$PLANRUN_REMOTE_CACHE"}\n'
)


def recorded(cwd: Path, r: Any) -> str:
    """All a run showed and kept: its console, its JSON, its events and its state."""
    kept = [(cwd / "ev.jsonl").read_text()]
    kept += [p.read_text() for p in (cwd / ".planrun" / "state").glob("*.json")]
    return r.out + r.err + "".join(kept)


@pytest.mark.parametrize(
    ("cached", "flags"),
    [("    cache: true\n", ["--no-cache"]), ("", []), ("    cache: true\n", [])],
    ids=["no-cache", "no-cached-step", "cached-step"],
)
def test_the_token_and_the_url_s_password_are_masked_in_every_run(
    tmp_path: Path, cached: str, flags: list[str]
) -> None:
    """A step sees the environment: the bearer token and a password inside the remote's URL are
    masked in what the run shows and keeps, whether or not the run uses the cache."""
    token, password = "tok-" + os.urandom(8).hex(), "pw-" + os.urandom(8).hex()
    stub = Stub("ok")
    with serve_http(stub.handler()) as url:
        remote = url.replace("http://", f"http://me:{password}@")
        env = {"PLANRUN_REMOTE_CACHE_TOKEN": token, "PLANRUN_REMOTE_CACHE": remote}
        (tmp_path / "plan.yaml").write_text(LEAK + cached)
        r = run(tmp_path, *flags, env=env)
    assert r.code == 0, r
    assert "token=***" in r.out, r
    shown = recorded(tmp_path, r)
    assert token not in shown and password not in shown, shown


def test_a_password_spelled_with_escapes_in_the_url_is_masked_as_sent_too(tmp_path: Path) -> None:
    stub = Stub("ok")
    with serve_http(stub.handler()) as url:
        remote = url.replace("http://", "http://me:s3cret%2Fw0rd@")
        (tmp_path / "plan.yaml").write_text(
            LEAK + '  - id: decoded\n    tool: echo\n    args: {value: "s3cret/w0rd"}\n'
        )
        r = run(tmp_path, env={"PLANRUN_REMOTE_CACHE": remote})
    assert r.code == 0, r
    shown = recorded(tmp_path, r)
    assert "s3cret%2Fw0rd" not in shown and "s3cret/w0rd" not in shown, shown


def test_a_server_that_compresses_what_it_may_still_serves(tmp_path: Path) -> None:
    """planrun reads the bytes as stored: it must not offer an encoding it does not decode (a
    server or proxy that gzips whatever the client accepts would turn every entry corrupt)."""
    import gzip

    stub = Stub("ok")
    accepted: list[str | None] = []

    class Gzipping(stub.handler()):  # type: ignore[misc]
        def _send(self, code: int, body: bytes = b"", length: int | None = None) -> None:
            offer = self.headers.get("Accept-Encoding") or ""
            accepted.append(offer)
            if code != 200 or "gzip" not in offer or self.command != "GET":
                return super()._send(code, body, length)
            packed = gzip.compress(body)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(packed)))
            self.end_headers()
            self.wfile.write(packed)
            return None

    with serve_http(Gzipping) as url:
        a = checkout(tmp_path / "a")
        r = run(a, "--remote-cache", url)
        assert r.code == 0 and "remote cache" not in r.err, r
        b = checkout(tmp_path / "b")
        r = run(b, "--remote-cache", url)
    # (what was asked and offered, for a miss seen only under load in full runs: the first
    # checkout's uploads raise no warning then, yet the second misses every step)
    seen = (r.err, stub.requests, accepted)
    assert set(statuses(r).values()) == {"cached"}, seen
    assert "remote cache" not in r.err, r
    assert (b / "out" / "app.bin").read_bytes() == (a / "out" / "app.bin").read_bytes()


class Dripping(Stub):
    """A remote that sends its answers one byte at a time (`what`: `GET` drips the bodies of
    entries, `PUT` the answers to uploads), each byte within the timeout."""

    def __init__(self, what: str, pause: float) -> None:
        super().__init__("ok")
        self.what, self.pause, self.dripping = what, pause, False

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub, base = self, super().handler()

        class Handler(base):  # type: ignore[misc, valid-type]
            def _drip(self, data: bytes) -> None:
                with contextlib.suppress(OSError):
                    for n in range(len(data)):
                        self.wfile.write(data[n : n + 1])
                        self.wfile.flush()
                        threading.Event().wait(stub.pause)
                self.close_connection = True

            def do_GET(self) -> None:
                body = stub.files.get(self.path)
                if not stub.dripping or stub.what != "GET" or "/ac/" not in self.path or not body:
                    return super().do_GET()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self._drip(body)

            def do_PUT(self) -> None:
                if not stub.dripping or stub.what != "PUT":
                    return super().do_PUT()
                stub.files[self.path] = self.rfile.read(int(self.headers["Content-Length"]))
                pad = b"X-Pad: " + b"x" * 200 + b"\r\n"  # 250 bytes: a minute dripped
                return self._drip(b"HTTP/1.1 201 Created\r\n" + pad + b"Content-Length: 0\r\n\r\n")

        return Handler


@pytest.mark.parametrize("what", ["GET", "PUT"])
def test_a_remote_that_drips_its_answers_costs_about_one_timeout(tmp_path: Path, what: str) -> None:
    """Each byte comes within the timeout, so no read ever times out; the answer as a whole
    must still keep pace (the entry alone would take minutes), and the run goes on without it."""
    stub = Dripping(what, pause=0.2)
    with serve_http(stub.handler()) as url:
        if what == "GET":
            assert run(checkout(tmp_path / "a"), "--remote-cache", url).code == 0
        stub.dripping = True
        b = checkout(tmp_path / "b")
        r = run(b, "--remote-cache", url, "--remote-cache-timeout", "0.5")
    assert r.code == 0, r
    assert set(statuses(r).values()) == {"succeeded"}, r
    assert r.err.count("remote cache") == 1, r.err
    assert r.json["duration_s"] < 20, r.json  # dripped whole, the first answer alone: minutes


# ---- memory stays bounded whatever the remote sends ------------------------------------------

HUGE = 200 << 20  # an entry body far past any planrun writes (MAX_PACKED: 98 MiB)
MANY = 16  # steps asking at once: every transfer the client runs in parallel
PEAK_RSS = 300 << 20
"""The most a run may take, whatever the remote sends: planrun itself (~50 MB with httpx2)
plus the bodies held at once (remote.BODY_BUDGET, 98 MiB) while one is read, with room (170
MiB measured); the MANY answers read whole took 4.3 GiB."""


class Huge(BaseHTTPRequestHandler):
    """A remote whose every entry is HUGE bytes of junk, said in a Content-Length (`length`)
    or not (the body then ends when the connection closes)."""

    protocol_version = "HTTP/1.1"
    length = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if not self.path.startswith("/ac/"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        if self.length:
            self.send_header("Content-Length", str(HUGE))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        junk = bytes(1 << 20)
        with contextlib.suppress(OSError):  # planrun hangs up as soon as it has seen enough
            for _ in range(HUGE >> 20):
                self.wfile.write(junk)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("length", "many"), [(True, MANY), (False, 4)], ids=["content-length", "no-length"]
)
def test_huge_entries_for_many_steps_at_once_cost_bounded_memory(
    tmp_path: Path, length: bool, many: int
) -> None:
    """Every step misses, runs, and the run warns once; the bodies held at once stay within the
    budget: an answer over what an entry may be is refused unread when it says its length, and
    read up to that, one at a time, when it does not (4 of them, each 98 MiB read: a few s)."""
    steps = "".join(
        f"  - id: s{n}\n    tool: shell\n    args: {{cmd: 'echo {n}'}}\n    cache: true\n"
        for n in range(many)
    )
    (tmp_path / "plan.yaml").write_text(f"steps:\n{steps}")
    handler = type("Handler", (Huge,), {"length": length})
    with serve_http(handler) as url:
        r, peak = peak_run(
            tmp_path, "run", "plan.yaml", "-j", str(many), "--output", "json",
            "--remote-cache", url, "--remote-cache-read-only",
        )  # fmt: skip
    assert r.code == 0, r
    assert_no_traceback(r)
    assert set(statuses(r).values()) == {"succeeded"}, r
    assert r.err.count("remote cache") == 1, r.err
    assert "rejected" in r.err, r.err
    assert peak < PEAK_RSS, f"peak RSS {peak >> 20} MiB"

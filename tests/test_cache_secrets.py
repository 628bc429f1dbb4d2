"""A shared cache holds no secret: not in clear, not in a digest that can be guessed offline."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from planrun.cache.keys import canonical
from tests.conftest import assert_no_traceback, planrun

PIN = "48213"
KEY = "73019"
CMD = "test {} -gt 0 && mkdir -p out && echo ok > out/r.txt"

PIN_PLAN = """
secrets: [pin, API_KEY]
dotenv: [.env]
steps:
  - id: check
    tool: shell
    args: {cmd: "test ${pin} -gt 0 && mkdir -p out && echo ok > out/r.txt"}
    outputs: ["out/r.txt"]
  - {id: after, tool: shell, args: {cmd: "echo after"}, depends_on: [check], cache: true}
"""


def go(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    base = {"XDG_CACHE_HOME": str(cwd / "home-cache"), "PLANRUN_CACHE_SIGNING_KEY": ""}
    r = planrun("run", "plan.yaml", "--output", "json", *args, cwd=cwd, env={**base, **(env or {})})
    assert_no_traceback(r)
    return r


def statuses(r: Any) -> dict[str, str]:
    return {s["id"]: s["status"] for s in r.json["steps"]}


def stored(cache: Path) -> tuple[bytes, set[str]]:
    """Everything a cache directory holds (names and contents) and every hex digest in it."""
    data = b"\n".join(
        bytes(p.relative_to(cache)) + b"\0" + (p.read_bytes() if p.is_file() else b"")
        for p in sorted(cache.rglob("*"))
    )
    return data, {d.decode() for d in re.findall(rb"[0-9a-f]{64}", data)}


def _templates() -> list[bytes]:
    """What an attacker with the plan in hand hashes for each candidate PIN (`@@`): the PIN,
    the command, the step's args digest as planrun made it, a dotenv file holding it."""
    args = {"cmd": CMD.format("@@")}
    return [
        b"@@",
        CMD.format("@@").encode(),
        canonical(["shell", args, [], ["out/r.txt"], {}]),
        canonical(args),
        b"API_KEY=@@\n",
        canonical({"API_KEY": "@@"}),
    ]


def guessed(digests: set[str]) -> list[tuple[str, int]]:
    """Every candidate whose digest in any form is in `digests` (600 000 SHA-256s)."""
    raw = {bytes.fromhex(d) for d in digests}
    found = []
    for n, template in enumerate(_templates()):
        head, tail = template.split(b"@@")
        start = hashlib.sha256(head)
        for pin in range(100_000):
            h = start.copy()
            h.update(b"%05d" % pin + tail)
            if h.digest() in raw:
                found.append((f"{pin:05d}", n))
    return found


@pytest.mark.slow  # 600 000 SHA-256s: about 2 s
def test_a_step_reading_a_secret_pin_leaves_nothing_guessable_in_the_cache(
    tmp_path: Path,
) -> None:
    (tmp_path / "plan.yaml").write_text(PIN_PLAN)
    (tmp_path / ".env").write_text(f"API_KEY={KEY}\n")
    r = go(tmp_path, "--var", f"pin={PIN}")
    assert r.code == 0 and statuses(r) == {"check": "succeeded", "after": "succeeded"}, r
    r = go(tmp_path, "--var", f"pin={PIN}")  # this user's key is the same on the next run
    assert statuses(r) == {"check": "cached", "after": "cached"}, r

    data, digests = stored(tmp_path / ".planrun/cache")
    assert digests and b"entries" in data
    for secret in (PIN, KEY):
        assert secret.encode() not in data
    assert guessed(digests) == []  # 600 000 guesses against every digest it holds: none is one


def test_an_output_or_a_source_named_by_a_secret_is_not_stored(tmp_path: Path) -> None:
    plan = """
secrets: [tok]
steps:
  - id: make
    tool: shell
    args: {cmd: "mkdir -p out && touch out/${tok}.txt"}
    outputs: ["out/*.txt"]
  - {id: read, tool: shell, args: {cmd: "ls in | wc -l"}, sources: ["in/*"]}
"""
    (tmp_path / "plan.yaml").write_text(plan)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "Zq81xv").write_text("x")
    (tmp_path / "in" / "plain").write_text("y")
    r = go(tmp_path, "--var", "tok=Zq81xv")
    assert r.code == 0 and statuses(r) == {"make": "succeeded", "read": "succeeded"}, r
    assert "step 'make': output name holds a secret: not stored in the cache" in r.err
    assert (tmp_path / "out" / "Zq81xv.txt").exists()
    data, _ = stored(tmp_path / ".planrun/cache")
    assert b"Zq81xv" not in data and b"plain" not in data  # no manifest that names `in/`
    r = go(tmp_path, "--var", "tok=Zq81xv", "--events", "e.jsonl")
    assert statuses(r) == {"make": "succeeded", "read": "cached"}, r
    (tmp_path / "in" / "plain").write_text("z")
    r = go(tmp_path, "--var", "tok=Zq81xv", "--explain")
    assert statuses(r)["read"] == "succeeded" and "read started [shell]: sources changed" in r.err
    assert "Zq81xv" not in r.err + r.out


def test_steps_reading_a_secret_share_hits_only_under_one_signing_key(tmp_path: Path) -> None:
    plan = """
secrets: [pin]
steps:
  - {id: secret, tool: shell, args: {cmd: "test ${pin} -gt 0"}, cache: true}
  - {id: plain, tool: shell, args: {cmd: "echo plain"}, cache: true}
"""
    shared = tmp_path / "shared-cache"
    homes = []
    for name in ("one", "two", "three"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "plan.yaml").write_text(plan)
        homes.append(tmp_path / name)
    one, two, three = homes
    pin = ("--var", f"pin={PIN}", "--cache-dir", str(shared))
    assert statuses(go(one, *pin)) == {"secret": "succeeded", "plain": "succeeded"}
    user_key = one / "home-cache/planrun/secret"
    assert user_key.stat().st_mode & 0o777 == 0o600
    # another user (another cache home): the plain step hits, the one that read the PIN not
    assert statuses(go(two, *pin)) == {"secret": "succeeded", "plain": "cached"}
    signed = {"PLANRUN_CACHE_SIGNING_KEY": "team-key-Fh29"}
    assert statuses(go(two, *pin, env=signed))["secret"] == "succeeded"
    assert statuses(go(three, *pin, env=signed)) == {"secret": "cached", "plain": "cached"}
    other = {"PLANRUN_CACHE_SIGNING_KEY": "another-key"}
    assert statuses(go(three, *pin, env=other))["secret"] == "succeeded"

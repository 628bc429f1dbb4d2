"""A shared cache holds no secret: not in clear, not in a digest that can be guessed offline."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from planrun.cache.keys import canonical
from tests.conftest import assert_no_traceback, planrun
from tests.testkit import (
    ALL_REPORTS,
    RESULT_TOKEN,
    run_plan,
    run_then_resume,
    shown_and_stored,
    write_indented_plan,
)

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


def test_large_outputs_holding_a_secret_are_not_stored_and_a_damaged_one_is_a_miss(
    tmp_path: Path,
) -> None:
    """Outputs over the in-memory size are scanned for secrets in chunks (a value straddling
    two chunks included) and checked against their hash before anything is restored."""
    script = (
        "import sys\n"
        "data = bytearray(b'x' * (9 << 20))\n"
        "if sys.argv[1] == 'leak':\n"
        "    data[(1 << 20) - 3:(1 << 20) + 7] = b'hunter2-42'\n"
        "open(sys.argv[2], 'wb').write(data)\n"
    )
    (tmp_path / "make.py").write_text(script)
    write_indented_plan(
        tmp_path,
        """
    variables: {token: hunter2-42}
    secrets: [token]
    steps:
      - {id: leak, tool: shell, args: {cmd: "python3 make.py leak leak.bin"}, outputs: [leak.bin]}
      - {id: safe, tool: shell, args: {cmd: "python3 make.py safe safe.bin"}, outputs: [safe.bin]}
    """,
    )
    r = run_plan(tmp_path)
    assert r.code == 0, r
    assert "step 'leak': result held a secret: not stored in the cache" in r.err
    for blob in (tmp_path / ".planrun/cache/blobs").iterdir():
        assert b"hunter2-42" not in blob.read_bytes()
    (blob,) = [b for b in (tmp_path / ".planrun/cache/blobs").iterdir() if b.stat().st_size > 1e6]
    damaged = bytearray(blob.read_bytes())
    damaged[5 << 20] = ord("y")
    blob.write_bytes(damaged)
    (tmp_path / "safe.bin").unlink()
    r = run_plan(tmp_path, "--output", "json")
    assert statuses(r) == {"leak": "succeeded", "safe": "succeeded"}, r
    assert "corrupt" in r.err
    assert (tmp_path / "safe.bin").read_bytes() == b"x" * (9 << 20)


def test_a_step_result_bound_as_a_secret_is_never_stored_in_the_cache(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: echo
            args: {value: "ResultToken-${'q7w3'}"}
            result_variable: token
            cache: true
          - id: use
            tool: shell
            args: {cmd: "test '${token}' = ResultToken-''q7w3 && echo received-real-value"}
        """,
    )
    first = run("run", "p.yaml", *ALL_REPORTS)
    second = run("run", "p.yaml", "--explain")
    for r in (first, second):
        assert r.code == 0, str(r)
        assert "received-real-value" in r.err
        assert "result held a secret: not stored in the cache" in r.err
    assert RESULT_TOKEN not in shown_and_stored(run, tmp_path, first, second)


def test_a_cache_hit_that_holds_a_secret_is_produced_again_on_resume(run, write, tmp_path):
    # The entry was made before `token` was declared a secret, by a step whose key the secret
    # is not part of (it reads the token from a file: a step that reads the secret itself is
    # keyed anew once it is one). The hit is shown masked; its record must say so, or resume
    # hands `***` on.
    plan = """
        {secrets}
        steps:
          - id: login
            tool: shell
            args: {{cmd: "cat tok"}}
            sources: [tok]
            result_variable: got
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${{got.stdout | trim}}' = ResultToken-""q7w3 && echo received-real-value
        """
    (tmp_path / "tok").write_text(RESULT_TOKEN + "\n")
    var = ("--var", f"token={RESULT_TOKEN}")
    write("p.yaml", plan.format(secrets=""))
    assert run("run", "p.yaml", *var).code == 1
    write("p.yaml", plan.format(secrets="secrets: [token]"))
    (tmp_path / ".planrun/state/p.json").unlink()
    first = run("run", "p.yaml", *var, *ALL_REPORTS)
    assert first.code == 1, str(first)
    assert "login cached" in first.err
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["steps"]["login"]["result_masked"] is True
    again = run_then_resume(run, tmp_path, *var, *ALL_REPORTS)
    assert "received-real-value" in again.err
    for r in (first, again):
        assert RESULT_TOKEN not in r.out + r.err


@pytest.mark.parametrize("flags", [[], ["--no-cache"]], ids=["cache", "no-cache"])
def test_the_signing_key_is_a_secret_of_every_run(tmp_path: Path, flags: list[str]) -> None:
    """The signing key unlocks every digest that protects a secret, and signs entries: a step
    that prints it (it is in every step's environment) shows `***`, and is not stored."""
    key = "team-key-" + "Qm7x" * 4
    plan = """
steps:
  - {id: leak, tool: shell, args: {cmd: "echo key=$PLANRUN_CACHE_SIGNING_KEY"}, cache: true}
  - {id: echo, tool: echo, args: {value: "${env.PLANRUN_CACHE_SIGNING_KEY}"}, cache: true}
"""
    (tmp_path / "plan.yaml").write_text(plan)
    r = go(tmp_path, "--events", "ev.jsonl", *flags, env={"PLANRUN_CACHE_SIGNING_KEY": key})
    assert r.code == 0, r
    assert statuses(r) == {"leak": "succeeded", "echo": "succeeded"}
    assert "key=***" in r.out, r
    kept = [(tmp_path / "ev.jsonl").read_text(), r.out, r.err]
    kept += [
        p.read_text(errors="replace") for p in (tmp_path / ".planrun").rglob("*") if p.is_file()
    ]
    assert not [text for text in kept if key in text]


def test_the_dry_run_and_show_mask_the_cache_s_credentials(tmp_path: Path) -> None:
    """What a run masks, its preview masks too: args that read the signing key, the remote's
    token or the password in its URL show `***`."""
    key, token, password = "key-" + "Qm7x" * 3, "tok-" + "Zp4w" * 3, "pw-" + "Lk2r" * 3
    plan = """
steps:
  - id: leak
    tool: echo
    args:
      value: "${env.PLANRUN_CACHE_SIGNING_KEY} ${env.PLANRUN_REMOTE_CACHE_TOKEN} ${env.REMOTE}"
    cache: true
"""
    (tmp_path / "plan.yaml").write_text(plan)
    env = {
        "PLANRUN_CACHE_SIGNING_KEY": key,
        "PLANRUN_REMOTE_CACHE_TOKEN": token,
        "PLANRUN_REMOTE_CACHE": f"http://me:{password}@127.0.0.1:9",
        "REMOTE": f"http://me:{password}@127.0.0.1:9",
    }
    for args in (
        ("run", "plan.yaml", "--dry-run"),
        ("run", "plan.yaml", "--dry-run", "--output", "json"),
        ("show", "plan.yaml", "leak"),
    ):
        r = planrun(*args, cwd=tmp_path, env=env)
        assert_no_traceback(r)
        assert r.code == 0, r
        assert "***" in r.out, r
        assert not [s for s in (key, token, password) if s in r.out + r.err], r

"""A `shell` string `cmd` behaves exactly as `/bin/sh -c CMD`: same stdout, stderr, exit code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import planrun

COMMANDS = [
    "echo -e a",
    "echo --version",
    "echo hello   world",
    "true --help",
    "false --help",
    "true",
    ":",
    "cat nonexist",
    "ls nonexist",
    "wc -c nonexist",
    "nonexistent_command_xyz",
    "nonexistent_command_xyz --flag",
    "pwd",
    "pwd -P",
    "env",
    "test -d .",
    "[ -d . ]",
    "kill -l",
    "type ls",
    "command -v ls",
    "echo $0",
    "printf a%sb c",
    "basename /a/b",
    "dirname /a/b",
    "seq 3",
    "expr 1 + 2",
    "umask",
    "ulimit -n",
    "exit 3",
    "/bin/echo x",
    "uname -s",
    "echo a; echo b >&2; exit 4",
]


MARKS = ("PLANRUN_RUN_ID=", "PLANRUN_STEP_ID=")


def test_string_commands_match_sh_c(tmp_path: Path) -> None:
    steps = [
        {"id": f"c{i}", "tool": "shell", "args": {"cmd": cmd, "check": False}}
        for i, cmd in enumerate(COMMANDS)
    ]
    (tmp_path / "plan.json").write_text(json.dumps({"steps": steps}))
    env = {**os.environ, "NO_COLOR": "1"}
    r = planrun("run", "plan.json", "--no-state", "--output", "json", "-j", "2", cwd=tmp_path)
    assert r.code == 0, r
    got = {s["id"]: s["result"] for s in r.json["steps"]}
    # planrun adds these two to every command's environment (docs/state.md), and only these
    env_out = got[f"c{COMMANDS.index('env')}"]
    marks = [v for v in env_out["stdout"].splitlines() if v.startswith(MARKS)]
    assert [m.split("=")[0] + "=" for m in sorted(marks)] == list(MARKS)
    env_out["stdout"] = "".join(
        v for v in env_out["stdout"].splitlines(keepends=True) if not v.startswith(MARKS)
    )
    differ = []
    for i, cmd in enumerate(COMMANDS):
        sh = subprocess.run(
            ["/bin/sh", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        want = {"stdout": sh.stdout, "stderr": sh.stderr, "exit_code": sh.returncode}
        if got[f"c{i}"] != want:
            differ.append((cmd, got[f"c{i}"], want))
    assert not differ, "\n".join(f"{c!r}: planrun {g} != sh {w}" for c, g, w in differ)

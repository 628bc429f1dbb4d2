"""The run state store: turns the event stream into a durable, resumable state file.

Layout, for a state file `NAME.json`:

- `NAME.json`          the snapshot: complete, always valid JSON (one step per line), replaced
                       atomically (temp file + fsync + os.replace).
- `NAME.json.journal`  append-only JSON Lines written since that snapshot: a header line
                       `{"journal": TOKEN}` naming the snapshot it extends, then one line per
                       change, each written with a single os.write on an O_APPEND descriptor.
- `NAME.json.lock`     the pid of the run holding the state and where it lives (kernel boot
                       id, pid namespace); flock-ed while held; a flock whose recorded pid is
                       dead here is stale and taken over: planrun/state/lock.py).

A change costs one small append, so a run of N steps costs O(N), not O(N^2) as rewriting
the whole file after every step would. A written line is in the kernel, so it survives a
`kill -9` of planrun; only a power loss can lose the lines appended since the last fsync
(the snapshot, fsync-ed before every replace, is never torn). The journal is folded into
the snapshot at run start, when it grows past the snapshot's size, and at `close()`; in
between, the snapshot is refreshed for readers (written by a thread, keeping the journal:
it records how many journal bytes it holds).
"""

from planrun.state.journal import no_state, read_state
from planrun.state.model import RunState, StepState, default_state_path
from planrun.state.store import StateStore
from planrun.state.view import render_status_text, status_document

__all__ = [
    "RunState",
    "StateStore",
    "StepState",
    "default_state_path",
    "no_state",
    "read_state",
    "render_status_text",
    "status_document",
]

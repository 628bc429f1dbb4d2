"""A remote that never answers: a port on 127.0.0.1 that takes connections and says nothing (the
tests and the benchmarks of an unreachable remote cache)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def black_hole() -> Iterator[tuple[str, list[socket.socket]]]:
    """Yield the port's URL and the connections taken so far. Its accept thread has ended
    before the port's descriptor is closed: a thread still in `accept` on a descriptor closed
    under it (or about to enter it with the old number) would take the connections of whatever
    socket is given that number next, such as another server's listening socket."""
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(128)
        taken: list[socket.socket] = []

        def take() -> None:
            with contextlib.suppress(OSError):  # ends when the port is shut down
                while True:
                    taken.append(hole.accept()[0])

        thread = threading.Thread(target=take, name="black-hole", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{hole.getsockname()[1]}", taken
        finally:
            # a shut-down listening socket fails the `accept` waiting on it, and any later one,
            # while its descriptor still names it
            with contextlib.suppress(OSError):
                hole.shutdown(socket.SHUT_RDWR)
            thread.join()
            for conn in taken:
                conn.close()

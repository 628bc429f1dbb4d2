"""A real nginx serving WebDAV PUT/GET/HEAD on 127.0.0.1: the remote cache of the tests and the
benchmarks (started in a directory of its own, stopped when the block ends)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

CONF = """
daemon off;
master_process off;
worker_processes 1;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{ worker_connections 512; }}
http {{
    log_format requests '$request_method $uri $status';
    access_log {access};
    client_body_temp_path {d}/tmp;
    proxy_temp_path {d}/tmp;
    fastcgi_temp_path {d}/tmp;
    uwsgi_temp_path {d}/tmp;
    scgi_temp_path {d}/tmp;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port};
        root {d}/data;
        client_max_body_size 0;
        location / {{
            {auth}
            dav_methods PUT;
            create_full_put_path on;
            dav_access user:rw;
        }}
    }}
}}
"""


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found is None and os.access("/usr/sbin/nginx", os.X_OK):
        found = "/usr/sbin/nginx"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False


@contextlib.contextmanager
def nginx_server(
    root: Path, token: str | None = None, *, log: bool = False
) -> Iterator[tuple[str, Path]]:
    """nginx on a free port of 127.0.0.1 with its files under `root`; yields its URL and the
    directory it stores what is PUT in. `token`: requests without `Bearer TOKEN` get 401. `log`:
    each request is a line `METHOD PATH STATUS` of `root/access.log`, written as it is answered.
    RuntimeError when there is no nginx or it does not start."""
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError("nginx is not installed (Debian: apt-get install nginx-core)")
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    auth = f'if ($http_authorization != "Bearer {token}") {{ return 401; }}' if token else ""
    proc: subprocess.Popen[bytes] | None = None
    for _attempt in range(5):  # a free port may be taken between the look and the bind
        port = free_port()
        conf = root / "nginx.conf"
        access = f"{root}/access.log requests" if log else "off"
        conf.write_text(CONF.format(d=root, port=port, auth=auth, access=access))
        proc = subprocess.Popen(
            [binary, "-p", str(root), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        while proc.poll() is None and not _answers(port):  # until it listens, or has exited
            time.sleep(0.02)
        if proc.poll() is None:
            break
    if proc is None or proc.poll() is not None:
        log = root / "error.log"
        raise RuntimeError(f"nginx did not start: {log.read_text()[-500:] if log.exists() else ''}")
    try:
        yield f"http://127.0.0.1:{port}", root / "data"
    finally:
        proc.terminate()
        proc.wait(timeout=30)

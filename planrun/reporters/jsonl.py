"""`--events FILE`: append every event of a run to FILE as one JSON object per line."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
from pathlib import Path
from typing import Any

from planrun.plan.definition import PlanNode
from planrun.reporters.failures import WriteFailures
from planrun.run.events import RunEvent, StepOutput, event_json


def _fallback(value: Any) -> Any:
    """Make values json can't encode readable instead of failing the run over a log line."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, PlanNode):  # part of a plan: `as`, not asdict's `as_`
        return value.to_dict()
    if hasattr(type(value), "__dataclass_fields__"):  # dataclasses.is_dataclass's own test
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)  # pydantic models
    if callable(dump):
        return dump(mode="json")
    return str(value)


_encode = json.JSONEncoder(ensure_ascii=False, default=_fallback).encode
_encode_ascii = json.JSONEncoder(ensure_ascii=True, default=_fallback).encode


def _open_append(path: Path) -> int:
    """The file opened for appending without ever blocking: a FIFO no one reads would hold
    `open` forever (and the run with it, deaf to SIGTERM); it is refused instead. A FIFO with a
    reader, /dev/stdout or a regular file take the lines as they come."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "it is a FIFO with no reader", str(path)) from None
        raise
    os.set_blocking(fd, True)
    return fd


class JsonLinesReporter:
    """EventBus subscriber writing `events.event_json()` lines; `step.output` is not written.

    The file is opened for appending, unbuffered: each event is one `write()` of one whole
    line, so `tail -f` sees it at once and concurrent appenders never split a line.
    """

    def __init__(self, path: str | os.PathLike[str], failures: WriteFailures | None = None) -> None:
        self.path = Path(path)
        # Where a write that fails is remembered: the run's record, told by the command.
        self.failures = WriteFailures() if failures is None else failures
        # Like pytest's --junitxml, create the directory so `--events out/run.jsonl` just works.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_append(self.path)
        try:
            self._file: Any = os.fdopen(fd, "ab", buffering=0)
        except OSError as exc:  # seeking to the end (procfs: EINVAL) names no file: this one
            os.close(fd)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def handle(self, event: RunEvent) -> None:
        if isinstance(event, StepOutput) or self._file is None:
            return
        doc = event_json(event)
        try:
            line = (_encode(doc) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from undecodable tool output
            line = (_encode_ascii(doc) + "\n").encode("ascii")
        try:
            self._file.write(line)
        except OSError as exc:  # a full disk: the run goes on, the command says so at the end
            self.failures.add(self.path, exc)
            self._close_quietly()

    def _close_quietly(self) -> None:
        file, self._file = self._file, None
        with contextlib.suppress(OSError):
            file.close()

    __call__ = handle  # so `bus.subscribe(reporter)` works as well as `reporter.handle`

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self.failures.add(self.path, exc)
            self._file = None

"""The supervisor's status file: what the last checkpoint did, the last error, who runs.

``<state_dir>/status.json`` is replaced atomically on every change; ``journal
status`` reads it, and decides whether a supervisor runs from the flock it holds on
``<state_dir>/supervise.lock`` for its lifetime, not from the recorded pid (a pid is
reused, and a container's PID 1 is alive in every other PID namespace).
"""

from __future__ import annotations

import os
import time

import msgspec

from ..atomic import write_file_atomic
from ..local.state import lock_held
from ..paths import STATUS_FILE, SUPERVISE_LOCK, TMP_DIR


class LastCheckpoint(msgspec.Struct, kw_only=True):
    seq: int | None
    time: float
    seconds: float
    bytes: int
    objects: int
    idle: bool = False      # nothing changed; ``seq`` is the last committed one


class RestoreRecord(msgspec.Struct, kw_only=True):
    """What the startup restore did: which checkpoint each tree came from."""

    time: float
    seq: int | None                 # the store's newest checkpoint
    complete: bool
    fallback: bool                  # some tree or file came from an older checkpoint than ``seq``
    trees: dict[str, int | None] = {}
    notes: list[str] = []           # one line per tree restored from a fallback


class Status(msgspec.Struct, kw_only=True):
    pid: int | None = None
    started: float | None = None
    stopped: float | None = None
    interval: float | None = None
    child_pid: int | None = None
    restore: RestoreRecord | None = None
    last: LastCheckpoint | None = None
    last_success: float | None = None
    last_error: str | None = None
    last_error_time: float | None = None
    warnings: list[str] = []
    skipped_ticks: int = 0
    failed_ticks: int = 0
    input_socket: str | None = None     # where the input server listens (design §20)
    input_error: str | None = None      # why it does not (None while it serves)


class StatusReport(msgspec.Struct, kw_only=True):
    """What ``journal status`` shows."""

    running: bool
    pid: int | None
    lag_seconds: float | None
    status: Status


def read_status(state_dir: str) -> Status:
    """The recorded status, or an empty one when there is none or it is unreadable."""
    try:
        with open(os.path.join(state_dir, STATUS_FILE), "rb") as fh:
            return msgspec.json.decode(fh.read(), type=Status)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return Status()


def write_status(state_dir: str, status: Status) -> None:
    os.makedirs(state_dir, exist_ok=True)
    write_file_atomic(os.path.join(state_dir, STATUS_FILE), msgspec.json.encode(status),
                      os.path.join(state_dir, TMP_DIR))


def report_status(state_dir: str) -> StatusReport:
    status = read_status(state_dir)
    running = lock_held(state_dir, SUPERVISE_LOCK)
    lag = time.time() - status.last_success if status.last_success else None
    return StatusReport(running=running, pid=status.pid if running else None, lag_seconds=lag, status=status)


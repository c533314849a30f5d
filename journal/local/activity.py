"""What journal last did on this machine, however it ran: ``<state_dir>/activity/``.

``journal status`` reads these records; a checkpoint or restore run by cron, by hand,
by ``journal migrate`` or by ``journal supervise`` writes them the same way:

* ``ok``: an empty file whose mtime is the end of the last successful checkpoint run,
  idle or not (the console's idle path only touches it: ``cli/launch.py``);
* ``checkpoint.json``: the last checkpoint that committed a manifest;
* ``run.json``: the last checkpoint run that walked the trees, with its warnings;
* ``error.json``: the last error of a checkpoint or restore, with its time;
* ``restore.json``: the last restore into the live trees (complete, fallback, incomplete).

Each record is one file replaced whole (never read, changed and written back), so
writers that run at the same time (cron beside a supervisor) cannot lose each other's
updates; the newest write of each kind wins. The records are a report, not state:
not fsynced, and failing to write one never fails the operation that reports it.
"""

from __future__ import annotations

import contextlib
import os
import time

import msgspec

from ..atomic import makedirs, replace_file
from ..paths import ACTIVITY_DIR, ACTIVITY_OK, PRIVATE_DIR, PRIVATE_FILE

CHECKPOINT, RUN, ERROR, RESTORE = "checkpoint.json", "run.json", "error.json", "restore.json"


class CheckpointRecord(msgspec.Struct, kw_only=True):
    """One checkpoint run, in the words of ``journal checkpoint`` and ``journal log``."""

    seq: int | None                 # the checkpoint committed; None for an idle run
    time: float
    seconds: float
    files: int = 0                  # files in the configured trees (directories apart)
    directories: int = 0
    files_changed: int = 0
    directories_changed: int = 0
    files_deleted: int = 0
    directories_deleted: int = 0
    deletions_held: int = 0
    bytes_uploaded: int = 0         # the manifest included
    objects_uploaded: int = 0
    pid: int = 0
    warnings: list[str] = []


class RestoreRecord(msgspec.Struct, kw_only=True):
    """What a restore into the live trees did: which checkpoint each tree came from."""

    time: float
    seq: int | None                 # the store's newest checkpoint
    complete: bool
    fallback: bool                  # some tree or file came from an older checkpoint than ``seq``
    trees: dict[str, int | None] = {}
    notes: list[str] = []           # one line per tree restored from a fallback
    lineage: str | None = None      # fresh, hot or stale (design §11, "Lineage")
    fork: int | None = None         # the fork that keeps this disk's local work, when one was made
    fork_note: str | None = None    # ... what it holds, and how to look at it
    include: list[str] = []         # a partial restore: its patterns (only what they select was restored)


class ErrorRecord(msgspec.Struct, kw_only=True):
    time: float
    op: str                         # checkpoint, restore, supervise
    message: str
    pid: int = 0


class Activity(msgspec.Struct, kw_only=True):
    """Every record, as ``read`` finds them (a missing or unreadable one is None)."""

    last_success: float | None = None   # ``ok``'s mtime
    checkpoint: CheckpointRecord | None = None
    run: CheckpointRecord | None = None
    error: ErrorRecord | None = None
    restore: RestoreRecord | None = None


def checkpoint_record(result) -> CheckpointRecord:
    """The record of a ``CheckpointResult`` (totals over its trees)."""
    trees = result.trees
    return CheckpointRecord(
        seq=result.seq, time=time.time(), seconds=result.seconds, files=sum(t.files for t in trees),
        directories=sum(t.directories for t in trees), files_changed=sum(t.changed for t in trees),
        directories_changed=sum(t.dirs_changed for t in trees), files_deleted=sum(t.deleted for t in trees),
        directories_deleted=sum(t.dirs_deleted for t in trees),
        deletions_held=sum(t.kept_deleted for t in trees), bytes_uploaded=result.bytes,
        objects_uploaded=result.objects, pid=os.getpid(), warnings=list(result.warnings)[-10:])


def checkpoint_done(state_dir: str, result, *, walked: bool, ok: bool = True) -> None:
    """A checkpoint run ended: record it when it walked the trees (``walked``), and as
    the last checkpoint when it committed one; touch ``ok`` when it succeeded (``ok``:
    not a checkpoint that committed while some paths failed)."""
    if walked:
        record = checkpoint_record(result)
        _write(state_dir, RUN, record)
        if result.seq is not None:
            _write(state_dir, CHECKPOINT, record)
    if ok:
        touch_ok(state_dir)


def restore_record(result) -> RestoreRecord:
    """The record of a ``RestoreResult``."""
    fork = result.fork.seq if result.fork is not None else None
    note = None
    if fork is not None:
        note = (f"{len(result.fork.work)} local path(s) this disk held that checkpoint {result.fork.onto} lacks "
                f"(built on checkpoint {result.fork.base}); `journal ls --at {fork}` shows them")
    return RestoreRecord(time=time.time(), seq=result.seq, complete=result.complete, fallback=result.fallback,
                         trees={t.name: t.seq for t in result.trees}, notes=result.fallback_notes(),
                         lineage=result.lineage, fork=fork, fork_note=note, include=result.include)


def restore_done(state_dir: str, record: RestoreRecord) -> None:
    _write(state_dir, RESTORE, record)


def failed(state_dir: str, op: str, message: str) -> None:
    """Record the error an operation ends with (only where the state directory exists)."""
    if os.path.isdir(state_dir):
        _write(state_dir, ERROR, ErrorRecord(time=time.time(), op=op, message=message, pid=os.getpid()))


def touch_ok(state_dir: str) -> None:
    path = os.path.join(state_dir, ACTIVITY_DIR, ACTIVITY_OK)
    try:
        os.utime(path)
    except FileNotFoundError:
        try:
            makedirs(os.path.dirname(path), PRIVATE_DIR)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, PRIVATE_FILE))
        except OSError:
            pass
    except OSError:
        pass


def read(state_dir: str) -> Activity:
    where = os.path.join(state_dir, ACTIVITY_DIR)
    try:
        ok = os.stat(os.path.join(where, ACTIVITY_OK)).st_mtime
    except OSError:
        ok = None
    return Activity(last_success=ok, checkpoint=_read(where, CHECKPOINT, CheckpointRecord),
                    run=_read(where, RUN, CheckpointRecord), error=_read(where, ERROR, ErrorRecord),
                    restore=_read(where, RESTORE, RestoreRecord))


def _read(where: str, name: str, kind):
    try:
        with open(os.path.join(where, name), "rb") as fh:
            return msgspec.json.decode(fh.read(), type=kind)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _write(state_dir: str, name: str, record) -> None:
    """Replace one record whole (a temp file renamed over it); best effort."""
    where = os.path.join(state_dir, ACTIVITY_DIR)
    with contextlib.suppress(OSError):
        makedirs(where, PRIVATE_DIR)
        replace_file(os.path.join(where, name), msgspec.json.encode(record))

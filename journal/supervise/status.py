"""``journal status``: the supervisor's status file, merged with what every run recorded.

``<state_dir>/status.json`` is the supervisor's own record (its pid, CMD, its ticks),
replaced atomically on every change. The last checkpoint, run, restore and error come
from ``local/activity.py``, which every checkpoint and restore writes however it runs
(cron, by hand, migrate, the supervisor). Whether a supervisor runs is decided from
the flock it holds on ``<state_dir>/supervise.lock`` for its lifetime, not from the
recorded pid (a pid is reused, and a container's PID 1 is alive in every other PID
namespace). Everything ``status.json`` says of a running supervisor is judged live
(``judge_supervisor``): when none runs, its pid, CMD's pid, its timer and its input
socket are stale, and the report says so; when one runs, its socket is served only
if something answers on it.
"""

from __future__ import annotations

import enum
import os
import socket
import stat
import time

import msgspec

from ..atomic import write_file_atomic
from ..local import activity
from ..local.activity import CheckpointRecord, RestoreRecord
from ..local.private import open_state_dir
from ..local.state import lock_held, read_state
from ..paths import BASE_DIR, CHUNKS_DIR, MAPS_DIR, PAGES_DIR, SPOOL_DIR, STATUS_FILE, SUPERVISE_LOCK, TMP_DIR


class LastCheckpoint(msgspec.Struct, kw_only=True):
    """The supervisor's last tick (``--json``: the words of ``local/activity.py``)."""

    seq: int | None
    time: float
    seconds: float
    bytes: int = msgspec.field(name="bytes_uploaded")
    objects: int = msgspec.field(name="objects_uploaded")
    idle: bool = False      # nothing changed; ``seq`` is the last committed one


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
    checkpoints: int = 0            # committed by this supervisor
    last_commit_time: float | None = None
    bytes_uploaded: int = 0         # by this supervisor's checkpoints, manifests included
    objects_uploaded: int = 0


class SupervisorState(str, enum.Enum):
    RUNNING = "running"     # a process holds supervise.lock
    STOPPED = "stopped"     # none does, and the last one recorded its stop
    DIED = "died"           # none does, and the last one recorded no stop: killed, or its container went away
    NEVER = "never"         # no supervisor has run with this state directory


class SupervisorReport(msgspec.Struct, kw_only=True):
    """The supervisor as it is now, not as ``status.json`` last recorded it."""

    state: SupervisorState
    pid: int | None                 # the running supervisor's (None when none runs)
    cmd_pid: int | None             # CMD's, while a supervisor runs
    interval: float | None          # its checkpoint timer, while it runs
    input_socket: str | None        # the path it serves (or served) inputs on
    input_served: bool              # something answers on it now
    input_error: str | None         # why it is not served, now
    stale: list[str] = []           # what status.json says that no longer holds, one sentence each


class ErrorReport(msgspec.Struct, kw_only=True):
    """The newest error of any run, and whether a success came after it."""

    time: float
    op: str
    message: str
    cleared: bool
    cleared_at: float | None = None     # the newest success after it


class LocalSize(msgspec.Struct, kw_only=True):
    """The bytes of the state directory's regular files, of its four caches, and of the
    packs being built in its spool (design §10); beside them, the bytes of the live
    trees' files as the local state last recorded them (None: no state, or one without
    trees) and the local state's share of those."""

    bytes: int = 0
    chunks: int = msgspec.field(default=0, name="chunks_bytes")
    sqlite_base: int = msgspec.field(default=0, name="sqlite_base_bytes")
    maps: int = msgspec.field(default=0, name="maps_bytes")
    pages: int = msgspec.field(default=0, name="pages_bytes")
    spool: int = msgspec.field(default=0, name="spool_bytes")
    live: int | None = msgspec.field(default=None, name="live_trees_bytes")
    share: float | None = msgspec.field(default=None, name="share_of_live_trees")


class StatusReport(msgspec.Struct, kw_only=True):
    """What ``journal status`` shows: every way journal runs here (cron, by hand,
    migrate, the supervisor) records its checkpoints, restores and errors
    (``local/activity.py``); ``status`` is the supervisor's own file."""

    running: bool
    pid: int | None
    lag_seconds: float | None               # since the last successful checkpoint run, idle or not
    last_success: float | None
    last_checkpoint: CheckpointRecord | None  # the last one that committed a manifest
    last_run: CheckpointRecord | None         # the last one that walked the trees
    last_error: ErrorReport | None
    restore: RestoreRecord | None
    warnings: list[str] = []
    local_state: LocalSize = msgspec.field(default_factory=LocalSize)
    supervisor: SupervisorReport
    status: Status                            # status.json as recorded (``supervisor`` judges it live)


def read_status(state_dir: str) -> Status:
    """The recorded status, or an empty one when there is none or it is unreadable."""
    try:
        with open(os.path.join(state_dir, STATUS_FILE), "rb") as fh:
            return msgspec.json.decode(fh.read(), type=Status)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return Status()


def write_status(state_dir: str, status: Status) -> None:
    open_state_dir(state_dir)
    write_file_atomic(os.path.join(state_dir, STATUS_FILE), msgspec.json.encode(status),
                      os.path.join(state_dir, TMP_DIR))


def report_status(state_dir: str, now: float | None = None) -> StatusReport:
    now = time.time() if now is None else now
    status = read_status(state_dir)
    act = activity.read(state_dir)
    running = lock_held(state_dir, SUPERVISE_LOCK)
    success = max((t for t in (act.last_success, status.last_success) if t is not None), default=None)
    restore = max((r for r in (act.restore, status.restore) if r is not None), key=lambda r: r.time, default=None)
    warnings = list(act.run.warnings) if act.run else []
    if running:
        warnings += [w for w in status.warnings if w not in warnings]
    return StatusReport(running=running, pid=status.pid if running else None,
                        lag_seconds=None if success is None else max(0.0, now - success), last_success=success,
                        last_checkpoint=act.checkpoint, last_run=act.run,
                        last_error=_last_error(act, status, success, restore), restore=restore,
                        warnings=warnings, local_state=local_size(state_dir),
                        supervisor=judge_supervisor(state_dir, status, running), status=status)


def judge_supervisor(state_dir: str, status: Status, running: bool) -> SupervisorReport:
    """``status`` judged against what runs now: ``running`` (the lifetime lock is held)
    and whether anything answers on the input socket."""
    path = status.input_socket
    if running:
        served = bool(path) and status.input_error is None and socket_answers(path)
        why = None if served or not path else status.input_error or (
            f"nothing answers on {path} (the supervisor starts its server again)")
        return SupervisorReport(state=SupervisorState.RUNNING, pid=status.pid, cmd_pid=status.child_pid,
                                interval=status.interval, input_socket=path, input_served=served, input_error=why)
    state = (SupervisorState.NEVER if status.pid is None else
             SupervisorState.STOPPED if status.stopped is not None else SupervisorState.DIED)
    why = None
    if path:
        left = "is left behind" if os.path.lexists(path) else "is gone"
        why = f"{status.input_error or 'its supervisor is not running'}; the socket file {left}"
    return SupervisorReport(state=state, pid=None, cmd_pid=None, interval=None, input_socket=path,
                            input_served=False, input_error=why,
                            stale=_stale(state_dir, status) if state is SupervisorState.DIED else [])


def _stale(state_dir: str, status: Status) -> list[str]:
    """What a supervisor that died (no stop recorded) left in status.json that no longer holds."""
    stale = [f"pid {status.pid}: not running, and it recorded no stop (killed, or its container went away); "
             "no final checkpoint was taken",
             f"lock {os.path.join(state_dir, SUPERVISE_LOCK)}: held by no process"]
    if status.child_pid is not None:
        stale.append(f"CMD pid {status.child_pid}: supervised by nothing, no checkpoint is taken behind it")
    if status.interval is not None:
        stale.append(f"timer: the {status.interval:g}s checkpoint timer no longer runs")
    if status.input_socket and status.input_error is None:
        stale.append(f"input socket {status.input_socket}: recorded as served, served by nothing")
    return stale


def socket_answers(path: str) -> bool:
    """Whether a server accepts a connection on the Unix socket ``path`` now."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def local_size(state_dir: str) -> LocalSize:
    """What the state directory holds (a missing one holds nothing), in one walk, and its
    share of the live trees."""
    top = {name: _bytes(path) for name, path in _listing(state_dir)}
    total = sum(top.values())
    live = live_bytes(state_dir)
    return LocalSize(bytes=total, chunks=top.get(CHUNKS_DIR, 0), sqlite_base=top.get(BASE_DIR, 0),
                     maps=top.get(MAPS_DIR, 0), pages=top.get(PAGES_DIR, 0), spool=top.get(SPOOL_DIR, 0),
                     live=live, share=round(total / live, 4) if live else None)


def live_bytes(state_dir: str) -> int | None:
    """The bytes of the live trees' files (directories apart) as the local state last
    recorded them, whatever store it follows; None without a state or its trees. Read
    from each directory's totals: no path is decoded."""
    state = read_state(state_dir)
    if state is None or not state.trees:
        return None
    return sum(tree.files.nbytes for tree in state.trees.values())


def _listing(folder: str) -> list[tuple[str, str]]:
    try:
        return [(entry.name, entry.path) for entry in os.scandir(folder)]
    except OSError:
        return []


def _bytes(path: str) -> int:
    """The size of a regular file, or of the regular files under a directory, added up
    (symlinks are not followed; what vanished meanwhile counts nothing)."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    if stat.S_ISDIR(st.st_mode):
        return sum(_bytes(child) for _, child in _listing(path))
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def _last_error(act: activity.Activity, status: Status, success: float | None,
                restore: RestoreRecord | None) -> ErrorReport | None:
    """The newest recorded error, cleared when a checkpoint run or a complete restore
    succeeded after it."""
    found = [(e.time, e.op, e.message) for e in (act.error,) if e is not None]
    if status.last_error and status.last_error_time:
        found.append((status.last_error_time, "supervise", status.last_error))
    if not found:
        return None
    when, op, message = max(found)
    later = [t for t in (success, restore.time if restore and restore.complete else None)
             if t is not None and t > when]
    return ErrorReport(time=when, op=op, message=message, cleared=bool(later), cleared_at=max(later, default=None))

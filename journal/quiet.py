"""The quiet snapshot: proving cheaply that nothing changed since the last clean checkpoint.

Most checkpoints are idle. A full idle checkpoint decodes the local state and walks
every tree; this module lets it stop much earlier. After a checkpoint in which every
path was read cleanly (no warning, no error, nothing pending), the checkpoint saves
``<state_dir>/quiet.marshal``, which lists, for every directory the walk visited:

* the directory's listing, names in ``readdir`` order;
* for each name, what the next walk would compare: the stored signature of an
  included file, link or directory (``signatures.py``), the live signature of a
  database, or the file type of an entry the tree excludes.

A later checkpoint first lists those directories and ``lstat``s those names again.
When every listing and every value is equal, the full walk would see the same paths
with the same signatures and nothing gone: the tree is unchanged and the checkpoint is
idle. Any difference, error or doubt means "not proven", and the full checkpoint runs.
A listing is compared as a whole, so a name created in the same clock tick as the
last walk is still seen (a directory's mtime would not show it).

The snapshot is valid only together with the state file it was written after (its
inode, mtime and size are recorded) and with the same configuration (``config_key``,
and ``inputs`` for the console entry point, which answers an idle ``journal
checkpoint`` without importing the rest of journal). Dormant preset paths must still
be absent. This module imports nothing heavy; ``marshal`` keeps the file fast to read.
"""

from __future__ import annotations

import marshal
import os
import stat as stat_mod
import sys

from .signatures import live_signature

QUIET_FILE = "quiet.marshal"
FORMAT = 2
_TAG = (FORMAT, sys.version_info[:2])

#: What the check computes for a listed name.
DIR, DB, OTHER = 1, 2, 3


class Quiet:
    """One snapshot (a plain class: ``typing`` alone would double the entry point's imports)."""

    FIELDS = ("inputs", "config_key", "state_sig", "result", "result_json", "absent", "dirs")

    def __init__(self, inputs, config_key, state_sig, result, result_json, absent, dirs):
        self.inputs: str | None = inputs        # paths.inputs_key of the configuration, for launch.py
        self.config_key: str = config_key       # digest of the effective configuration
        self.state_sig: tuple = state_sig       # (inode, mtime_ns, size) of state.msgpack when written
        self.result: dict = result              # the idle checkpoint's result, as plain values
        self.result_json: str = result_json     # ... as ``--json`` prints it, with ``"seconds": 0.0``
        self.absent: list = absent              # dormant or missing tree paths: must still not be directories
        self.dirs: list = dirs                  # [(abs_dir, names, sigs, others), ...]: see unchanged()

    def fields(self) -> tuple:
        return tuple(getattr(self, name) for name in self.FIELDS)


def file_sig(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def quiet_path(state_dir: str) -> str:
    return os.path.join(state_dir, QUIET_FILE)


def save(state_dir: str, quiet: Quiet) -> None:
    """Replace the snapshot. Not fsynced: a lost or torn snapshot only costs a full walk."""
    path = quiet_path(state_dir)
    tmp = os.path.join(state_dir, "tmp", f"{QUIET_FILE}.{os.getpid()}")
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    with open(tmp, "wb") as fh:
        fh.write(marshal.dumps((_TAG, quiet.fields())))
    os.replace(tmp, path)
    _memo[path] = (file_sig(path), quiet)


def discard(state_dir: str) -> None:
    path = quiet_path(state_dir)
    _memo.pop(path, None)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# A long-running process keeps the decoded snapshot while the file is the one it saw.
_memo: dict[str, tuple[tuple | None, Quiet]] = {}


def load(state_dir: str) -> Quiet | None:
    path = quiet_path(state_dir)
    sig = file_sig(path)
    if sig is None:
        return None
    memo = _memo.get(path)
    if memo is not None and memo[0] == sig:
        return memo[1]
    try:
        with open(path, "rb") as fh:
            tag, fields = marshal.loads(fh.read())
        if tag != _TAG:
            return None
        quiet = Quiet(*fields)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    _memo[path] = (sig, quiet)
    return quiet


def idle_result(state_dir: str, state_file: str, *, config_key: str | None = None,
                inputs: str | None = None) -> Quiet | None:
    """The snapshot when it proves nothing changed since it was saved, else None; its
    ``result`` is the idle checkpoint's. Give ``config_key`` (in-process) or ``inputs``
    (the console entry point)."""
    quiet = load(state_dir)
    if quiet is None:
        return None
    if config_key is not None and quiet.config_key != config_key:
        return None
    if config_key is None and (inputs is None or quiet.inputs != inputs):
        return None
    if file_sig(state_file) != tuple(quiet.state_sig):
        return None
    if any(os.path.isdir(p) for p in quiet.absent):
        return None
    return quiet if unchanged(quiet.dirs) else None


def unchanged(dirs: list) -> bool:
    """True when every listed directory lists the same names and every name checks equal.

    A row is ``(abs_dir, names, sigs, others)``: ``sigs[i]`` is the file signature of
    ``names[i]`` (None for the few entries in ``others``, ``(i, what, value)``)."""
    lstat = os.lstat
    for path, names, sigs, others in dirs:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if os.listdir(fd) != names:
                return False
            got = [(st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode) for st in [lstat(n, dir_fd=fd) for n in names]]
            for i, what, want in others:
                if _other(what, got[i][3], path, names[i]) != want:
                    return False
                got[i] = None
            if got != sigs:
                return False
        except OSError:
            return False
        finally:
            os.close(fd)
    return True


def _other(what: int, mode: int, path: str, name: str):
    if what == DIR:
        return (0, 0, 0, mode)
    if what == OTHER:
        return stat_mod.S_IFMT(mode)
    return live_signature(os.path.join(path, name)) if stat_mod.S_ISREG(mode) else None

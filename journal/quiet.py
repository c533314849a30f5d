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
from typing import NamedTuple

from .signatures import live_signature

QUIET_FILE = "quiet.marshal"
FORMAT = 1
_TAG = (FORMAT, sys.version_info[:2])

#: What the check computes for a listed name.
FILE, DIR, DB, OTHER = 0, 1, 2, 3


class Quiet(NamedTuple):
    inputs: str | None          # paths.inputs_key of the configuration, for launch.py
    config_key: str             # digest of the effective configuration
    state_sig: tuple            # (inode, mtime_ns, size) of state.msgpack when written
    result: dict                # the idle checkpoint's result, as plain values
    absent: list                # dormant tree paths: each must still not be a directory
    dirs: list                  # [(abs_dir, names, [(what, value), ...]), ...]


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
        fh.write(marshal.dumps((_TAG, tuple(quiet))))
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
                inputs: str | None = None) -> dict | None:
    """The stored idle result when the snapshot proves nothing changed, else None.

    Give ``config_key`` (in-process) or ``inputs`` (the console entry point)."""
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
    return dict(quiet.result) if unchanged(quiet.dirs) else None


def unchanged(dirs: list) -> bool:
    """True when every listed directory lists the same names and every name checks equal."""
    lstat = os.lstat
    for path, names, wants in dirs:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if os.listdir(fd) != names:
                return False
            for name, (what, want) in zip(names, wants):
                st = lstat(name, dir_fd=fd)
                if what == FILE:
                    got = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)
                elif what == DIR:
                    got = (0, 0, 0, st.st_mode)
                elif what == OTHER:
                    got = stat_mod.S_IFMT(st.st_mode)
                elif stat_mod.S_ISREG(st.st_mode):
                    got = live_signature(os.path.join(path, name))
                else:
                    return False
                if got != want:
                    return False
        except OSError:
            return False
        finally:
            os.close(fd)
    return True

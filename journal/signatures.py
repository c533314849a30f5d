"""Change signatures: what decides whether a live path must be read again; and stamps:
which file is at a path, and which version of it.

Kept free of heavy imports: the console entry point (``cli/launch.py``) uses them to answer
an idle ``journal checkpoint`` before importing the rest of journal.
"""

from __future__ import annotations

import errno
import os
import stat

#: The modification times journal records: those an entry holds (``format.model.Nanos``,
#: int64 nanoseconds since the epoch: 1677-09-21 to 2262-04-11). A file's time outside
#: them (``touch -d 2300-01-01``, a bogus tar timestamp; tmpfs holds any) is clamped to
#: the nearer end (``mtime_ns``), in signatures and entries alike (design §6, "Times").
MTIME_MIN = -(1 << 63)
MTIME_MAX = (1 << 63) - 1


def clamp_mtime(ns: int) -> int:
    """``ns`` within ``MTIME_MIN``..``MTIME_MAX``: the nearer end when outside."""
    return ns if MTIME_MIN <= ns <= MTIME_MAX else MTIME_MAX if ns > 0 else MTIME_MIN


def mtime_ns(st: os.stat_result) -> int:
    """The modification time (ns) journal records of what ``st`` describes: clamped
    (``clamp_mtime``), so every time the OS returns is one an entry can hold."""
    return clamp_mtime(st.st_mtime_ns)


class Stamp(tuple):
    """A file's stamp, ``Stamp(ino, mtime_ns, size)``: which file is at a path and which
    version of it, as far as one ``stat`` tells; equal stamps (or a stamp and the plain
    tuple it is stored as): the same file, unchanged. journal's own files (the state, the
    quiet snapshot) and the live paths restore and the SQLite snapshot watch are compared
    by stamp. Its fields are named by hand: ``typing.NamedTuple`` would double the console
    entry point's imports."""

    __slots__ = ()

    def __new__(cls, ino: int, mtime_ns: int, size: int):
        return tuple.__new__(cls, (ino, mtime_ns, size))

    ino = property(lambda s: s[0])
    mtime_ns = property(lambda s: s[1])
    size = property(lambda s: s[2])


def stamp(st: os.stat_result) -> Stamp:
    """The stamp of what ``st`` describes."""
    return Stamp(st.st_ino, mtime_ns(st), st.st_size)


def file_stamp(path: str) -> Stamp | None:
    """The stamp of the file at ``path`` (a link followed); None when it cannot be ``stat``ed."""
    try:
        return stamp(os.stat(path))
    except OSError:
        return None


def signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """A file's or link's signature, from its ``lstat``: ``(size, mtime_ns, inode, mode)``."""
    return (st.st_size, mtime_ns(st), st.st_ino, st.st_mode)


def signature_mtime(sig: tuple[int, int, int, int]) -> int:
    """The modification time (ns) a file's or link's ``signature`` holds."""
    _size, mtime, _ino, _mode = sig
    return mtime


def grew_in_place(sig: tuple[int, int, int, int], st: os.stat_result) -> bool:
    """Whether ``st`` is the file a ``signature`` was taken of (the same inode), now larger."""
    size, _mtime_ns, ino, _mode = sig
    return st.st_ino == ino and st.st_size > size


def dir_signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """A directory's signature: its mode only (its listing is what the walk compares)."""
    return (0, 0, 0, st.st_mode)


def live_signature(path: str) -> tuple[int, int, int, int]:
    """The change signature of a live database: the size and mtime of it and its WAL."""
    from .paths import blake2b

    st = os.stat(path)
    mtime = mtime_ns(st)
    try:
        # Never through a symlink, and never waiting: a FIFO planted as the WAL would
        # block a plain open (and read) for ever.
        fd = os.open(path + "-wal", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return (st.st_size, mtime, 0, 0)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        return (st.st_size, mtime, -1, -1)   # a symlink: never a WAL's signature
    with os.fdopen(fd, "rb") as fh:
        wal = os.fstat(fd)
        if not stat.S_ISREG(wal.st_mode):
            return (st.st_size, mtime, -1, -1)   # not a WAL: the database is looked at, never SAME
        # The WAL header's checkpoint sequence and salts change when the WAL is
        # reset and rewritten from its start at the same size.
        salts = fh.read(24)[12:24]
    # Signed: the bytes of every time from 1970 on are what they always were.
    stamp = blake2b(mtime_ns(wal).to_bytes(8, "big", signed=True) + salts, digest_size=7).digest()
    return (st.st_size, mtime, wal.st_size, int.from_bytes(stamp, "big"))

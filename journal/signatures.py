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


def _field(i: int) -> property:
    """A tuple slot read by name."""
    return property(lambda s: s[i])


class Stamp(tuple):
    """A file's stamp, ``Stamp(ino, mtime_ns, size)``: which file is at a path and which
    version of it, as far as one ``stat`` tells. Equal stamps (or a stamp and the plain
    tuple it is stored as) mean the same file, unchanged. journal compares its own files
    (the state, the quiet snapshot) and the live paths restore and the SQLite snapshot
    watch by stamp. Fields are named by hand: ``typing.NamedTuple`` would double the
    console entry point's imports."""

    __slots__ = ()

    def __new__(cls, ino: int, mtime_ns: int, size: int):
        return tuple.__new__(cls, (ino, mtime_ns, size))

    ino, mtime_ns, size = _field(0), _field(1), _field(2)


def stamp(st: os.stat_result) -> Stamp:
    """The stamp of what ``st`` describes."""
    return Stamp(st.st_ino, mtime_ns(st), st.st_size)


def file_stamp(path: str) -> Stamp | None:
    """The stamp of the file at ``path`` (a link followed); None when it cannot be ``stat``ed."""
    try:
        return stamp(os.stat(path))
    except OSError:
        return None


# Change signatures. A scan reads a path again when its signature differs from the one
# the local state holds for it. There is one type per kind of entry, and each is a
# 4-tuple of ints: the local state and the quiet snapshot store every signature as a
# plain 4-tuple, and the entry's kind says which type a stored one is. ``of`` names
# the fields of a stored one again. Signatures compare equal to the plain tuples they
# are stored as, so a plain tuple in a type's layout is as good as one (``signature``
# returns one: the walk makes one per path).

class _Signature(tuple):
    __slots__ = ()

    @classmethod
    def of(cls, stored):
        """``stored`` (a signature of this type, kept as a plain 4-tuple) with its fields named."""
        return stored if type(stored) is cls else tuple.__new__(cls, stored)


class Signature(_Signature):
    """A file's or symlink's signature, ``Signature(size, mtime_ns, ino, mode)``, from
    its ``lstat``. The inode tells a rename (the same file under another name) and a
    file that grew in place."""

    __slots__ = ()

    def __new__(cls, size: int, mtime_ns: int, ino: int, mode: int):
        return tuple.__new__(cls, (size, mtime_ns, ino, mode))

    size, mtime_ns, ino, mode = _field(0), _field(1), _field(2), _field(3)


class DbSignature(_Signature):
    """A live database's signature, ``DbSignature(size, mtime_ns, wal_size, wal_stamp)``:
    the database file's size and time, then its WAL's size and a hash of the WAL's time
    and header salts (``live_signature``). It holds no inode."""

    __slots__ = ()

    def __new__(cls, size: int, mtime_ns: int, wal_size: int, wal_stamp: int):
        return tuple.__new__(cls, (size, mtime_ns, wal_size, wal_stamp))

    size, mtime_ns, wal_size, wal_stamp = _field(0), _field(1), _field(2), _field(3)


#: ``DbSignature``'s WAL fields when there is no WAL.
NO_WAL = (0, 0)
#: ... when the WAL is a symlink or no regular file: never a real WAL's fields.
NOT_A_WAL = (-1, -1)


class DirSignature(_Signature):
    """A directory's signature: its mode only, as ``(0, 0, 0, mode)`` (the walk compares
    its listing)."""

    __slots__ = ()

    def __new__(cls, mode: int):
        return tuple.__new__(cls, (0, 0, 0, mode))

    mode = _field(3)


def signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """A file's or link's ``Signature``, from its ``lstat``, as the plain tuple the state
    stores: the walk makes one per path, and a tuple subclass costs a fifth of a scan."""
    return (st.st_size, mtime_ns(st), st.st_ino, st.st_mode)


def grew_in_place(sig: tuple, st: os.stat_result) -> bool:
    """Whether ``st`` is the file a ``Signature`` was taken of (the same inode), now larger."""
    was = Signature.of(sig)
    return st.st_ino == was.ino and st.st_size > was.size


def dir_signature(st: os.stat_result) -> DirSignature:
    """A directory's signature."""
    return DirSignature(st.st_mode)


def live_signature(path: str) -> DbSignature:
    """The signature of the live database at ``path``: the size and mtime of it and its WAL."""
    from .paths import blake2b

    st = os.stat(path)
    mtime = mtime_ns(st)
    try:
        # Never through a symlink, and never waiting: a FIFO planted as the WAL would
        # block a plain open (and read) for ever.
        fd = os.open(path + "-wal", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return DbSignature(st.st_size, mtime, *NO_WAL)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        return DbSignature(st.st_size, mtime, *NOT_A_WAL)
    with os.fdopen(fd, "rb") as fh:
        wal = os.fstat(fd)
        if not stat.S_ISREG(wal.st_mode):
            return DbSignature(st.st_size, mtime, *NOT_A_WAL)   # the database is looked at, never SAME
        # The WAL header's checkpoint sequence and salts change when the WAL is
        # reset and rewritten from its start at the same size.
        salts = fh.read(24)[12:24]
    # Signed: the bytes of every time from 1970 on are what they always were.
    stamp = blake2b(mtime_ns(wal).to_bytes(8, "big", signed=True) + salts, digest_size=7).digest()
    return DbSignature(st.st_size, mtime, wal.st_size, int.from_bytes(stamp, "big"))

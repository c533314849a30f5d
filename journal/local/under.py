"""Directories of a live tree reached from its root one name at a time, never through
a symlink (design §12, "Restore writes only under the tree's root").

Restore decides what to make, replace, move aside or re-mode from what it looked at,
and another process may swap a directory on the way for a symlink after that look.
Every change restore makes in the tree therefore goes through a descriptor on the
directory opened here: from the root, each name with ``O_NOFOLLOW | O_DIRECTORY``, so
a swapped directory is refused (``UnsafePath``) and nothing lands outside the tree.
The root itself is opened as configured: a root that is a symlink (a tree linked to
a volume) is followed once, there.

The directories on the way are opened ``O_PATH`` (search permission is all a lookup
needs: a directory its owner may not read, a 0311 drop box, is walked through as the
kernel would); the last one ``O_RDONLY`` when it can be (so it can be fsynced), else
``O_PATH`` too (``sync`` then does what it can, as ``atomic.fsync_dir`` does).
"""

from __future__ import annotations

import contextlib
import errno
import os

from ..errors import UnsafePath
from ..paths import shown

#: Opening a directory of the tree: never through a symlink, never a non-directory.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: ... for looking names up in it (no read permission needed; not for fsync or fchmod).
PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: What another process changing the tree under restore looks like.
_SWAPPED = (errno.ELOOP, errno.ENOTDIR, errno.ENOENT)


def _open_one(parent: int, name: str, flags: int, names: list[str], i: int, base: str) -> int:
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as err:
        where = shown(os.path.join(base, *names[:i + 1]))
        why = (f"{where} is no longer a directory reached without a symlink ({err.strerror}): another "
               "process changed the tree during the restore") if err.errno in _SWAPPED else \
              f"{where} cannot be opened ({err.strerror})"
        raise UnsafePath(shown(os.path.join(base, *names)), why) from err


def open_under(start: int, names: list[str], base: str, *, make: bool = False,
               made: list[str] | None = None) -> int:
    """A new descriptor on the directory ``names`` below the open directory ``start``
    (left open), reached one name at a time without following a link. ``base`` is
    ``start``'s path, for messages and for ``made``. ``make``: a missing directory is
    made (mode 0700, through its parent's descriptor), its path appended to ``made``
    (an error making it is raised as it is). ``UnsafePath`` when a name on the way
    cannot be opened as a directory without following a link (or at all)."""
    fd = os.dup(start)
    try:
        for i, name in enumerate(names):
            if make:
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass  # there already (or made meanwhile): opened, and so judged, below
                else:
                    if made is not None:
                        made.append(os.path.join(base, *names[:i + 1]))
            if i < len(names) - 1:
                inner = _open_one(fd, name, PATH_FLAGS, names, i, base)
            else:
                try:
                    inner = os.open(name, DIR_FLAGS, dir_fd=fd)
                except PermissionError:  # a directory its owner may not read
                    inner = _open_one(fd, name, PATH_FLAGS, names, i, base)
                except OSError:
                    inner = _open_one(fd, name, DIR_FLAGS, names, i, base)  # (raises, naming it)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def sync(fd: int) -> None:
    """fsync a directory descriptor from here. An ``O_PATH`` one (a directory its owner
    may not read) cannot be, nor a directory on some FUSE filesystems: the change is
    still made, as ``atomic.fsync_dir`` leaves it; any other failure (EIO) is raised."""
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EBADF, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise


def split_rel(rel: str) -> list[str]:
    """The names of ``rel``, a path relative to a tree's root ('' or '.': the root);
    ``UnsafePath`` for one that climbs out of it."""
    names = [n for n in rel.split("/") if n not in ("", ".")]
    if ".." in names:
        raise UnsafePath(rel, "it is not under the tree's root")
    return names


def open_root(root: str) -> int:
    """The tree's root, as configured (a root that is a symlink is followed, once)."""
    return os.open(root, PATH_FLAGS & ~os.O_NOFOLLOW)


@contextlib.contextmanager
def dir_under(root: str, rel: str, *, make: bool = False, made: list[str] | None = None):
    """A descriptor on the directory ``rel`` of the tree at ``root`` (see ``open_under``),
    closed when the block ends."""
    start = open_root(root)
    try:
        fd = open_under(start, split_rel(rel), root, make=make, made=made)
    finally:
        os.close(start)
    try:
        yield fd
    finally:
        os.close(fd)


class Walker:
    """Directories of one tree asked for in a run of sorted paths (``parent``): the
    descriptors along the last path asked for are kept (at most ``KEPT``), so each name
    shared with the path before is not opened again. A context manager."""

    KEPT = 256  # (a deeper path is walked whole each time: no risk of running out of descriptors)

    def __init__(self, root: str):
        self.root = root
        self.start = open_root(root)
        self.names: list[str] = []
        self.fds: list[int] = []    # fds[i]: the directory names[:i + 1], opened PATH_FLAGS
        self.deep = -1              # the last path deeper than KEPT, walked whole

    def __enter__(self) -> "Walker":
        return self

    def __exit__(self, *exc) -> None:
        self._drop(0)
        os.close(self.start)

    def _drop(self, keep: int) -> None:
        if self.deep >= 0:
            os.close(self.deep)
            self.deep = -1
        for fd in self.fds[keep:]:
            os.close(fd)
        del self.fds[keep:], self.names[keep:]

    def parent(self, rel: str) -> int:
        """A descriptor (kept by the walker until its next call: not to be closed) on
        the directory ``rel``, reached as ``open_under`` does; ``UnsafePath`` as it does."""
        names = split_rel(rel)
        same = 0
        while same < min(len(names), len(self.names)) and names[same] == self.names[same]:
            same += 1
        self._drop(same)
        if len(names) > self.KEPT:
            self.deep = open_under(self.fds[-1] if self.fds else self.start, names[same:],
                                   os.path.join(self.root, *names[:same]))
            return self.deep
        for i in range(same, len(names)):
            fd = _open_one(self.fds[-1] if self.fds else self.start, names[i], PATH_FLAGS, names, i, self.root)
            self.fds.append(fd)
            self.names.append(names[i])
        return self.fds[-1] if self.fds else self.start

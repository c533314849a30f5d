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
import fcntl
import os

from .errors import UnsafePath
from ..paths import shown

#: Opening a directory of the tree: never through a symlink, never a non-directory.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: ... for looking names up in it (no read permission needed; not for fsync or fchmod).
PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: What another process changing the tree under restore looks like.
_SWAPPED = (errno.ELOOP, errno.ENOTDIR, errno.ENOENT)


def _open_one(parent: int, name: str, flags: int, names: list[str], i: int, base: str) -> int:
    """Open the directory ``name`` in ``parent`` with ``flags`` (``O_PATH`` instead when
    its owner may not read it); ``UnsafePath``, naming ``names[:i + 1]``, when it cannot be."""
    try:
        try:
            return os.open(name, flags, dir_fd=parent)
        except PermissionError:
            if flags == PATH_FLAGS:
                raise
            return os.open(name, PATH_FLAGS, dir_fd=parent)  # a directory its owner may not read
    except OSError as err:
        where = shown(os.path.join(base, *names[:i + 1]))
        why = (f"{where} is no longer a directory reached without a symlink ({err.strerror}): another "
               "process changed the tree during the restore") if err.errno in _SWAPPED else \
              f"{where} cannot be opened ({err.strerror})"
        raise UnsafePath(shown(os.path.join(base, *names)), why) from err


def open_under(start: int, names: list[str], base: str, *, make: bool = False,
               made: list[str] | None = None) -> int:
    """A new descriptor on the directory ``names`` below the open directory ``start``
    (left open; ``[]``: ``start`` itself, opened again), reached one name at a time
    without following a link. ``base`` is ``start``'s path, for messages and for
    ``made``. ``make``: a missing directory is made (mode 0700, through its parent's
    descriptor), its path appended to ``made`` (an error making it is raised as it
    is). ``UnsafePath`` when a name on the way cannot be opened as a directory without
    following a link (or at all). The directories on the way are opened ``O_PATH``,
    the last ``O_RDONLY`` (``O_PATH`` when its owner may not read it)."""
    fd = os.dup(start)
    try:
        last = len(names) - 1
        for i in range(len(names)):
            inner = _step(fd, names, i, base, make, made, DIR_FLAGS if i == last else PATH_FLAGS)
            os.close(fd)
            fd = inner
        if not names:
            inner = _open_one(fd, ".", DIR_FLAGS, [], -1, base)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_under(root: str, rel: str, made: list[str] | None = None) -> None:
    """Make the directory ``rel`` of the tree at ``root`` and whatever of its parents is
    missing, each through its parent as reached without a symlink (``open_under``)."""
    with dir_under(root, rel, make=True, made=made):
        pass


def _step(fd: int, names: list[str], i: int, base: str, make: bool, made: list[str] | None, flags: int) -> int:
    """Open ``names[i]`` in ``fd`` (made first, with ``make``, when it is missing)."""
    if make:
        try:
            return os.open(names[i], flags, dir_fd=fd)  # there already, mostly: no mkdir tried
        except FileNotFoundError:
            pass
        except OSError:
            return _open_one(fd, names[i], flags, names, i, base)  # (a directory its owner may not read, or raises)
        try:
            os.mkdir(names[i], 0o700, dir_fd=fd)
        except FileExistsError:
            pass  # there already (or made meanwhile): opened, and so judged, below
        else:
            if made is not None:
                made.append(os.path.join(base, *names[:i + 1]))
    return _open_one(fd, names[i], flags, names, i, base)


def sync(fd: int) -> None:
    """fsync a directory descriptor from here. An ``O_PATH`` one (a directory its owner
    may not read) cannot be, nor a directory on some FUSE filesystems (``EINVAL``):
    the change is still made, as ``atomic.fsync_dir`` leaves it; any other failure
    (``EIO``, a descriptor that is not what it should be) is raised."""
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_PATH:
        return
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
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

"""Directories of a live tree reached from its root one name at a time, never through
a symlink (design §12, "Restore writes only under the tree's root").

Restore decides what to make, replace, move aside or re-mode from what it looked at,
and another process may swap a directory on the way for a symlink after that look.
Every change restore makes in the tree therefore goes through a descriptor on the
directory opened here: from the root, each name with ``O_NOFOLLOW | O_DIRECTORY``, so
a swapped directory is refused (``UnsafePath``) and nothing lands outside the tree.
The root itself is opened as configured: a root that is a symlink (a tree linked to
a volume) is followed once, there.
"""

from __future__ import annotations

import contextlib
import os

from ..errors import UnsafePath
from ..paths import shown

#: Opening a directory of the tree: never through a symlink, never a non-directory.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_under(start: int, names: list[str], base: str, *, make: bool = False,
               made: list[str] | None = None) -> int:
    """A new descriptor on the directory ``names`` below the open directory ``start``
    (left open), reached one name at a time without following a link. ``base`` is
    ``start``'s path, for messages and for ``made``. ``make``: a missing directory is
    made (mode 0700, through its parent's descriptor), its path appended to ``made``
    (an error making it is raised as it is). ``UnsafePath`` when a name on the way
    cannot be opened as a directory without following a link."""
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
            try:
                inner = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                where = os.path.join(base, *names[:i + 1])
                raise UnsafePath(shown(os.path.join(base, *names)),
                                 f"{shown(where)} is no longer a directory reached without a symlink "
                                 f"({err.strerror}): another process changed the tree during the "
                                 "restore") from err
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def split_rel(rel: str) -> list[str]:
    """The names of ``rel``, a path relative to a tree's root ('' or '.': the root);
    ``UnsafePath`` for one that climbs out of it."""
    names = [n for n in rel.split("/") if n not in ("", ".")]
    if ".." in names:
        raise UnsafePath(rel, "it is not under the tree's root")
    return names


@contextlib.contextmanager
def dir_under(root: str, rel: str, *, make: bool = False, made: list[str] | None = None):
    """A descriptor on the directory ``rel`` of the tree at ``root`` (see ``open_under``),
    closed when the block ends."""
    start = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = open_under(start, split_rel(rel), root, make=make, made=made)
    finally:
        os.close(start)
    try:
        yield fd
    finally:
        os.close(fd)

"""Small local-disk chores shared by the spool, the SQLite staging area, restore and migrate."""

from __future__ import annotations

import os
import stat as stat_mod

from .signatures import Stamp, stamp


def clear_dir(directory: str, suffix: str = "") -> None:
    """Remove the files in ``directory`` (those ending in ``suffix``); a missing dir is fine."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if name.endswith(suffix):
            try:
                os.unlink(os.path.join(directory, name))
            except (FileNotFoundError, IsADirectoryError):
                pass


def observe(path: str) -> Stamp | None:
    """What is at ``path`` now (never followed): None when nothing, else its stamp."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return stamp(st)


def open_regular(path: str):
    """``path`` opened for binary reading if it is a regular file when opened (never
    through a symlink: ``OSError``; never blocking on a FIFO put there); else None."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def chmod_dir(path: str, mode: int) -> None:
    """Set the mode of the directory ``path`` through its own descriptor, never through
    a symlink (``OSError``: ``ELOOP`` or ``ENOTDIR``)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)

"""Small local-disk chores shared by the spool, the SQLite staging area, restore and migrate,
and which mount holds a path (an error's hint, a store's read-ahead)."""

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


def observe(path: str, dir_fd: int | None = None) -> Stamp | None:
    """What is at ``path`` now (never followed; relative to ``dir_fd`` if given): None
    when nothing, else its stamp."""
    try:
        st = os.lstat(path, dir_fd=dir_fd)
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


class Mount:
    """One mount of this process, from ``/proc/self/mountinfo``: its mount point, device
    number (as ``st_dev`` gives it) and filesystem type."""

    __slots__ = ("point", "dev", "fstype")

    def __init__(self, point: str, dev: int, fstype: str):
        self.point, self.dev, self.fstype = point, dev, fstype


def mounts() -> list[Mount]:
    """This process's mounts, in ``/proc/self/mountinfo``'s order (a later one at a point
    is over an earlier one); [] when it cannot be read (not Linux)."""
    import re   # here: only an error's hint or a store's first read needs it

    octal = re.compile(r"\\([0-7]{3})")   # a space, tab, newline or backslash in a path
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split()
                try:
                    major, minor = fields[2].split(":")
                    point = octal.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
                    out.append(Mount(point, os.makedev(int(major), int(minor)), fields[fields.index("-") + 1]))
                except (IndexError, ValueError):
                    continue
    except OSError:
        return []
    return out


def find_mount(path: str) -> Mount | None:
    """The mount holding ``path`` (or its nearest existing parent): of the mounts at it
    or above it, the deepest on its own device (a bind mount of a directory of ``/`` is
    on ``/``'s device, and is the mount that holds it); the deepest of any device when
    none is (an overlay reports its lower layers' devices). None without mountinfo."""
    path = os.path.realpath(path)
    dev = None
    while dev is None:
        try:
            dev = os.stat(path).st_dev
        except OSError:
            if path == os.path.dirname(path):
                break
            path = os.path.dirname(path)
    mine = deepest = None
    for mount in mounts():
        if path != mount.point and not path.startswith(mount.point.rstrip("/") + "/"):
            continue
        if deepest is None or len(mount.point) >= len(deepest.point):
            deepest = mount
        if mount.dev == dev and (mine is None or len(mount.point) >= len(mine.point)):
            mine = mount
    return mine or deepest


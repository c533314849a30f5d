"""Moving an invalid local database aside, with its companions: never deleting it.

Restore moves a local database aside when it fails its checks, or when the trees
adopt a checkpoint that does not hold it (``restore/adopt.py``); ``journal migrate``
does the same before it installs a legacy copy. The names go to a directory under
the state directory, by rename where one filesystem holds both, else by copy.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod

from ..atomic import fsync_dir, makedirs
from ..format.model import Entry
from ..local.errors import UnsafePath
from ..local.under import dir_under, sync
from ..paths import shown
from ..presets import SQLITE_COMPANIONS


def move_aside(root: str, entry: Entry, aside_dir: str) -> str:
    """Move an invalid local database and its companions into ``aside_dir``. Nothing
    is ever deleted. Returns where the database now is.

    The names are taken from their directory as reached from the root without a
    symlink (``local/under.py``), so nothing outside the tree is moved. Each is
    renamed. Where a rename crosses filesystems (``EXDEV``; a bind mount counts),
    every name left is copied instead; a companion that is not a file, a symlink or a
    FIFO then refuses the move before anything more moves.

    Raises ``UnsafePath`` when another process changes something under the move; what
    was moved so far stays in ``aside_dir``."""
    directory, name = os.path.split(entry.path)
    target = os.path.join(aside_dir, entry.path)
    made = makedirs(os.path.dirname(target), 0o700)
    with dir_under(root, directory) as parent:
        there = []
        for suffix in ("",) + SQLITE_COMPANIONS:
            try:
                there.append((suffix, os.stat(name + suffix, dir_fd=parent, follow_symlinks=False)))
            except FileNotFoundError:
                continue
        copy = False
        for i, (suffix, st) in enumerate(there):
            if not copy:
                try:
                    os.replace(name + suffix, target + suffix, src_dir_fd=parent)
                    continue
                except FileNotFoundError:
                    continue  # gone meanwhile (SQLite's last close removes its -wal and -shm)
                except OSError as err:
                    if err.errno != errno.EXDEV:
                        raise
                copy = True
                odd = [(s, t) for s, t in there[i:] if not _copyable(t.st_mode)]
                if odd:
                    moved = " (nothing was)" if i == 0 else f" (the rest is in {shown(os.path.dirname(target))})"
                    raise UnsafePath(entry.path + odd[0][0], f"it is {_kind(odd[0][1].st_mode)}, and moving aside "
                                                            f"to {shown(aside_dir)} is a copy here: not moved{moved}")
            _copy_aside(parent, name + suffix, st, target + suffix, entry.path + suffix)
        fsync_dir(os.path.dirname(target))  # the names' new place first, then their old one
        for path in made:
            fsync_dir(os.path.dirname(path))
        sync(parent)
    return target


def _copyable(mode: int) -> bool:
    return stat_mod.S_ISREG(mode) or stat_mod.S_ISLNK(mode) or stat_mod.S_ISFIFO(mode)


def _kind(mode: int) -> str:
    return "a directory" if stat_mod.S_ISDIR(mode) else "a socket" if stat_mod.S_ISSOCK(mode) else \
        "a device" if stat_mod.S_ISCHR(mode) or stat_mod.S_ISBLK(mode) else "a special file"


def _copy_aside(parent: int, name: str, st: os.stat_result, dst: str, shown_path: str) -> None:
    """Move ``name`` (in the directory ``parent``, as ``st`` saw it) to ``dst`` on
    another filesystem: copy it, then unlink it.

    A symlink is copied as a symlink. A FIFO is made again, never opened (that would
    block). A file is read through a descriptor opened without blocking and checked to
    be that file, and unlinked only if nothing changed it during the copy: a writer's
    new bytes are never deleted. A name gone meanwhile is skipped. Anything else that
    changes under the copy raises ``UnsafePath``, and the name is left in place."""
    def changed(why: str) -> UnsafePath:
        return UnsafePath(shown_path, f"{why}: another process is writing the tree; it is left in place, and "
                                      f"what was moved aside so far is in {shown(os.path.dirname(dst))}")
    try:
        if stat_mod.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=parent), dst)
        elif stat_mod.S_ISFIFO(st.st_mode):
            os.mkfifo(dst, stat_mod.S_IMODE(st.st_mode))
        elif stat_mod.S_ISREG(st.st_mode):
            if not _copy_file(parent, name, st, dst):
                raise changed("it changed while it was copied aside")
        else:
            raise changed(f"it became {_kind(st.st_mode)}")
        now = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise changed(f"it changed while it was moved aside ({err.strerror})") from err
        raise
    if _stamp(now) != _stamp(st):
        raise changed("it changed while it was copied aside")
    os.unlink(name, dir_fd=parent)


def _stamp(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _copy_file(parent: int, name: str, st: os.stat_result, dst: str) -> bool:
    """Copy the regular file ``name`` to ``dst``; False when it is not the file ``st``
    saw, before or after the copy."""
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    try:
        if not stat_mod.S_ISREG(os.fstat(src).st_mode) or _stamp(os.fstat(src)) != _stamp(st):
            return False
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                      stat_mod.S_IMODE(st.st_mode))
        try:
            while chunk := os.read(src, 1 << 20):
                os.write(out, chunk)  # (a regular file: writes are whole)
            os.fsync(out)
        finally:
            os.close(out)
        if _stamp(os.fstat(src)) != _stamp(st):
            return False
    finally:
        os.close(src)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    return True

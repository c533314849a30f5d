"""The state directory is private to its owner (design §10).

It holds copies of the live trees (chunks of rewritten files, whole databases, page
maps), which may hold an agent's credentials. Every directory journal makes in it is
made ``PRIVATE_DIR`` (0700) and every file ``PRIVATE_FILE`` (0600), by the call that
makes it, whatever the umask. ``open_state_dir`` makes the directory itself, and
tightens one an earlier version left open to others (0755 directories, 0644 files):
the first operation that takes its lock takes the group and other bits off the
directory and off everything under journal's own names in it. Bits are only ever
taken away, so nothing becomes wider than it was; the databases restore moved aside
into ``invalid/`` keep their own modes (the directories around them are private).
"""

from __future__ import annotations

import os
import stat as stat_mod

from ..paths import INVALID_DIR, PRIVATE_DIR, STATE_NAMES

#: The bits no file or directory of the state directory may have.
OPEN_BITS = 0o077


def open_state_dir(state_dir: str) -> None:
    """Make ``state_dir`` (mode 0700; its missing parents as ``os.makedirs`` makes them),
    or, when it lets group or others in, tighten it (``tighten``). A directory with the
    sticky bit (a shared one such as ``/tmp``, never journal's own) is left as it is.
    Raises ``OSError`` when it cannot be made."""
    try:
        st = os.stat(state_dir)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(state_dir) or ".", exist_ok=True)
        try:
            os.mkdir(state_dir, PRIVATE_DIR)
        except FileExistsError:
            pass  # another process made it meanwhile: as private as this one would have
        return
    if stat_mod.S_ISDIR(st.st_mode) and st.st_mode & OPEN_BITS and not st.st_mode & stat_mod.S_ISVTX:
        tighten(state_dir)


def tighten(state_dir: str) -> None:
    """Take the group and other bits off ``state_dir`` and off every directory and
    regular file under journal's names in it (symlinks are never followed; files in
    ``invalid/`` keep their modes). Best effort: a path that vanished, or a
    filesystem that refuses a mode change, is passed over."""
    try:
        os.chmod(state_dir, PRIVATE_DIR)
    except OSError:
        pass
    for name in STATE_NAMES:
        top = os.path.join(state_dir, name)
        if os.path.islink(top):
            continue  # never journal's own: os.walk would follow it
        _take_open_bits(top, files=name != INVALID_DIR)
        for folder, dirs, files in os.walk(top):
            for child in dirs:
                _take_open_bits(os.path.join(folder, child))
            for child in files:
                _take_open_bits(os.path.join(folder, child), files=name != INVALID_DIR)


def _take_open_bits(path: str, files: bool = True) -> None:
    """Through a descriptor opened without following a symlink, so the mode changed is
    that of the very file looked at."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return  # gone, a symlink, a socket, or unreadable: nothing journal copies into
    try:
        mode = os.fstat(fd).st_mode
        if mode & OPEN_BITS and (stat_mod.S_ISDIR(mode) or files and stat_mod.S_ISREG(mode)):
            os.fchmod(fd, stat_mod.S_IMODE(mode) & ~OPEN_BITS)
    except OSError:
        pass
    finally:
        os.close(fd)

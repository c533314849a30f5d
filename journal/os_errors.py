"""One line for an ``OSError`` of a local file: the path, the reason and a hint that fits
its errno (``describe_os_error``), the mount to free or remount (``mount_point``);
``naming`` attaches the path to an error of a call made on a file descriptor (a write,
an fsync), which carries none; ``describe_error`` is the line an operation ends with,
whatever it raised.
"""

from __future__ import annotations

import contextlib
import errno
import os

from .errors import JournalError
from .paths import shown


def mount_point(path: str) -> str:
    """The mount point of the mount holding ``path`` (or its nearest existing parent),
    from ``/proc/self/mountinfo`` (``localfs.find_mount``): a read-only bind mount of a
    directory is named, not the filesystem it is a directory of. Without mountinfo, the
    topmost directory above it on the same device."""
    from .localfs import find_mount   # here: only a full or read-only disk's hint needs it

    found = find_mount(path)
    if found is not None:
        return found.point
    path = os.path.abspath(path)
    while True:
        try:
            dev = os.stat(path).st_dev
            break
        except OSError:
            parent = os.path.dirname(path)
            if parent == path:
                return path
            path = parent
    while path != os.path.dirname(path):
        parent = os.path.dirname(path)
        try:
            if os.stat(parent).st_dev != dev:
                return path
        except OSError:
            return path
        path = parent
    return path


#: Hints that need no path, by errno.
_HINTS = {
    errno.EIO: "the device reported an I/O error; check the disk and the kernel log (dmesg)",
    errno.ENAMETOOLONG: "the path is longer than the system allows (4096 bytes, or 255 for one name); shorten it",
    errno.ELOOP: "too many levels of symbolic links on that path; fix the links",
    errno.ENOTDIR: "a file stands where a directory belongs; move it aside",
    errno.EISDIR: "a directory stands where a file belongs; move it aside",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n)",
    errno.ENFILE: "too many open files; raise the limit (ulimit -n)",
    errno.ENOENT: "it does not exist; create it or fix the path",
    errno.EEXIST: "it already exists; move it aside",
    errno.EBUSY: "it is in use; try again when the other process lets go of it",
    errno.ETXTBSY: "it is in use; try again when the other process lets go of it",
}


def os_error_hint(err: OSError, path: str | None = None) -> str:
    """What the operator can do about ``err`` at ``path`` (default: its filename)."""
    where = path or err.filename
    code = err.errno
    if code not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        if code in (errno.EACCES, errno.EPERM):
            what = f"{shown(where)} and of the directories above it" if where else "the file and its directories"
            return f"check the permissions of {what} (journal runs as uid {os.getuid()})"
        return _HINTS.get(code, "check that path")
    fs = f"the filesystem mounted at {mount_point(where)}" if where else "the filesystem journal writes to"
    if code == errno.ENOSPC:
        return f"free space on {fs}"
    if code == errno.EDQUOT:
        return f"free space on {fs} or raise your disk quota there"
    return f"{fs} is read-only; remount it read-write"


def describe_os_error(err: OSError, path: str | None = None) -> str:
    """One line for a local file's error: "<path>: <reason>; <hint>" (the path is
    ``path``, else the error's own filename, else left out)."""
    where = path or err.filename
    reason = err.strerror or str(err)
    return f"{shown(where)}: {reason}; {os_error_hint(err, where)}" if where else f"{reason}; {os_error_hint(err)}"


def describe_error(err: Exception) -> str:
    """One line for an error an operation ends with: journal's own message, an OS error
    with its file and hint, else the exception's type and text."""
    if isinstance(err, JournalError):
        return str(err)
    if isinstance(err, OSError) and err.strerror:
        return describe_os_error(err)
    return f"{type(err).__name__}: {err}"


@contextlib.contextmanager
def naming(path: str):
    """Attach ``path`` to an ``OSError`` raised inside that names no file (a write or
    an fsync on a descriptor), so that its message can say where it happened."""
    try:
        yield
    except OSError as err:
        if err.filename is None:
            err.filename = path
        raise

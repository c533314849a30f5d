"""The FUSE operations of a mount (mfusepy's path-based API, one thread per request):
``getattr``, ``readdir``, ``readlink``, ``open``, ``read`` and ``release`` over a
``Layout`` and its ``Files``; nothing writes.

Every failure becomes an errno for that one call, never an exception out of FUSE: a
path that is not there is ENOENT, an open for writing EROFS, and anything damaged
(a manifest, an index page, a blob, a snapshot) or a store that fails is EIO, with a
warning, once per path and cause, naming the path under the mount point and the cause.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Callable

from ...errors import JournalError
from .files import Files
from .layout import Layout, NodeKind

_TYPE = {NodeKind.DIR: stat.S_IFDIR, NodeKind.LINK: stat.S_IFLNK, NodeKind.FILE: stat.S_IFREG}


def _error(code: int) -> OSError:
    return OSError(code, os.strerror(code))


def _answered(op):
    """Run the operation; turn what it raises into an errno (see the module docstring)."""
    @functools.wraps(op)
    def wrapper(self: "MountFs", path: str, *args):
        try:
            return op(self, path, *args)
        except JournalError as err:  # before OSError: a missing object or a failing store is one too
            self.warn_once(path, str(err))
        except OSError as err:
            if err.errno:
                raise
            self.warn_once(path, str(err))
        except Exception as err:  # noqa: BLE001 (a bug must not take the mount down: it fails this call)
            self.warn_once(path, f"{type(err).__name__}: {err}")
        raise _error(errno.EIO)
    return wrapper


class MountFs:
    """What mfusepy calls. ``warn`` says a warning (once: ``serve.Once``); ``ready`` is
    called when the kernel has the mount (FUSE's ``init``)."""

    use_ns = True   # times in nanoseconds

    def __init__(self, layout: Layout, files: Files, mountpoint: str, warn: Callable[[str], None],
                 ready: Callable[[], None]):
        self.layout = layout
        self.files = files
        self.mountpoint = mountpoint
        self._warn = warn
        self._ready = ready
        self._ids = (os.getuid(), os.getgid())

    def warn_once(self, path: str | None, cause: str) -> None:
        """Say that ``path`` failed (``warn`` says each warning once)."""
        self._warn(f"mount: {os.path.join(self.mountpoint, (path or '').lstrip('/'))}: {cause}; it reads as an I/O "
                   "error (EIO)")

    def init(self, _path: str) -> None:
        with contextlib.suppress(OSError):  # a caller's closed stdout must not end the mount
            self._ready()

    @_answered
    def getattr(self, path: str, _fh: int | None = None) -> dict:
        node = self.layout.node(path)
        return {"st_mode": _TYPE[node.kind] | node.mode, "st_nlink": 2 if node.kind is NodeKind.DIR else 1,
                "st_size": node.size, "st_blocks": (node.size + 511) // 512, "st_uid": self._ids[0],
                "st_gid": self._ids[1], "st_atime": node.mtime_ns, "st_mtime": node.mtime_ns,
                "st_ctime": node.mtime_ns}

    @_answered
    def readdir(self, path: str, _fh: int) -> list:
        return [".", ".."] + [(name, _TYPE[kind], 0) for name, kind in self.layout.names(path)]

    @_answered
    def readlink(self, path: str) -> str:
        node = self.layout.node(path)
        if node.kind is not NodeKind.LINK:
            raise _error(errno.EINVAL)
        return node.target

    @_answered
    def open(self, path: str, flags: int) -> int:
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            raise _error(errno.EROFS)
        node = self.layout.node(path)
        if node.kind is not NodeKind.FILE:
            raise _error(errno.EISDIR if node.kind is NodeKind.DIR else errno.ELOOP)
        return self.files.open(node.entry)

    @_answered
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return self.files.read(fh, size, offset)

    @_answered
    def release(self, path: str, fh: int) -> int:
        self.files.release(fh)
        return 0

"""A local store that enforces hf-mount's streaming-write rules in-process (``hfsim://``).

``JOURNAL_STORE=hfsim:///path`` opens it: a rehearsal, on local disk, of what journal
(or a backup tool) does on an hf-mount volume, and what the tests run the local backend
on. It is not a mount and not a bucket: the objects are ordinary files under ``path``,
and the rules hold for writes made through this process only (docs/design.md §14).

hf-mount (``huggingface/hf-mount``) shows a Hugging Face storage bucket as a
filesystem. Its default *streaming* write mode (README, "Consistency model" →
"Writes"; ``src/virtual_fs/``) is append-only and in-memory: a file opened for
writing is buffered in memory and uploaded on ``close()``, and a crash before close
loses it. ``HfMountFsOps`` models that on a real directory:

- opening an existing file for writing without ``O_TRUNC`` (``r+``), or with
  ``O_APPEND``, fails with ``EPERM``: a bucket object cannot be appended to;
- writes must be sequential (``pwrite`` at any offset but the end fails with ``EINVAL``);
- written bytes stay in memory; the file appears on disk only at ``close()``;
- ``fsync`` (of a file or a directory) does nothing;
- ``unlink`` of a file that is open for writing fails with ``EPERM``;
- ``crash()`` drops every unclosed file: its bytes never appear;
- a name that is a strict string prefix of another file's name (``a/b`` beside
  ``a/b/c``, or ``projects.json`` beside ``projects.json.1.tmp``) is refused with
  ``PhantomPrefixError``: older hf-mount versions showed the shorter one as a
  phantom directory, which breaks ``name.tmp``-beside-``name`` writers.

``HfMountSimStore`` is a ``LocalStore`` using these rules; the local backend's write
pattern (temp file in ``.tmp/``, one sequential open, close, rename) passes on it.
``crash()`` is for in-process tests: a store opened from a URL has no way to call it.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Any

from ..atomic import FsOps, rename_noclobber
from .local import LocalStore

__all__ = ["HfMountFsOps", "HfMountSimStore", "PhantomPrefixError"]


class PhantomPrefixError(OSError):
    """Creating this name would make it, or another name, a phantom directory."""


class _StreamingFile:
    """An open streaming write: the bytes live here until close."""

    def __init__(self, path: str, mode: int):
        self.path = path
        self.mode = mode
        self.buf = bytearray()
        self.open = True


class HfMountFsOps(FsOps):
    """``FsOps`` with hf-mount's streaming-write rules for files under ``root``."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self._lock = threading.RLock()
        self._writers: dict[str, _StreamingFile] = {}

    def open(self, path: str, flags: int, mode: int) -> Any:
        with self._lock:
            exists = os.path.exists(path) or path in self._writers
            if flags & os.O_APPEND or (exists and not flags & os.O_TRUNC):
                raise PermissionError(errno.EPERM, "streaming mode cannot append to or modify a file", path)
            if exists and flags & os.O_CREAT and flags & os.O_EXCL:
                raise FileExistsError(errno.EEXIST, "file exists", path)
            if not exists and not flags & os.O_CREAT:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            if not os.path.isdir(os.path.dirname(path)):
                raise FileNotFoundError(errno.ENOENT, "no such directory", os.path.dirname(path))
            self._check_phantom(path, is_dir=False)
            handle = _StreamingFile(path, mode)
            self._writers[path] = handle
            return handle

    def write(self, fd: Any, data: memoryview) -> int:
        return self.pwrite(fd, data, len(self._live(fd).buf))

    def pwrite(self, fd: Any, data: memoryview, offset: int) -> int:
        """Write at ``offset``, which must be the current end of the file."""
        handle = self._live(fd)
        if offset != len(handle.buf):
            raise OSError(errno.EINVAL, f"streaming mode needs sequential writes (at {len(handle.buf)}, not {offset})")
        handle.buf += data
        return len(data)

    def fchmod(self, fd: Any, mode: int) -> None:
        self._live(fd).mode = mode

    def fsync(self, fd: Any) -> None:
        self._live(fd)  # accepted and ignored: data is durable only after close

    def close(self, fd: Any) -> None:
        """Publish the buffered bytes. A handle dropped by ``crash()`` publishes nothing."""
        with self._lock:
            if self._writers.get(fd.path) is not fd:
                fd.open = False
                return
            del self._writers[fd.path]
            fd.open = False
            out = os.open(fd.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, fd.mode)
            try:
                view = memoryview(fd.buf)
                while view:
                    view = view[os.write(out, view) :]
            finally:
                os.close(out)

    def rename_noclobber(self, src: str, dst: str) -> None:
        with self._lock:
            self._check_phantom(dst, is_dir=False)
            rename_noclobber(src, dst)

    def replace(self, src: str, dst: str) -> None:
        with self._lock:
            self._check_phantom(dst, is_dir=False)
            os.replace(src, dst)

    def unlink(self, path: str) -> None:
        with self._lock:
            if path in self._writers:
                raise PermissionError(errno.EPERM, "cannot unlink a file open for writing", path)
            os.unlink(path)

    def makedirs(self, path: str) -> None:
        with self._lock:
            if not os.path.isdir(path):
                self._check_phantom(path, is_dir=True)
            os.makedirs(path, exist_ok=True)

    def mkdir(self, path: str) -> None:
        with self._lock:
            self._check_phantom(path, is_dir=True)
            os.mkdir(path)

    def fsync_dir(self, path: str) -> None:
        """Accepted and ignored, as on hf-mount."""

    def crash(self) -> list[str]:
        """Drop every unclosed file, as a crash of the mount or container would; return their paths."""
        with self._lock:
            dropped = sorted(self._writers)
            for handle in self._writers.values():
                handle.open = False
            self._writers.clear()
        return dropped

    def _live(self, fd: Any) -> _StreamingFile:
        if not isinstance(fd, _StreamingFile) or not fd.open:
            raise OSError(errno.EBADF, "bad file handle (closed, or dropped by a crash)")
        return fd

    def _check_phantom(self, path: str, *, is_dir: bool) -> None:
        """Refuse ``path`` if it or an existing file would be shown as a phantom directory."""
        rel = os.path.relpath(os.path.abspath(path), self.root)
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            return
        parts = rel.split(os.sep)
        directory = self.root
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            for name, name_is_dir in self._entries(directory):
                if name == part and name_is_dir == (is_dir or not last):
                    continue  # the directory we descend into, or the name itself as it is
                shorter_file = not name_is_dir and part.startswith(name)
                longer = last and not is_dir and name.startswith(part)
                if shorter_file or longer:
                    raise PhantomPrefixError(
                        errno.EEXIST,
                        f"{rel} and {os.path.relpath(os.path.join(directory, name), self.root)} "
                        "would make one a phantom directory on hf-mount",
                        path,
                    )
            directory = os.path.join(directory, part)

    def _entries(self, directory: str) -> list[tuple[str, bool]]:
        """(name, is_dir) for files on disk and unclosed files in ``directory``."""
        try:
            with os.scandir(directory) as it:
                found = {e.name: e.is_dir(follow_symlinks=False) for e in it}
        except (FileNotFoundError, NotADirectoryError):
            found = {}
        for pending in self._writers:
            if os.path.dirname(pending) == directory:
                found.setdefault(os.path.basename(pending), False)
        return list(found.items())


class HfMountSimStore(LocalStore):
    """A ``LocalStore`` at ``root`` whose writes follow hf-mount's streaming rules."""

    def __init__(self, root: str):
        super().__init__(root, fs=HfMountFsOps(root))

    def crash(self) -> list[str]:
        """Drop every unclosed file; see ``HfMountFsOps.crash``."""
        return self.fs.crash()

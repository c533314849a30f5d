"""The one way journal publishes a file: temp name outside the key space, then rename.

The temp file lives in a separate directory (never ``name.tmp`` beside ``name``: on
hf-mount a key that is a strict prefix of another shows up as a phantom directory).
It is written sequentially in one open, fsynced, closed, renamed into place, and the
directory is fsynced. It is never reopened or appended to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Iterable
from typing import Any, BinaryIO

from .os_errors import naming
from .paths import PRIVATE_DIR, PRIVATE_FILE

#: The size of the pieces a stream is copied in (into a file here, into a store object by the backends).
COPY_CHUNK = 1 << 20

_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_SYNC_FILE_RANGE_WAIT_BEFORE = 1
_SYNC_FILE_RANGE_WRITE = 2
_SYNC_FILE_RANGE_WAIT_AFTER = 4
_libc = None
_sync_file_range = None


def _c_library():
    global _libc
    if _libc is None:
        import ctypes  # only the first call that needs libc pays for the import

        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def fsync_dir(path: str) -> None:
    """fsync a directory so a rename inside it survives a crash (best effort on FUSE)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some FUSE filesystems reject fsync on directories; the rename is still done
    finally:
        os.close(fd)


def makedirs(path: str, mode: int = 0o777) -> list[str]:
    """``os.makedirs(path, mode, exist_ok=True)``, but every directory it makes gets
    ``mode`` (``os.makedirs`` gives it only to the last one); returns the directories it
    made, deepest first (their parents are the directories to fsync)."""
    made, up = [], path
    while not os.path.isdir(up) and os.path.dirname(up) != up:
        made.append(up)
        up = os.path.dirname(up)
    for folder in reversed(made):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
    return made


def start_writeback(fd: int) -> None:
    """Start writing ``fd``'s dirty pages to disk now, without waiting for them.

    ``sync_file_range(SYNC_FILE_RANGE_WRITE)``: it makes nothing durable by itself (no
    metadata, no disk cache flush; an ``fsync`` is still required), but the ``fsync`` that
    follows later then finds the data already written. Best effort: a no-op where the
    call is missing or refused (FUSE, non-Linux).
    """
    if _load_sync_file_range():
        _sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


def drop_written(fd: int, start: int, end: int) -> None:
    """Wait until ``fd``'s bytes ``[start, end)`` are written to disk, then drop them from the
    page cache (``POSIX_FADV_DONTNEED``): a large file restored this way holds a few
    pages of memory, not all of its own, and each next write reuses pages just freed
    rather than cold ones (on a VM, first touching cold pages cost a 2 GiB restore
    seconds of system time). Nothing is made durable here (an ``fsync`` is still
    required). Best effort: a no-op where the calls are missing or refused.
    """
    if end <= start or not _load_sync_file_range():
        return
    if _sync_file_range(fd, start, end - start, _SYNC_FILE_RANGE_WAIT_BEFORE | _SYNC_FILE_RANGE_WRITE
                        | _SYNC_FILE_RANGE_WAIT_AFTER) != 0:
        return
    try:
        os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)
    except (AttributeError, OSError):
        pass


#: A file written in sequence has its writeback started after every this many bytes
#: (``Writeback``).
WRITEBACK_BYTES = 8 << 20
#: A file this large leaves the page cache as it is written (``Writeback``).
DROP_CACHE_BYTES = 32 << 20


class Writeback:
    """Keeps the dirty pages of a large file being written in sequence few, and, once
    it is ``DROP_CACHE_BYTES`` long, its clean ones too: after every
    ``WRITEBACK_BYTES`` written (``wrote``), the bytes whose writeback the step before
    started are waited for and dropped from the page cache (``drop_written``), and the
    writeback of the rest is started (``start_writeback``). Each next write then reuses
    pages just freed instead of cold ones, and the ``fsync`` that must still follow
    finds little left to write. ``size``: the file's final size when known (a restored
    file: dropped from the first step); None, decided as it grows (a pack). ``flush``:
    called before each step, when some written bytes may still be in a buffer of the
    caller's. Best effort, as those two calls are; nothing is made durable here."""

    def __init__(self, fd: int, size: int | None = None, flush=None):
        self.fd = fd
        self._flush = flush
        self.size = 0
        # dropped once this many bytes are written: from the first step when the final size is known to be large
        self._drop_from = 0 if size is not None and size >= DROP_CACHE_BYTES else DROP_CACHE_BYTES
        self._unsynced = self._dropped = self._started = 0

    def wrote(self, n: int) -> None:
        """``n`` more bytes were written at the end of the file (and are in the kernel)."""
        self.size += n
        self._unsynced += n
        if self._unsynced < WRITEBACK_BYTES:
            return
        if self._flush is not None:
            self._flush()
        if self.size >= self._drop_from:
            drop_written(self.fd, self._dropped, self._started)
            self._dropped = self._started
        start_writeback(self.fd)
        self._started = self.size
        self._unsynced = 0

    def skipped(self, n: int) -> None:
        """The file goes on ``n`` bytes further without a write (a hole left there)."""
        self.size += n


def _load_sync_file_range():
    global _sync_file_range
    if _sync_file_range is None:
        import ctypes

        fn = getattr(_c_library(), "sync_file_range", None)
        if fn is not None:
            fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
            fn.restype = ctypes.c_int
        _sync_file_range = fn or False
    return _sync_file_range


#: Filesystems whose ``syncfs`` writes back and commits everything on them, as an
#: ``fsync`` of each file would. tmpfs is not one: nothing there outlives a crash, and
#: its ``fsync`` costs one call.
SYNCFS_FILESYSTEMS = frozenset({"ext4", "xfs", "btrfs"})
#: ``syncfs`` reports a failure to write back a file (``ENOSPC``, ``EIO``) from Linux 5.8 on.
SYNCFS_REPORTS_FROM = (5, 8)


def syncs_whole(path: str) -> bool:
    """Whether ``sync_filesystem`` makes every file written on ``path``'s filesystem
    durable, and reports a failure to write one back: Linux 5.8 or later, and a
    filesystem of ``SYNCFS_FILESYSTEMS`` mounted at ``path``'s device (found by it in
    ``/proc/self/mountinfo``: an overlay, FUSE or NFS, whose ``syncfs`` may not, is never
    taken). Else each file is to be fsynced."""
    from .localfs import find_mount   # only a restore's first batch asks

    try:
        kernel = tuple(int(x) for x in os.uname().release.split(".")[:2])
        dev = os.stat(path).st_dev
    except (ValueError, OSError):
        return False
    mount = find_mount(path)
    return kernel >= SYNCFS_REPORTS_FROM and mount is not None and mount.dev == dev \
        and mount.fstype in SYNCFS_FILESYSTEMS


def sync_filesystem(fd: int) -> None:
    """``syncfs(2)`` of the filesystem ``fd`` is on: every dirty page and inode there is
    written and committed. Raises ``OSError`` for a write-back failure since ``fd`` was
    opened (``syncs_whole`` says where one is reported) or when the call is missing."""
    fn = getattr(_c_library(), "syncfs", None)
    if fn is None:
        raise OSError(errno.ENOSYS, "syncfs is not available")
    if fn(fd) != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _renameat2_noreplace(src: str, dst: str, src_dir_fd: int | None = None) -> bool:
    """Try renameat2(RENAME_NOREPLACE). True when done; False when unsupported here."""
    fn = getattr(_c_library(), "renameat2", None)
    if fn is None:
        return False
    rc = fn(_AT_FDCWD if src_dir_fd is None else src_dir_fd, os.fsencode(src), _AT_FDCWD, os.fsencode(dst),
            _RENAME_NOREPLACE)
    if rc == 0:
        return True
    import ctypes

    err = ctypes.get_errno()
    if err == errno.EEXIST:
        raise FileExistsError(errno.EEXIST, "file exists", dst)
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), dst)


def rename_noclobber(src: str, dst: str, src_dir_fd: int | None = None) -> None:
    """Move ``src`` (relative to ``src_dir_fd`` if given) to ``dst``, raising
    ``FileExistsError`` if ``dst`` exists.

    Uses renameat2(RENAME_NOREPLACE), which is atomic. Filesystems that do not
    support it (some FUSE mounts) get a check-then-rename, which is last-writer-wins
    under a race; docs/design.md states this per backend.
    """
    if _renameat2_noreplace(src, dst, src_dir_fd):
        return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, "file exists", dst)
    os.rename(src, dst, src_dir_fd=src_dir_fd)


class FsOps:
    """The filesystem calls a publish (or a removal) makes; the default makes real ``os`` calls.

    Tests substitute a subclass to enforce another filesystem's rules (see
    ``journal/store/hfmount.py``) or to record the calls. ``open`` returns an opaque
    handle that only this object's ``write``/``fchmod``/``fsync``/``close`` accept.
    """

    def open(self, path: str, flags: int, mode: int) -> Any:
        return os.open(path, flags, mode)

    def write(self, fd: Any, data: memoryview) -> int:
        return os.write(fd, data)

    def fchmod(self, fd: Any, mode: int) -> None:
        os.fchmod(fd, mode)

    def futime(self, fd: Any, ns: tuple[int, int]) -> None:
        os.utime(fd, ns=ns)

    def fsync(self, fd: Any) -> None:
        os.fsync(fd)

    def close(self, fd: Any) -> None:
        os.close(fd)

    def rename_noclobber(self, src: str, dst: str) -> None:
        rename_noclobber(src, dst)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def makedirs(self, path: str) -> None:
        makedirs(path, PRIVATE_DIR)  # the temp directory of a publish: a file's bytes before it has its mode

    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def fsync_dir(self, path: str) -> None:
        fsync_dir(path)


#: The default: real filesystem calls.
OS_FS = FsOps()


def _write_all(fd: Any, data: bytes | Iterable[bytes] | BinaryIO, fs: FsOps = OS_FS) -> int:
    total = 0
    if isinstance(data, (bytes, bytearray, memoryview)):
        pieces: Iterable[bytes] = (data,)
    elif hasattr(data, "read"):
        pieces = iter(lambda: data.read(COPY_CHUNK), b"")
    else:
        pieces = data
    for piece in pieces:
        view = memoryview(piece)
        while view:
            n = fs.write(fd, view)
            view = view[n:]
            total += n
    return total


def write_file_atomic(
    path: str,
    data: bytes | Iterable[bytes] | BinaryIO,
    tmp_dir: str,
    *,
    noclobber: bool = False,
    mode: int | None = None,
    mtime_ns: int | None = None,
    fs: FsOps | None = None,
) -> int:
    """Publish ``data`` at ``path`` and return the number of bytes written.

    ``tmp_dir`` must be on the same filesystem as ``path`` and outside any key space.
    With ``noclobber`` an existing ``path`` raises ``FileExistsError`` and is left
    untouched. ``mode`` and ``mtime_ns`` are applied to the temp file through its
    descriptor before the rename, so the published file never shows other values. Every filesystem call
    goes through ``fs`` (default: real ``os`` calls).
    """
    fs = fs or OS_FS
    tmp, total = write_temp(data, tmp_dir, path, mode=mode, mtime_ns=mtime_ns, fs=fs)
    try:
        publish_temp(tmp, path, noclobber=noclobber, fs=fs)
    except BaseException:
        discard_temp(tmp, fs)
        raise
    return total


def write_temp(data: bytes | Iterable[bytes] | BinaryIO, tmp_dir: str, path: str, *, mode: int | None = None,
               mtime_ns: int | None = None, fs: FsOps | None = None) -> tuple[str, int]:
    """The first half of a publish: ``data`` written to a new temp file in ``tmp_dir``,
    sequentially in one open, fsynced and closed; ``(its path, bytes written)``. An error
    names ``path``, the file being published, and leaves no temp file."""
    fs = fs or OS_FS
    fs.makedirs(tmp_dir)
    tmp = os.path.join(tmp_dir, f"{uuid.uuid4().hex}.part")
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 PRIVATE_FILE if mode is None else mode & 0o7777)
    try:
        with naming(path):  # a write or an fsync fails naming no file (a full disk)
            try:
                total = _write_all(fd, data, fs)
                if mode is not None:
                    fs.fchmod(fd, mode & 0o7777)
                if mtime_ns is not None:
                    fs.futime(fd, (mtime_ns, mtime_ns))
                fs.fsync(fd)
            finally:
                fs.close(fd)
    except BaseException:
        discard_temp(tmp, fs)
        raise
    return tmp, total


def publish_temp(tmp: str, path: str, *, noclobber: bool = False, fs: FsOps | None = None) -> None:
    """The second half: rename the closed temp file ``tmp`` to ``path`` (``noclobber``:
    ``FileExistsError`` when ``path`` exists, and ``tmp`` stays, so the same bytes can
    be published under another name without being written again), then fsync the
    directory."""
    fs = fs or OS_FS
    if noclobber:
        fs.rename_noclobber(tmp, path)
    else:
        fs.replace(tmp, path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def discard_temp(tmp: str, fs: FsOps | None = None) -> None:
    """Remove a temp file that was not published (gone already is fine)."""
    try:
        (fs or OS_FS).unlink(tmp)
    except FileNotFoundError:
        pass


def replace_file(path: str, data: bytes, *, mode: int = PRIVATE_FILE) -> None:
    """Replace a small local file whole that needs no durability (a status record, a
    local copy, a metrics file): ``data`` in a new temp file beside it
    (``O_EXCL|O_NOFOLLOW``) given exactly ``mode`` whatever the umask, renamed over it,
    no fsync. A reader sees the old file or the new one; on any error the temp file is
    removed and the error raised."""
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode & PRIVATE_FILE)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fd, mode)  # created owner-only; widened (a metrics file) only once it is ours
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

"""A real FUSE filesystem with hf-mount's write rules, over a backing directory (the
"bucket"). Run as its own process: ``python tests/hffuse.py BACKING MOUNTPOINT``.

The rules (hf-mount's documented write rules, ``docs/design.md`` §1), enforced at the syscall boundary:

* a file opened for writing is buffered in this process's memory and reaches the
  bucket only when it is closed (FUSE's ``flush``, which ``close`` waits for);
  ``fsync`` uploads nothing;
* an existing file cannot be opened for writing again (append, ``r+``, a rewrite):
  ``EPERM`` (the brief's rule; hf-mount itself lets ``O_TRUNC`` rewrite a file, which
  journal never does), and it cannot be truncated;
* writes must be sequential (``EINVAL`` otherwise);
* a file still being written cannot be renamed or unlinked (``EPERM``);
* ``rename`` of a closed file is a server-side move; ``RENAME_NOREPLACE`` is not
  supported (libfuse 2), so callers fall back to check-then-rename.

Killing this process with SIGKILL is a container dying: every unclosed buffer is
lost, and only what was closed is in the bucket. Directories are the backing
directory's own (a bucket's prefixes).
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import sys
import threading
import time
import uuid

import mfusepy as fuse

STAGING = ".hffuse-staging"   # in the backing directory, never shown through the mount


class HfMount(fuse.Operations):
    use_ns = True

    def __init__(self, backing: str):
        self.backing = os.path.abspath(backing)
        self.staging = os.path.join(self.backing, STAGING)
        os.makedirs(self.staging, exist_ok=True)
        self.pending: dict[str, bytearray] = {}   # path open for writing -> every byte written
        self.dirty: set[str] = set()              # ... of those, paths with bytes not uploaded yet
        self.writers: dict[int, str] = {}         # handle -> pending path
        self.readers: dict[int, int] = {}         # handle -> backing fd
        self.handles = itertools.count(1)
        self.mutex = threading.Lock()

    def _real(self, path: str) -> str:
        if path.lstrip("/").split("/")[0] == STAGING:
            raise fuse.FuseOSError(errno.ENOENT)
        return os.path.join(self.backing, path.lstrip("/"))

    # ----------------------------------------------------------------- metadata

    def getattr(self, path, fh=None):
        with self.mutex:
            if path in self.dirty:
                now = time.time_ns()
                return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": len(self.pending[path]),
                        "st_atime": now, "st_mtime": now, "st_ctime": now, "st_uid": os.getuid(),
                        "st_gid": os.getgid()}
        try:
            st = os.lstat(self._real(path))
        except OSError as err:
            raise fuse.FuseOSError(err.errno) from None
        keys = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_atime", "st_mtime", "st_ctime")
        out = {k: getattr(st, k) for k in keys}
        out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return out

    def readdir(self, path, fh):
        real = self._real(path)
        names = set(os.listdir(real)) - {STAGING}
        prefix = path.rstrip("/") + "/"
        with self.mutex:
            names |= {p[len(prefix):] for p in self.dirty if p.startswith(prefix) and "/" not in p[len(prefix):]}
        return [".", ".."] + sorted(names)

    def statfs(self, path):
        sv = os.statvfs(self.backing)
        return {k: getattr(sv, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                            "f_files", "f_ffree", "f_favail", "f_namemax")}

    def chmod(self, path, mode):
        return 0  # object storage keeps no modes: accepted, not kept

    def chown(self, path, uid, gid):
        return 0

    def utimens(self, path, times=None):
        return 0  # nor times

    def access(self, path, amode):
        self.getattr(path)
        return 0

    # ----------------------------------------------------------------- directories

    def mkdir(self, path, mode):
        try:
            os.mkdir(self._real(path), 0o755)
        except OSError as err:
            raise fuse.FuseOSError(err.errno) from None
        return 0

    def rmdir(self, path):
        try:
            os.rmdir(self._real(path))
        except OSError as err:
            raise fuse.FuseOSError(err.errno) from None
        return 0

    # ----------------------------------------------------------------- files

    def create(self, path, mode, fi=None):
        with self.mutex:
            if path in self.pending or os.path.lexists(self._real(path)):
                raise fuse.FuseOSError(errno.EPERM)  # no reopening an existing file
            if not os.path.isdir(os.path.dirname(self._real(path))):
                raise fuse.FuseOSError(errno.ENOENT)
            self.pending[path] = bytearray()
            self.dirty.add(path)
            fh = next(self.handles)
            self.writers[fh] = path
            return fh

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC):
            raise fuse.FuseOSError(errno.EPERM)  # no appending to, or rewriting, an object
        with self.mutex:
            if path in self.dirty:
                raise fuse.FuseOSError(errno.EBUSY)  # not uploaded: nothing to read yet
        try:
            fd = os.open(self._real(path), os.O_RDONLY)
        except OSError as err:
            raise fuse.FuseOSError(err.errno) from None
        with self.mutex:
            fh = next(self.handles)
            self.readers[fh] = fd
        return fh

    def read(self, path, size, offset, fh):
        fd = self.readers.get(fh)
        if fd is None:
            raise fuse.FuseOSError(errno.EBADF)
        return os.pread(fd, size, offset)

    def write(self, path, data, offset, fh):
        with self.mutex:
            target = self.writers.get(fh)
            if target is None:
                raise fuse.FuseOSError(errno.EBADF)
            buf = self.pending[target]
            if offset != len(buf):
                raise fuse.FuseOSError(errno.EINVAL)  # streaming: sequential writes only
            buf += data
            self.dirty.add(target)
        return len(data)

    def truncate(self, path, length, fh=None):
        with self.mutex:
            buf = self.pending.get(path)
            if buf is not None and length == len(buf):
                return 0  # O_TRUNC of a file just opened anew
        raise fuse.FuseOSError(errno.EPERM)

    def fsync(self, path, datasync, fh):
        return 0  # a no-op: the bytes are still only in this process's memory

    def flush(self, path, fh):
        """``close`` of any descriptor of the file: upload what was written so far
        (``close`` waits for this). The handle stays open for writes through a
        duplicate descriptor; they are uploaded at the next close."""
        with self.mutex:
            target = self.writers.get(fh)
            if target is None or target not in self.dirty:
                return 0
            data = bytes(self.pending[target])
            self.dirty.discard(target)
        staged = os.path.join(self.staging, uuid.uuid4().hex)
        with open(staged, "wb") as out:
            out.write(data)
        os.replace(staged, self._real(target))
        return 0

    def release(self, path, fh):
        self.flush(path, fh)
        with self.mutex:
            fd = self.readers.pop(fh, None)
            target = self.writers.pop(fh, None)
            if target is not None:
                self.pending.pop(target, None)
        if fd is not None:
            os.close(fd)
        return 0

    def unlink(self, path):
        with self.mutex:
            if path in self.pending:
                raise fuse.FuseOSError(errno.EPERM)  # open for writing
        try:
            os.unlink(self._real(path))
        except OSError as err:
            raise fuse.FuseOSError(err.errno) from None
        return 0

    def rename(self, old, new):
        with self.mutex:
            if old in self.dirty or new in self.pending:
                raise fuse.FuseOSError(errno.EPERM)  # not uploaded yet
            if old in self.pending:  # closed, its release still to come: detach the handle
                del self.pending[old]
                self.writers = {fh: p for fh, p in self.writers.items() if p != old}
        try:
            os.rename(self._real(old), self._real(new))
        except OSError as err:
            raise fuse.FuseOSError(err.errno) from None
        return 0


def main() -> None:
    backing, mountpoint = sys.argv[1], sys.argv[2]
    fuse.FUSE(HfMount(backing), mountpoint, foreground=True, nothreads=True, big_writes=True,
              attr_timeout=0, entry_timeout=0, negative_timeout=0, fsname="hffuse")


if __name__ == "__main__":
    main()

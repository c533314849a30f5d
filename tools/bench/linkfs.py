"""A FUSE mount of a local directory behind a slow link: what a bucket feels like.

Run as its own process: ``python tools/bench/linkfs.py BACKING MOUNTPOINT [RATE LATENCY [PID]]``
(bytes per second, default 20 MB/s; seconds per request, default 30 ms; a process
whose calls cost no link time: the bench's own, listing what a tick uploaded). Every call
passes through to ``BACKING``, and the calls a bucket answers with a request wait as
that request would (the bench's link part, ``parts/link.py``):

* a file written is uploaded when it is closed (hf-mount's streaming writes): the
  ``close`` waits one request's latency plus its bytes' time on the link;
* a file opened for reading costs one request (a GET) at its first read, and every
  byte read its time on the link;
* ``rename`` (a server-side copy), ``unlink`` (a DELETE) and listing a directory (a
  LIST) cost one request each; metadata (``stat``, ``mkdir``, ``chmod``) costs none,
  as hf-mount caches it.

The link is one pipe shared by every transfer (``Link``): two uploads at once take as
long as one of twice the size, while their latencies overlap. The mount is mounted
with ``direct_io``, so no read is answered from the kernel's page cache.

``/.linkfs-stats``, a file only the mount shows, reads as what the link carried so far
(JSON: ``requests`` and ``bytes``, those of the free process left out): the bench reads
it before and after a command, for the command's link floor.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import threading
import time

import mfusepy as fuse

RATE = 20e6        # bytes per second
LATENCY = 0.030    # seconds added per request
STATS = "/.linkfs-stats"


class Link:
    """One shared pipe: each transfer is queued behind those before it."""

    def __init__(self, rate: float, latency: float, free_pid: int = 0):
        self.rate, self.latency, self.free_pid = rate, latency, free_pid
        self._free_at = 0.0
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def request(self, nbytes: int = 0) -> None:
        """Wait as one request moving ``nbytes`` would: its latency, then its turn on the pipe."""
        if self._free():
            return
        time.sleep(self.latency)
        self.transfer(nbytes, counted=True)

    def transfer(self, nbytes: int, counted: bool = False) -> None:
        if self._free():
            return
        with self._lock:
            start = max(time.monotonic(), self._free_at)
            self._free_at = start + nbytes / self.rate
            until = self._free_at
            self.requests += counted
            self.bytes += nbytes
        pause = until - time.monotonic()
        if pause > 0:
            time.sleep(pause)


    def _free(self) -> bool:
        return bool(self.free_pid) and fuse.fuse_get_context()[2] == self.free_pid


class Passthrough(fuse.Operations):
    use_ns = True

    def __init__(self, backing: str, link: Link):
        self.backing = os.path.abspath(backing)
        self.link = link
        self.written: dict[int, int] = {}   # fd open for writing -> bytes written since its last close
        self.unread: set[int] = set()       # fds opened for reading, not read yet (their GET is due)
        self.mutex = threading.Lock()

    def _real(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    def _stats(self) -> bytes:
        return json.dumps({"requests": self.link.requests, "bytes": self.link.bytes}).encode()

    def getattr(self, path, fh=None):
        if path == STATS:
            return {"st_mode": stat.S_IFREG | 0o444, "st_nlink": 1, "st_size": len(self._stats())}
        st = os.lstat(self._real(path))
        out = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid")}
        out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return out

    def readdir(self, path, fh):
        self.link.request()
        return [".", ".."] + os.listdir(self._real(path))

    def readlink(self, path):
        return os.readlink(self._real(path))

    def statfs(self, path):
        sv = os.statvfs(self.backing)
        return {k: getattr(sv, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                            "f_files", "f_ffree", "f_favail", "f_namemax")}

    def chmod(self, path, mode):
        os.chmod(self._real(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self._real(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self._real(path), ns=times)

    def access(self, path, amode):
        if not os.access(self._real(path), amode):
            raise fuse.FuseOSError(errno.EACCES)

    def mkdir(self, path, mode):
        os.mkdir(self._real(path), mode)

    def rmdir(self, path):
        os.rmdir(self._real(path))

    def symlink(self, target, source):
        os.symlink(source, self._real(target))

    def unlink(self, path):
        self.link.request()
        os.unlink(self._real(path))

    def rename(self, old, new):
        self.link.request()
        os.rename(self._real(old), self._real(new))

    def link(self, target, source):
        os.link(self._real(source), self._real(target))

    def create(self, path, mode, fi=None):
        fd = os.open(self._real(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with self.mutex:
            self.written[fd] = 0
        return fd

    def open(self, path, flags):
        if path == STATS:
            return 0   # never a descriptor of a backing file: those are >= 3
        fd = os.open(self._real(path), flags & ~(os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW))
        with self.mutex:
            if flags & (os.O_WRONLY | os.O_RDWR):
                self.written[fd] = 0
            else:
                self.unread.add(fd)
        return fd

    def read(self, path, size, offset, fh):
        if path == STATS:
            return self._stats()[offset:offset + size]
        with self.mutex:
            first = fh in self.unread
            self.unread.discard(fh)
        data = os.pread(fh, size, offset)
        if first:
            self.link.request(len(data))
        else:
            self.link.transfer(len(data))
        return data

    def write(self, path, data, offset, fh):
        n = os.pwrite(fh, data, offset)
        with self.mutex:
            self.written[fh] = self.written.get(fh, 0) + n
        return n

    def truncate(self, path, length, fh=None):
        if fh is None:
            os.truncate(self._real(path), length)
        else:
            os.ftruncate(fh, length)

    def fsync(self, path, datasync, fh):
        os.fsync(fh)

    def flush(self, path, fh):
        """``close``: the bytes written through this handle are uploaded now."""
        with self.mutex:
            nbytes = self.written.get(fh)
            if nbytes is not None:
                self.written[fh] = 0
        if nbytes is not None:
            self.link.request(nbytes)

    def release(self, path, fh):
        if path == STATS:
            return
        with self.mutex:
            self.written.pop(fh, None)
            self.unread.discard(fh)
        os.close(fh)


def main() -> None:
    backing, mountpoint = sys.argv[1], sys.argv[2]
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else RATE
    latency = float(sys.argv[4]) if len(sys.argv) > 4 else LATENCY
    free_pid = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    fuse.FUSE(Passthrough(backing, Link(rate, latency, free_pid)), mountpoint, foreground=True, nothreads=False,
              big_writes=True, direct_io=True, fsname="linkfs")


if __name__ == "__main__":
    main()

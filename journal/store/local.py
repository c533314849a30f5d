"""The local-directory backend: key ``a/b/c`` is the file ``<root>/a/b/c``.

This is the embedded default, and an hf-mount path is used this way. Every object is
published by ``journal.atomic.write_file_atomic``: a temp file in ``<root>/.tmp/``
(outside the key space, since keys never start with ``.``), written sequentially in
one open, fsynced, closed, renamed into place without clobbering, and the directory
fsynced. A store file is never opened for append or read-write, and a published file
is never reopened for writing.

Every filesystem call that writes goes through an ``FsOps`` object, so tests can
enforce another filesystem's rules (``journal/store/hfmount.py``) or record the calls.
"""

from __future__ import annotations

import errno
import os
import time
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from ..atomic import OS_FS, FsOps, discard_temp, publish_temp, write_file_atomic, write_temp
from ..errors import KeyExists, ObjectNotFound, StoreError
from ..os_errors import describe_os_error
from ..localfs import find_mount
from .base import Staged, Store, check_key

__all__ = ["FsOps", "LocalStore", "TMP_DIR"]

#: The temp directory under the root; its name starts with ``.`` so no key can collide.
TMP_DIR = ".tmp"
#: Temp files older than this are a crashed writer's leftovers.
STALE_TEMP_SECONDS = 3600

#: How many times a put retries when a concurrent delete removed its parent directory.
_PARENT_RETRIES = 3


#: Filesystems backed by a local disk or memory: no read-ahead threads (``Store.read_ahead``).
LOCAL_FS_TYPES = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "tmpfs", "ramfs", "overlay", "zfs"})


def mount_type(path: str) -> str | None:
    """The filesystem type of the mount holding ``path`` (``localfs.find_mount``), or None."""
    found = find_mount(path)
    return found.fstype if found is not None else None


class LocalStore(Store):
    """A store in a local (or FUSE-mounted) directory.

    ``puts`` and ``put_bytes`` count successful puts and their payload bytes.
    """

    def __init__(self, root: str, fs: FsOps | None = None, *, make_parents: bool = False):
        self.root = os.path.abspath(root)
        self.make_parents = make_parents
        self.location = self.root
        self.fs = fs or OS_FS
        self.tmp_dir = os.path.join(self.root, TMP_DIR)
        self._root_seen = False     # an object was read or a directory found: the store is there (``_make_dirs``)
        self.puts = 0
        self.put_bytes = 0
        self._count_lock = threading.Lock()
        self._read_ahead: bool | None = None

    @property
    def read_ahead(self) -> bool:
        """False on a local-disk filesystem (reads come from the page cache); True on
        anything else (a FUSE mount such as hf-mount, NFS, an unknown type)."""
        if self._read_ahead is None:
            self._read_ahead = mount_type(self.root) not in LOCAL_FS_TYPES
        return self._read_ahead

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *check_key(key).split("/"))

    def put_if_absent(self, key: str, data: bytes | BinaryIO) -> None:
        """Publish ``data`` under ``key``; ``KeyExists`` if present (the old file is kept).

        A key whose path collides with a directory of other keys (``a/b`` beside
        ``a/b/c``) raises ``StoreError``. If a concurrent ``delete`` removes the parent
        directory mid-put, bytes and seekable streams are retried.
        """
        path = self._path(key)
        rewind = _rewinder(data)
        for attempt in range(_PARENT_RETRIES + 1):
            self._make_dirs(os.path.dirname(path), key)
            try:
                total = write_file_atomic(path, data, self.tmp_dir, noclobber=True, fs=self.fs)
                break
            except FileExistsError as err:
                if os.path.isdir(path):
                    raise StoreError(f"put object: {key} collides with a directory of other keys") from err
                if not os.path.lexists(path):  # e.g. a file standing where the temp directory belongs
                    raise StoreError(f"put object: {key}: {err}") from err
                raise KeyExists(key) from err
            except FileNotFoundError as err:
                # A concurrent delete may have pruned the parent between mkdir and rename.
                if os.path.isdir(os.path.dirname(path)) or rewind is None or attempt == _PARENT_RETRIES:
                    raise StoreError(f"put object: {key}: {err}") from err
                rewind()
            except OSError as err:
                raise StoreError(f"put object: {key}: {describe_os_error(err, err.filename or path)}") from err
        self._count_put(total)

    def put_file_if_absent(self, key: str, path: str) -> None:
        """Publish the closed file ``path`` under ``key`` (see ``Store.put_file_if_absent``).

        When it is on the store's filesystem and this store makes real filesystem calls
        (not ``hfsim://``'s rules), the file is fsynced and hard-linked to the key
        (``link`` never replaces an existing name: put-if-absent), then the directory is
        fsynced, the order ``write_file_atomic`` keeps: bytes durable, then visible, then
        the name durable. The bytes are not copied: a 64 MiB pack costs an fsync and a
        link instead of a read, a write and an fsync. Elsewhere (another filesystem, no
        hard links) the file is copied, as ``put_if_absent`` copies any stream."""
        if self.fs is OS_FS and self._link(key, path):
            return
        with open(path, "rb") as src:
            self.put_if_absent(key, src)

    def _link(self, key: str, path: str) -> bool:
        """``put_file_if_absent`` by a hard link; False when the file cannot be linked here."""
        dst = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchmod(fd, 0o600)   # as write_temp makes every stored file
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
        except OSError as err:
            raise StoreError(f"put object: {key}: {describe_os_error(err, path)}") from err
        self._make_dirs(os.path.dirname(dst), key)
        try:
            os.link(path, dst, follow_symlinks=False)
        except FileExistsError as err:
            if os.path.isdir(dst) or not os.path.lexists(dst):
                raise StoreError(f"put object: {key}: {err}") from err
            raise KeyExists(key) from err
        except OSError as err:
            if err.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
                return False  # another filesystem, or one without hard links: copy
            raise StoreError(f"put object: {key}: {describe_os_error(err, dst)}") from err
        self.fs.fsync_dir(os.path.dirname(dst))
        self._count_put(size)
        return True

    def put_first_absent(self, keys: Iterable[str], data: bytes) -> str | None:
        """Write and fsync ``data`` once, then rename it to each key of ``keys`` in turn
        until one is absent (``renameat2(RENAME_NOREPLACE)``); see ``Store.put_first_absent``."""
        tmp = None
        try:
            for key in keys:
                path = self._path(key)
                if tmp is None:
                    tmp, total = self._write_temp(key, path, data)
                try:
                    self._publish_temp(key, path, tmp)
                except KeyExists:
                    continue
                tmp = None
                self._count_put(total)
                return key
            return None
        finally:
            if tmp is not None:
                discard_temp(tmp, self.fs)

    def stage(self, key: str, data: bytes) -> Staged:
        """Write and fsync ``data`` to a temp file now (on hf-mount: uploaded as it
        closes); ``publish`` renames it to ``key`` without clobbering, the commit's only
        round trip. See ``Store.stage``."""
        path = self._path(key)
        tmp, total = self._write_temp(key, path, data)

        def publish() -> None:
            self._publish_temp(key, path, tmp)
            self._count_put(total)
        return Staged(publish, lambda: discard_temp(tmp, self.fs))

    def _require_root(self, key: str) -> None:
        """Refuse to write once the store's directory, seen before, is gone: its temp
        directory or a key's parents made now would be a store's beginnings on the disk
        under an unmounted volume."""
        if self._root_seen and not os.path.isdir(self.root):
            raise StoreError(f"put object: {key}: the store's directory {self.root} is gone (is the volume "
                             "mounted?)")

    def _write_temp(self, key: str, path: str, data: bytes) -> tuple[str, int]:
        """``data`` in a new temp file, fsynced and closed: ``(its path, bytes)``."""
        self._require_root(key)
        try:
            return write_temp(data, self.tmp_dir, path, fs=self.fs)
        except OSError as err:
            raise StoreError(f"put object: {key}: {describe_os_error(err, err.filename or path)}") from err

    def _publish_temp(self, key: str, path: str, tmp: str) -> None:
        """Rename the closed temp file ``tmp`` to ``key`` (at ``path``) without clobbering:
        ``KeyExists`` when taken, ``tmp`` kept. Its parents are made first, and again if
        a concurrent delete pruned one meanwhile."""
        for attempt in range(_PARENT_RETRIES + 1):
            self._make_dirs(os.path.dirname(path), key)
            try:
                publish_temp(tmp, path, noclobber=True, fs=self.fs)
                return
            except FileExistsError as err:
                if os.path.isdir(path) or not os.path.lexists(path):
                    raise StoreError(f"put object: {key}: {err}") from err
                raise KeyExists(key) from err
            except FileNotFoundError as err:
                if os.path.isdir(os.path.dirname(path)) or attempt == _PARENT_RETRIES:
                    raise StoreError(f"put object: {key}: {describe_os_error(err, err.filename or path)}") from err
            except OSError as err:
                raise StoreError(f"put object: {key}: {describe_os_error(err, err.filename or path)}") from err

    def _count_put(self, nbytes: int) -> None:
        with self._count_lock:
            self.puts += 1
            self.put_bytes += nbytes

    def _make_dirs(self, directory: str, key: str) -> None:
        """Create ``directory`` and missing parents up to the store's own directory,
        fsyncing each new one's parent. The store's directory itself is never made here
        once this store object has seen it: one that vanished mid-checkpoint (a volume
        unmounted) is an error, never a new directory on the disk underneath."""
        if os.path.isdir(directory):
            self._root_seen = True
            return
        if len(directory) <= len(self.root):
            self._require_root(key)
        parent = os.path.dirname(directory)
        if parent != directory:
            self._make_dirs(parent, key)
        try:
            self.fs.mkdir(directory)
        except FileExistsError as err:
            if os.path.isdir(directory):
                return  # another writer made it
            raise StoreError(f"put object: {key}: a prefix of it is an existing key") from err
        except OSError as err:
            raise StoreError(f"put object: {key}: create directory {describe_os_error(err, directory)}") from err
        # The new entry in the parent must survive a crash, or the object is unreachable.
        self.fs.fsync_dir(parent)

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of the object; ``ObjectNotFound`` if missing; past-end truncates."""
        _check_range(start, end)
        path = self._path(key)
        try:  # a bare descriptor and pread: half the cost of a buffered file for a small object
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as err:
            raise ObjectNotFound(key) from err
        except OSError as err:
            raise StoreError(f"read object: {key}: {describe_os_error(err, path)}") from err
        self._root_seen = True
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ObjectNotFound(key)
            stop = st.st_size if end is None else min(end, st.st_size)
            if start >= stop:
                return b""
            data = os.pread(fd, stop - start, start)
            while len(data) < stop - start:   # a read of more than the kernel gives at once
                more = os.pread(fd, stop - start - len(data), start + len(data))
                if not more:
                    break
                data += more
            return data
        finally:
            os.close(fd)

    def head(self, key: str) -> int | None:
        """The object's size, or ``None`` when the key is missing (or is a directory)."""
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield keys starting with ``prefix`` in ascending byte order.

        Names starting with ``.`` and names that are not valid key components are
        skipped. Only directories that can hold a matching key are read.
        """
        return (key for key, _ in self._walk_prefix(prefix))

    def list_sizes(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` for the keys ``list(prefix)`` yields: each size from an ``lstat``
        of its directory entry (not ``entry.stat()``, which would keep every stat of a
        directory until it is done); a file deleted meanwhile is skipped."""
        for key, entry in self._walk_prefix(prefix):
            try:
                size = os.lstat(entry.path).st_size
            except (FileNotFoundError, NotADirectoryError):
                continue
            yield key, size

    def _walk_prefix(self, prefix: str) -> Iterator[tuple[str, os.DirEntry]]:
        """``_walk`` from the deepest directory ``prefix`` names whole (``packs/`` starts
        in ``packs``): on a mount whose listings are requests, none is made of the root."""
        head = prefix.rpartition("/")[0]
        directory = self.root
        for name in head.split("/") if head and _valid_key(head) else ():
            directory = os.path.join(directory, name)
            try:
                if not stat.S_ISDIR(os.lstat(directory).st_mode):
                    return iter(())   # a file (or a link) where the directory belongs: no key under it
            except (FileNotFoundError, NotADirectoryError):
                return iter(())
        if directory == self.root:
            return self._walk(self.root, "", prefix)
        return self._walk(directory, head + "/", prefix)

    def _walk(self, directory: str, rel: str, prefix: str) -> Iterator[tuple[str, os.DirEntry]]:
        try:
            with os.scandir(directory) as it:
                entries = [e for e in it if not e.name.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return
        # A directory's keys all start with "name/", so sort it as "name/" to get byte order.
        marked = sorted((e.name + ("/" if e.is_dir(follow_symlinks=False) else ""), e) for e in entries)
        for name, entry in marked:
            key = rel + name
            if name.endswith("/"):
                if key.startswith(prefix) or prefix.startswith(key):
                    yield from self._walk(entry.path, key, prefix)
            elif key.startswith(prefix) and entry.is_file(follow_symlinks=False) and _valid_key(key):
                yield key, entry

    def delete(self, key: str) -> None:
        """Remove ``key`` (missing is fine), then prune now-empty parent directories."""
        path = self._path(key)
        try:
            self.fs.unlink(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return
        except OSError as err:
            raise StoreError(f"delete object: {key}: {describe_os_error(err, path)}") from err
        directory = os.path.dirname(path)
        while directory != self.root:
            try:
                self.fs.rmdir(directory)
            except OSError:
                break  # not empty, or someone is writing into it: leave it
            directory = os.path.dirname(directory)

    def sweep_temp(self, max_age: float = STALE_TEMP_SECONDS) -> None:
        """Remove temp files older than ``max_age`` seconds (left by a killed writer).

        Younger ones may belong to a put in progress in another process, so they stay.
        """
        try:
            names = os.listdir(self.tmp_dir)
        except (FileNotFoundError, NotADirectoryError):
            return
        cutoff = time.time() - max_age
        for name in names:
            path = os.path.join(self.tmp_dir, name)
            try:
                if os.lstat(path).st_mtime < cutoff:
                    os.unlink(path)
            except FileNotFoundError:
                pass

    def check_creatable(self, dry_run: bool = False) -> None:
        """A new store is made in an existing directory, or as a new directory in one:
        never with missing parents, which is what a typo or a volume that is not mounted
        (``/data`` absent) looks like. The default store (``make_parents``: no store was
        configured) is journal's own directory under the home directory: its parents are made."""
        parent = self.missing_parent()
        if parent is None:
            return
        if self.make_parents:
            if dry_run:
                return
            try:
                os.makedirs(parent, 0o700, exist_ok=True)
                return
            except OSError as err:
                raise StoreError(f"create store {self.root}: {describe_os_error(err, err.filename or parent)}") from err
        raise StoreError(f"create store {self.root}: its parent directory {parent} does not exist (is the "
                         "volume mounted?); create it, or fix JOURNAL_STORE")

    def local_file(self, key: str) -> str | None:
        return self._path(key)

    def missing_parent(self) -> str | None:
        parent = os.path.dirname(self.root)
        return None if os.path.isdir(self.root) or os.path.isdir(parent) else parent

    def is_empty(self) -> bool:
        """True when the root is missing or holds nothing but the temp directory."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return True
        except NotADirectoryError:
            return False
        return all(name == TMP_DIR for name in names)


def _rewinder(data: bytes | BinaryIO) -> Callable[[], object] | None:
    """A function that makes ``data`` readable again from here, or None if it cannot be."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return lambda: None
    stream = data
    try:
        if not stream.seekable():
            return None
        pos = stream.tell()
    except (AttributeError, OSError):
        return None
    return lambda: stream.seek(pos)


def _check_range(start: int, end: int | None) -> None:
    if start < 0 or (end is not None and end < 0):
        raise ValueError(f"invalid byte range: [{start}, {end})")


def _valid_key(key: str) -> bool:
    try:
        check_key(key)
    except ValueError:
        return False
    return True

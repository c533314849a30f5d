"""journal's own temp directory inside a live tree, where restore and migrate stage files.

A file reaches its live path by a rename from a temp file on the same filesystem, so
the temp file is inside the tree, where any process that can write the tree can plant
symlinks and files. So (design §11, invariant 9):

* The directory is new every time: ``mkdir`` of a random name,
  ``.journal-tmp-<16 hex>``, mode 0700; an existing directory is never used. It is
  therefore never a user's directory, and a user's entry of any name
  (``.journal-tmp`` too) is an ordinary entry of the tree.
* It is opened once (``O_DIRECTORY|O_NOFOLLOW``), and every file in it is created,
  renamed and removed relative to that descriptor: a symlink swapped in for the
  directory afterwards sends nothing elsewhere.
* Every file in it is created ``O_CREAT|O_EXCL|O_NOFOLLOW`` under a random name
  ending in ``.part``, and its mode and times are set through its descriptor.
* Before the directory is made, its path is recorded in ``<state_dir>/tree-tmp/``
  (fsynced), and the record is ``flock``ed for as long as the directory is in use.
  ``sweep`` (at the start of every restore and every full checkpoint) removes the
  directories whose record no live process holds (a killed restore's, or migrate's):
  only journal's own names (``*.part``) in them, then the directory. One that holds
  anything else is left, with a warning, and is from then on an ordinary directory of
  the tree. Directories still in use (a migrate running beside a checkpoint) are
  returned, so the walk leaves exactly those out.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os

from ..atomic import FsOps, fsync_dir, makedirs, rename_noclobber, write_file_atomic
from .errors import UnsafePath
from ..paths import PRIVATE_DIR, PRIVATE_FILE, TREE_TMP_DIR
from ..paths import shown
from .under import DIR_FLAGS, open_under, split_rel

PREFIX = ".journal-tmp-"
SUFFIX = ".part"
_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = DIR_FLAGS
#: Temp files are named <random per process>-<counter>.part.
_PROCESS = os.urandom(8).hex()
_seq = itertools.count()


class TreeTmp:
    """One temp directory journal makes in a live tree, and the files in it.

    ``TreeTmp(root, state_dir)`` writes and locks the record; ``open`` then makes the
    directory. A caller keeps the object before it calls ``open``, so ``close`` undoes
    whatever an interruption (a Ctrl-C) left half done. ``make`` does both."""

    def __init__(self, root: str, state_dir: str):
        records = os.path.join(state_dir, TREE_TMP_DIR)
        makedirs(records, PRIVATE_DIR)
        token = os.urandom(8).hex()
        self.root = root
        self.path = os.path.join(root, PREFIX + token)
        self.fd = -1                  # the directory, opened once (``open``)
        self._record_path = os.path.join(records, token)
        # Written and locked under a dot name, then renamed: a sweep never sees a
        # record that is not yet locked, nor one without its path.
        pending = os.path.join(records, "." + token)
        record = os.open(pending, os.O_RDWR | _CREATE, PRIVATE_FILE)
        try:
            fcntl.flock(record, fcntl.LOCK_EX)
            os.write(record, os.fsencode(self.path))
            os.fsync(record)
            os.rename(pending, self._record_path)
            fsync_dir(records)
        except BaseException:
            os.close(record)
            _unlink(pending)
            raise
        self._record = record         # the flocked record file; -1 once closed

    @classmethod
    def make(cls, root: str, state_dir: str) -> TreeTmp:
        """Record, then make, a new temp directory in ``root`` (see the module docstring)."""
        tmp = cls(root, state_dir)
        try:
            tmp.open()
        except BaseException:
            tmp.close()
            raise
        return tmp

    def open(self) -> None:
        """Make the directory (a name that exists already, anything at all, is refused)
        and open it; ``UnsafePath`` if another process replaced it meanwhile."""
        os.mkdir(self.path, 0o700)
        try:
            self.fd = os.open(self.path, _DIR)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafePath(os.path.basename(self.path), f"{shown(self.path)} was replaced as it was made; "
                                 "another process is writing the tree") from err
            raise

    def new_file(self, flags: int = os.O_WRONLY, mode: int = 0o600) -> tuple[str, int]:
        """A new, empty temp file: (name, descriptor), ``mode`` less the umask (in a
        directory only its owner may enter)."""
        name = f"{_PROCESS}-{next(_seq)}{SUFFIX}"
        return name, os.open(name, flags | _CREATE, mode, dir_fd=self.fd)

    def new_symlink(self, target: str, mtime_ns: int | None = None) -> str:
        """A new temp symlink to ``target`` (its times set without following it)."""
        name = f"{_PROCESS}-{next(_seq)}{SUFFIX}"
        os.symlink(target, name, dir_fd=self.fd)
        if mtime_ns is not None:
            os.utime(name, ns=(mtime_ns, mtime_ns), dir_fd=self.fd, follow_symlinks=False)
        return name

    def anonymous(self):
        """An unnamed read-write temp file on the tree's filesystem (``O_TMPFILE``; where
        the filesystem has none, a new file whose name is removed at once)."""
        try:
            fd = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600, dir_fd=self.fd)
        except OSError as err:
            if err.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                raise
            name, fd = self.new_file(os.O_RDWR)
            self.unlink(name)
        return os.fdopen(fd, "w+b")

    def where(self, name: str) -> str:
        """A path of a temp file, for what can only open by path (SQLite, read-only):
        through the directory's descriptor where ``/proc`` shows it, so a directory
        swapped since it was opened makes no difference; else its path."""
        proc = f"/proc/self/fd/{self.fd}"
        return os.path.join(proc if os.path.isdir(proc) else self.path, name)

    def same_file(self, name: str, fd: int) -> bool:
        """True when ``name`` is still the file open as ``fd`` (nothing renamed over it)."""
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    def replace(self, name: str, dst: str, parent: int | None = None) -> None:
        """Rename a temp file over the live path ``dst``, into ``dst``'s directory as
        reached from the tree's root one name at a time (``parent_fd``): a directory on
        the way swapped for a symlink meanwhile is never followed. ``parent``: that
        directory's descriptor, as the caller opened it with ``parent_fd`` for a run of
        renames into it."""
        if parent is not None:
            os.replace(name, os.path.basename(dst), src_dir_fd=self.fd, dst_dir_fd=parent)
            return
        with self.parent(dst) as fd:
            os.replace(name, os.path.basename(dst), src_dir_fd=self.fd, dst_dir_fd=fd)

    @contextlib.contextmanager
    def parent(self, dst: str):
        """``parent_fd(dst)``, closed when the block ends."""
        fd = self.parent_fd(dst)
        try:
            yield fd
        finally:
            os.close(fd)

    def parent_fd(self, dst: str) -> int:
        """A descriptor on the directory of ``dst`` (a path under the tree's root),
        opened from the root one name at a time with ``O_NOFOLLOW``; ``UnsafePath`` when
        one of them is not a directory reached without a symlink (another process
        swapped it since the restore decided the path). The root is the directory this
        temp directory was made in (its ``..``), whatever its path leads to now (a root
        that is itself a symlink, as configured, is fine)."""
        names = split_rel(os.path.relpath(os.path.dirname(dst), self.root))
        root = os.open("..", DIR_FLAGS, dir_fd=self.fd)
        try:
            return open_under(root, names, self.root)
        finally:
            os.close(root)

    def rename_noclobber(self, name: str, dst: str) -> None:
        """Rename a temp file to ``dst``; ``FileExistsError`` if ``dst`` exists."""
        rename_noclobber(name, dst, src_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def sync(self) -> None:
        """fsync the directory (a symlink's target lives in an inode created here)."""
        os.fsync(self.fd)

    def publish(self, dst: str, data, *, mode: int = 0o600, mtime_ns: int | None = None,
                clobber: bool = False) -> int:
        """Write ``data`` (bytes, an iterable of bytes or a readable file) to a new temp
        file here with ``mode`` (and ``mtime_ns``), make it durable and rename it to
        ``dst``: over what is there with ``clobber``, else ``dst`` must not exist
        (``FileExistsError``). Returns the bytes written (``atomic.write_file_atomic``)."""
        return write_file_atomic(dst, data, self.path, noclobber=not clobber, mode=mode, mtime_ns=mtime_ns,
                                 fs=_InDir(self))

    def close(self) -> str | None:
        """Remove journal's temp files and the directory, and the record; a warning when
        something else in the directory keeps it (it is then an ordinary directory of
        the tree)."""
        if self._record < 0:
            return None
        try:
            if self.fd >= 0:
                return _remove(self.path, self.fd)
            try:
                os.rmdir(self.path)  # made, then interrupted before it was opened: empty
            except OSError:
                pass
            return None
        finally:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
            _unlink(self._record_path)
            os.close(self._record)
            self._record = -1


class _InDir(FsOps):
    """``write_file_atomic``'s calls on its temp file, made relative to the temp
    directory's descriptor (the file's path names only which file)."""

    def __init__(self, tmp: TreeTmp):
        self.tmp = tmp

    def open(self, path: str, flags: int, mode: int) -> int:
        return os.open(os.path.basename(path), flags, mode, dir_fd=self.tmp.fd)

    def makedirs(self, path: str) -> None:
        pass  # the directory is there: journal made it

    def rename_noclobber(self, src: str, dst: str) -> None:
        self.tmp.rename_noclobber(os.path.basename(src), dst)

    def replace(self, src: str, dst: str) -> None:
        self.tmp.replace(os.path.basename(src), dst)

    def unlink(self, path: str) -> None:
        os.unlink(os.path.basename(path), dir_fd=self.tmp.fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _remove(path: str, fd: int) -> str | None:
    """Remove the ``*.part`` names in the directory open as ``fd``, then ``path`` if empty."""
    for name in os.listdir(fd):
        if name.endswith(SUFFIX):
            try:
                os.unlink(name, dir_fd=fd)
            except (FileNotFoundError, IsADirectoryError):
                pass
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        if err.errno == errno.ENOTDIR:
            return (f"{shown(path)} is no longer journal's temp directory (another process moved it away); "
                    "journal's files in it were removed")
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        return (f"left {shown(path)}: journal's temp directory holds files journal did not make; it is now an "
                "ordinary directory of the tree (move what is in it, then remove it)")
    return None


def sweep(state_dir: str) -> tuple[set[str], list[str]]:
    """Remove the temp directories no live process holds (see the module docstring).
    Returns (the directories still in use, warnings)."""
    records = os.path.join(state_dir, TREE_TMP_DIR)
    try:
        names = os.listdir(records)
    except FileNotFoundError:
        return set(), []
    in_use: set[str] = set()
    warnings: list[str] = []
    for token in names:
        record_path = os.path.join(records, token)
        try:
            record = os.open(record_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # its owner finished meanwhile
        try:
            try:
                fcntl.flock(record, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not token.startswith("."):
                    in_use.add(os.fsdecode(os.read(record, 8192)))
                continue
            # A dot name is a record killed before it was complete: no directory yet.
            warning = None if token.startswith(".") else _remove_left(os.fsdecode(os.read(record, 8192)))
            if warning:
                warnings.append(warning)
            _unlink(record_path)
        finally:
            os.close(record)
    return in_use, warnings


def _remove_left(path: str) -> str | None:
    """Remove a temp directory a killed process left; never through a symlink."""
    try:
        fd = os.open(path, _DIR)
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return None  # gone, or something else is there now: not ours
        raise
    try:
        return _remove(path, fd)
    finally:
        os.close(fd)

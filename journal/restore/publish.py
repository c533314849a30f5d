"""Restore's batched publish: staged temp files made durable together, then renamed.

Publishing restored files one at a time (``atomic.write_file_atomic``) syncs twice per
file, the file and then its directory, and each sync waits for a filesystem journal
commit. Restore instead *stages* each file: it is written in full, from verified blobs,
to a new file in the tree's temp directory (``local/tree_tmp.py``), with its mode and mtime,
and its writeback is started at once (``atomic.start_writeback``). ``PublishBatch`` then:

1. ``flush``: fsyncs every staged temp file of the batch (mostly already written by
   then) and, if the batch holds symlinks, the temp directory they were created in;
   only when every sync succeeded is each temp renamed to its live path. A failed
   sync renames nothing and removes the batch's temp files.
2. ``sync_dirs``: fsyncs, once each, every directory that received a new entry (a
   rename, a new subdirectory) or a new mode, so the renames survive a crash.

Where one ``syncfs`` of the tree's filesystem makes it all durable and reports a
failure (``atomic.syncs_whole``: ext4, XFS, btrfs on Linux 5.8 or later), it stands
for those fsyncs: a batch is made durable by one call, then renamed (each file is
staged closed, ``TreeWriter.whole``, so no descriptor limits a batch:
``WHOLE_BATCH_FILES``), and the directories by one more at the end. Each fsync waits
for a filesystem journal commit; one per batch is what makes a tree of 200,000 small
files restore in tens of seconds, not minutes. The failure it reports is any since the
temp directory was opened, before the first file was staged in it.

Between the plan and the rename, another process (an agent started early, a user)
may create or change a live path. Each staged file carries what its path was when
restore decided to write it (``expect``: absent, or its inode, size and mtime); just
before the rename the path is looked at again, and a path that changed is left alone
(the staged copy is dropped and the path reported in ``kept``). What remains is the
few microseconds between that look and the rename.

So no live path is ever replaced by bytes that are not durable, whatever the moment
of a crash; a crash between a rename and ``sync_dirs`` leaves the old file or the new
one, each whole. The restore-complete marker is written by the caller after
``sync_dirs`` of every tree. Rebuilt databases are the one kind staged already durable
(``rebuild_db`` fsyncs them): their install step renames them.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..atomic import fsync_dir, sync_filesystem, syncs_whole
from ..local.errors import UnsafePath
from ..os_errors import naming
from ..localfs import observe

#: A batch is flushed once its staged files hold this many bytes or this many files.
BATCH_BYTES = 8 << 20
BATCH_FILES = 128
#: ... when one ``syncfs`` makes the batch durable (no descriptor stays open).
WHOLE_BATCH_BYTES = 64 << 20
WHOLE_BATCH_FILES = 4096


#: ``Staged.expect`` when the live path is not looked at again before the rename.
UNCHECKED = ("unchecked",)


class Staged:
    """One file ready to publish: ``name`` in the temp directory ``tmp`` (a ``TreeTmp``)
    holds all of it; ``fd`` is open until the flush."""

    __slots__ = ("path", "tmp", "name", "fd", "size", "install", "link", "expect")

    def __init__(self, path: str, tmp, name: str, fd: int | None, size: int,
                 install: Callable[[], None] | None = None, link: bool = False):
        self.path = path        # the live path it is renamed to
        self.tmp = tmp
        self.name = name
        self.fd = fd            # None: nothing to fsync (a symlink, a rebuilt database)
        self.size = size
        self.install = install  # replaces the plain rename (databases)
        self.link = link
        self.expect = UNCHECKED  # what the live path must still be (``observe``) to be replaced

    def discard(self) -> None:
        """Close and remove the temp file; never touches the live path."""
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
        self.tmp.unlink(self.name)


class PublishBatch:
    """Collects staged files; ``flush`` syncs then renames them; ``sync_dirs`` at the end."""

    def __init__(self, max_bytes: int = BATCH_BYTES, max_files: int = BATCH_FILES):
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.items: list[Staged] = []
        self.bytes = 0
        self.dirty: set[str] = set()
        self.kept: list[str] = []   # live paths that changed after the plan: left as they are
        self.unsafe: list[tuple[str, UnsafePath]] = []   # (live path, why): its directory became a symlink
        self._whole: dict[int, tuple[object, bool]] = {}   # id(temp dir) -> (it, whether one syncfs covers it)

    def add(self, staged: Staged) -> None:
        """Stage one file; flushes the batch when it is full."""
        whole = self.synced_whole(staged.tmp)
        if whole and staged.fd is not None:   # the batch's syncfs makes it durable: no descriptor need stay open
            fd, staged.fd = staged.fd, None   # (a file is staged closed, ``TreeWriter.whole``, but for this)
            with naming(staged.path):
                os.close(fd)
        self.items.append(staged)
        self.bytes += staged.size
        if whole and (self.bytes >= WHOLE_BATCH_BYTES or len(self.items) >= WHOLE_BATCH_FILES):
            self.flush()
        elif not whole and (self.bytes >= self.max_bytes or len(self.items) >= self.max_files):
            self.flush()

    def synced_whole(self, tmp) -> bool:
        """Whether one ``syncfs`` makes the files staged in ``tmp`` durable (asked once per temp directory)."""
        held = self._whole.get(id(tmp))
        if held is None:
            held = self._whole[id(tmp)] = (tmp, syncs_whole(tmp.path))
        return held[1]

    def mark_dir(self, path: str) -> None:
        """``path`` is a directory whose entries or mode changed: fsync it in ``sync_dirs``."""
        self.dirty.add(path)

    def flush(self) -> None:
        """Make every staged file durable, then rename each into place (in staging order)."""
        items, self.items, self.bytes = self.items, [], 0
        if not items:
            return
        try:
            for tmp in {id(s.tmp): s.tmp for s in items}.values():
                if self.synced_whole(tmp):
                    with naming(tmp.path):  # a full disk: the error names where the tree was being restored
                        sync_filesystem(tmp.fd)
            for s in items:
                if s.fd is not None:
                    with naming(s.path):  # a full disk: the error names the file being restored
                        os.fsync(s.fd)
                        os.close(s.fd)
                    s.fd = None
            for tmp in {id(s.tmp): s.tmp for s in items if s.link and not self.synced_whole(s.tmp)}.values():
                tmp.sync()  # a symlink's target is in its inode, created there
        except BaseException:
            for s in items:
                s.discard()
            raise
        parents: dict[tuple[int, str], int] = {}   # the live directories renamed into, opened once per flush
        try:
            for i, s in enumerate(items):
                try:
                    if not self._publish(s, parents):
                        s.discard()
                        self.kept.append(s.path)
                        continue
                except UnsafePath as err:   # written nowhere: the restore counts it lost
                    s.discard()
                    self.unsafe.append((s.path, err))
                    continue
                except BaseException:
                    for rest in items[i:]:
                        rest.discard()
                    raise
                self.dirty.add(os.path.dirname(s.path))
        finally:
            for fd in parents.values():
                os.close(fd)

    @staticmethod
    def _publish(s: Staged, parents: dict[tuple[int, str], int]) -> bool:
        """Rename (or install) ``s`` unless its live path changed since the plan; into
        its directory as this flush first reached it from the tree's root
        (``TreeTmp.parent_fd``; a swap before that is refused, ``UnsafePath``), where
        the path is looked at too."""
        if s.install is not None:
            if s.expect is not UNCHECKED and observe(s.path) != s.expect:
                return False
            s.install()
            return True
        key = (id(s.tmp), os.path.dirname(s.path))
        parent = parents.get(key)
        if parent is None:
            parent = parents[key] = s.tmp.parent_fd(s.path)
        if s.expect is not UNCHECKED and observe(os.path.basename(s.path), parent) != s.expect:
            return False
        s.tmp.replace(s.name, s.path, parent)
        return True

    def sync_dirs(self) -> None:
        """fsync each directory that changed, once (deepest first); those on the
        filesystem of a temp directory one ``syncfs`` covers, by one ``syncfs`` of it."""
        whole = {}
        for tmp, ok in self._whole.values():
            if ok and tmp.fd >= 0:
                whole.setdefault(os.fstat(tmp.fd).st_dev, tmp)
        synced = set()
        for path in sorted(self.dirty, key=len, reverse=True):
            try:
                dev = os.stat(path).st_dev if whole else None
            except OSError:
                dev = None
            if dev in whole:
                synced.add(dev)
            else:
                fsync_dir(path)
        for dev in synced:
            tmp = whole[dev]
            with naming(tmp.path):
                sync_filesystem(tmp.fd)
        self.dirty.clear()

    def discard(self) -> None:
        """Drop what is staged and not yet published (after an error)."""
        items, self.items, self.bytes = self.items, [], 0
        for s in items:
            s.discard()

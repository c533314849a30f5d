"""Adopting a checkpoint this disk did not write: a stale or diverged disk, or a rollback.

A hot restart keeps newer local state (requirement 5). Once the store holds checkpoints
this disk never saw, or the operator asks for an older one (``restore --at N
--rollback``), the live trees become that checkpoint instead (design §11, "Lineage"):

1. ``LocalWork`` judges which scanned local paths hold work the checkpoint lacks, and
   ``checkpoint/fork.py`` commits them as a fork first (nothing else is changed when
   that fails);
2. ``Adopt.overrule`` turns restore's "keep the local file" verdicts into writes: a
   newer local file, a valid local database that is not the checkpoint's (moved
   aside, never deleted), and on a rollback a transcript that extends the
   checkpoint's. On a stale disk a transcript where one side is a complete-line prefix
   of the other keeps the longer one (no work is lost either way);
3. ``Adopt.remove_extras`` takes out the local paths the checkpoint does not hold, but
   only those whose signature is still the one the scan recorded (their bytes are in
   the fork or in this disk's last checkpoint); a database goes aside with its
   companions, a directory only when it is empty.
"""

from __future__ import annotations

import os
import stat

import msgspec

from ..errors import CorruptObject, ObjectNotFound, StoreError
from ..local.errors import UnsafePath
from ..os_errors import describe_os_error
from ..format.model import KIND_DIR, KIND_JSONL, KIND_SQLITE, Entry
from ..local.state import FileState, TreeCache
from ..local.under import dir_under
from ..paths import shown
from ..repository.history import ManifestCache
from ..signatures import live_signature, signature
from .aside import move_aside
from .entry import CheckDir, Verdict, decide


def content(entry: Entry | None) -> tuple | None:
    """What an entry's bytes are, whichever packs hold them: equal for equal content."""
    if entry is None:
        return None
    return entry.kind, entry.mode, entry.size, tuple(r.id for r in entry.refs), entry.target


class LocalWork:
    """Which paths of a scan are local work that checkpoint ``onto`` lacks.

    Local work is a file (not a directory) changed or made here: its content is not
    what this disk's last checkpoint ``base`` held. It is not work when ``onto`` holds
    the same bytes, nor, on a stale disk (not ``exact``), when it is a transcript of
    which one side is a complete-line prefix of the other. A file deleted here is work
    when ``onto`` still holds it as ``base`` did."""

    def __init__(self, cache: ManifestCache, dests: dict[str, str], base: int, onto: int, exact: bool):
        self.cache, self.dests, self.base, self.onto, self.exact = cache, dests, base, onto, exact
        self.check = CheckDir(None)

    def __call__(self, trees: dict[str, TreeCache], before: dict[str, TreeCache]) -> list[str]:
        """The local work in ``trees`` (as scanned); ``before``: the local state's trees
        before the scan, whose entries also describe every path still at the signature
        recorded with them (a database restore wrote, whose new snapshot names other
        page ids for the same rows)."""
        work: list[str] = []
        try:
            for name, tree in sorted(trees.items()):
                if name in self.dests:
                    was = before[name].files if name in before else {}
                    work += self._tree(name, self.dests[name], tree.files, was)
        finally:
            self.check.cleanup()
        return work

    def _tree(self, name: str, dest: str, files, was) -> list[str]:
        base, onto = self._entries(self.base, name), self._entries(self.onto, name)
        work = []
        for path, fs in files.items():
            live = fs.entry
            if live.kind == KIND_DIR:
                continue
            old = was.get(path)
            known = old.entry if old is not None and old.sig is not None and old.sig == fs.sig else None
            if self._same(dest, base.get(path), live) or (known is not None and content(known) == content(
                    base.get(path))):
                continue
            if not self._covers(dest, onto.get(path), live) and (known is None or content(known) != content(
                    onto.get(path))):
                work.append(f"{name}/{path}")
        for path, was in base.items():
            if was.kind != KIND_DIR and files.get(path) is None and content(onto.get(path)) == content(was):
                work.append(f"{name}/{path} (deleted here)")
        return work

    def _entries(self, seq: int, name: str) -> dict[str, Entry]:
        """Tree ``name`` of checkpoint ``seq`` by path; empty when it has none or cannot be
        read (every local file then counts as changed: more is kept, never less)."""
        if seq <= 0:
            return {}
        try:
            return {e.path: e for e in self.cache.tree(seq, name)[0]}
        except (CorruptObject, ObjectNotFound, KeyError):
            return {}

    def _same(self, dest: str, stored: Entry | None, live: Entry) -> bool:
        """Whether the live file holds ``stored``'s bytes (by ids, else by reading it)."""
        if stored is None or stored.kind != live.kind or stored.mode != live.mode:
            return False
        if content(stored) == content(live):
            return True
        return live.kind != KIND_SQLITE and self._verdict(dest, stored) == Verdict.SAME

    def _covers(self, dest: str, stored: Entry | None, live: Entry) -> bool:
        if self._same(dest, stored, live):
            return True
        return (not self.exact and stored is not None and stored.kind == live.kind == KIND_JSONL
                and self._verdict(dest, stored) in (Verdict.KEEP_EXTENDS, Verdict.COMPLETE))

    def _verdict(self, dest: str, stored: Entry) -> Verdict | None:
        try:
            return decide(dest, stored, self.check, None, self.cache.repo)
        except (OSError, StoreError, UnsafePath):   # cannot be read (nor its stored copy), or not safely: work
            return None


class Adopt(msgspec.Struct, kw_only=True):
    """How restore treats the live trees when it adopts checkpoint ``onto`` (see the
    module docstring): ``exact`` on a rollback; ``fork``, the fork that keeps the local
    work (None when there was none)."""

    onto: int
    exact: bool
    fork: int | None = None

    def overrule(self, dest: str, entry: Entry, action: Verdict, known: FileState | None) -> Verdict:
        """Restore's verdict for ``entry`` when adopting: a kept local file is replaced, and
        so is a file with the checkpoint's bytes and another mode (the scan's ``known``)."""
        if action == Verdict.KEEP_VALID_DB and _unchanged(dest, entry, known):
            return Verdict.SAME
        if action == Verdict.SAME and entry.kind not in (KIND_DIR, KIND_SQLITE) and known is not None \
                and known.entry.mode != entry.mode:
            return Verdict.REPLACE
        if action in (Verdict.KEEP_NEWER, Verdict.KEEP_VALID_DB) or (self.exact and action == Verdict.KEEP_EXTENDS):
            return Verdict.REPLACE
        return action

    def remove_extras(self, dest: str, known: dict[str, FileState], keep: set[str], aside: str,
                      warn) -> list[str]:
        """Take out of the tree at ``dest`` the paths ``known`` (the local state's view, as
        the scan left it) holds and ``keep`` (the checkpoint's paths) does not; returns
        those taken out. A path changed since the scan, or that cannot be taken out
        safely, is left as it is with a warning (``warn``); a directory that is not
        empty is left quietly."""
        extra = [p for p in known if p not in keep]
        files = sorted(p for p in extra if known[p].entry.kind != KIND_DIR)
        dirs = sorted((p for p in extra if known[p].entry.kind == KIND_DIR), key=lambda p: (-p.count("/"), p))
        removed = []
        for path in files + dirs:
            try:
                if _remove(dest, path, known[path], aside):
                    removed.append(path)
            except (OSError, UnsafePath) as err:
                why = err.reason if isinstance(err, UnsafePath) else describe_os_error(err)
                warn(f"cannot take {shown(path)} out of {dest} ({why}); left it as it is")
        return removed


def _unchanged(dest: str, entry: Entry, known: FileState | None) -> bool:
    """Whether the live database is the scan's, with ``entry``'s content."""
    if known is None or known.sig is None or content(known.entry) != content(entry):
        return False
    try:
        return tuple(known.sig) == live_signature(os.path.join(dest, entry.path))
    except OSError:
        return False


def _remove(dest: str, path: str, known: FileState, aside: str) -> bool:
    """Take ``path`` out of the tree when it is still what the scan saw; see ``remove_extras``."""
    entry = known.entry
    if entry.kind == KIND_SQLITE:
        if known.sig is None or tuple(known.sig) != live_signature(os.path.join(dest, path)):
            raise UnsafePath(path, "it changed after the fork was taken")
        move_aside(dest, entry, aside)
        return True
    parent, _, name = path.rpartition("/")
    with dir_under(dest, parent) as fd:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if entry.kind == KIND_DIR:
            if not stat.S_ISDIR(st.st_mode):
                return False
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                return False   # not empty: something the checkpoint does not know is in it
            return True
        if known.sig is None or tuple(known.sig) != signature(st):
            raise UnsafePath(path, "it changed after the fork was taken")
        os.unlink(name, dir_fd=fd)
        return True

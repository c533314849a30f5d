"""Reading checkpoint history: which manifests exist, and a tree's entries in one."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ..errors import CorruptObject, ObjectNotFound
from ..format.index import load_entries
from ..format.model import BlobRef, Entry, Manifest
from .moment import Moment, before_oldest, checkpoint_named
from .pages_ahead import PageAt, page_at, read_pages_ahead
from .repository import Repository, manifest_key


class ManifestInfo(msgspec.Struct, kw_only=True):
    """One line of ``journal log``, in the words of ``checkpoint`` and ``status``."""

    seq: int
    created: str | None = None
    host: str | None = None
    files: int = 0                      # every entry but directories, in every tree
    size: int = 0                       # bytes of those files
    bytes_uploaded: int = 0             # what its checkpoint uploaded, the manifest included
    objects_uploaded: int = 0
    trees: list[str] = []
    restored: dict[str, str] = {}       # trees published from a fallback or rollback restore, and why
    parent: int | None = None           # the checkpoint its writer built on
    fork: str | None = None             # a fork (off the main line): why it was made, and onto which checkpoint
    expired: str | None = None          # a gc tombstone names it (made then): gc deletes it after --grace
    error: str | None = None


def list_history(repo: Repository, limit: int | None = None) -> list[ManifestInfo]:
    """Checkpoints newest first; a manifest that fails its checks is listed with its error."""
    out: list[ManifestInfo] = []
    if limit == 0:
        return out
    from ..format.tombstone import tombstoned_manifests  # imported here: a restore reads history without them

    sizes = repo.manifest_sizes()
    expired = tombstoned_manifests(repo.store, repo.codec)
    for read in repo.iter_manifests_desc(sorted(sizes)):
        seq, manifest = read.seq, read.manifest
        if manifest is None:
            out.append(ManifestInfo(seq=seq, error=str(read.error), expired=expired.get(manifest_key(seq))))
        else:
            out.append(ManifestInfo(
                seq=seq, created=manifest.created, host=manifest.host,
                files=sum(t.files for t in manifest.trees.values()),
                size=sum(t.bytes for t in manifest.trees.values()),
                bytes_uploaded=manifest.added_bytes + sizes[seq], objects_uploaded=manifest.added_objects,
                trees=sorted(manifest.trees), restored=manifest.restored or {}, parent=manifest.parent,
                fork=(f"{manifest.fork.why} (the live trees became checkpoint {manifest.fork.onto})"
                      if manifest.is_fork else None),
                expired=expired.get(manifest_key(seq))))
        if limit is not None and len(out) >= limit:
            break
    return out


def select_seqs(cache: "ManifestCache", at: Moment | None, seqs: list[int]) -> tuple[list[int], int | None]:
    """Of ``seqs`` (every manifest, ascending), those a restore may use: all, or those
    at or before ``at`` (``repository/moment.py``); and the checkpoint ``at`` names by
    its number (a fork may be named so), else None. ``ConfigError`` when ``at`` names
    no checkpoint the store holds, or a time before the oldest."""
    if at is None:
        return seqs, None
    named = checkpoint_named(at, seqs, cache.is_fork, at.op, at.flag)
    if named is not None:
        return [s for s in seqs if s <= named], at.seq
    keep = []
    for seq in seqs:
        try:
            manifest, _ = cache.manifest(seq)
        except (CorruptObject, ObjectNotFound):
            continue
        if manifest.created_ns <= at.last_ns:
            keep.append(seq)
    if not keep:
        raise before_oldest(at.op, at.flag, at.text, seqs)
    return keep, None


class ManifestCache:
    """Loads manifests and their trees' entries once each."""

    def __init__(self, repo: Repository):
        self.repo = repo
        self._manifests: dict[int, tuple[Manifest, str] | Exception] = {}
        self._trees: dict[tuple[int, str], tuple[list[Entry], dict[str, BlobRef]] | Exception] = {}
        self._bases: dict[tuple[int, str], dict[str, BlobRef]] = {}
        self._ahead: dict[PageAt, tuple[bytes, BlobRef | None]] = {}   # pages read ahead, not yet walked

    def manifest(self, seq: int) -> tuple[Manifest, str]:
        if seq not in self._manifests:
            try:
                self._manifests[seq] = self.repo.load_manifest(seq)
            except (CorruptObject, ObjectNotFound) as err:
                self._manifests[seq] = err
        got = self._manifests[seq]
        if isinstance(got, Exception):
            raise got
        return got

    def is_fork(self, seq: int) -> bool:
        """Whether manifest ``seq`` is a fork (False for one that cannot be read)."""
        try:
            return self.manifest(seq)[0].is_fork
        except (CorruptObject, ObjectNotFound):
            return False

    def manifest_id(self, seq: int) -> str | None:
        """The id of manifest ``seq``, which a writer building on ``seq`` names as its
        parent's (``Manifest.parent_id``); None for no manifest (0) or an unreadable one,
        never the id of another manifest."""
        try:
            return self.manifest(seq)[1] if seq > 0 else None
        except (CorruptObject, ObjectNotFound):
            return None

    def page_bases(self, seq: int, name: str) -> dict[str, BlobRef]:
        """Of the pages of tree ``name`` in manifest ``seq``, those stored as deltas, with
        each one's base: a writer that keeps such a page must never take it for a whole
        page to make a delta of (a delta over a delta is unreadable)."""
        self.tree(seq, name)
        return dict(self._bases.get((seq, name), {}))

    def read_ahead(self, seq: int, names: Iterable[str]) -> None:
        """Read the index pages of trees ``names`` of manifest ``seq`` at once
        (``pages_ahead``), where reads wait on a link (``Store.read_ahead``); ``tree``
        then takes them from there. Nothing is reported here: what failed is read again."""
        if not self.repo.read_ahead:
            return
        try:
            trees = self.manifest(seq)[0].trees
        except (CorruptObject, ObjectNotFound):
            return
        roots = [trees[name].root for name in names if name in trees and trees[name].root is not None]
        self._ahead.update(read_pages_ahead(self.repo.read_page, roots))

    def tree(self, seq: int, name: str) -> tuple[list[Entry], dict[str, BlobRef]]:
        """Entries and pages of tree ``name`` in manifest ``seq``; KeyError if absent."""
        key = (seq, name)
        if key not in self._trees:
            manifest, _ = self.manifest(seq)
            tree = manifest.trees[name]
            bases = self._bases[key] = {}

            def read(ref: BlobRef) -> bytes:
                ahead = self._ahead.pop(page_at(ref), None)
                payload, base = ahead if ahead is not None else self.repo.read_page(ref)
                if base is not None:
                    bases[ref.id] = base
                return payload
            try:
                self._trees[key] = load_entries(tree.root, read, tree)
            except (CorruptObject, ObjectNotFound) as err:
                self._trees[key] = err
        got = self._trees[key]
        if isinstance(got, Exception):
            raise got
        return got

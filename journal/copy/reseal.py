"""A checkpoint re-encoded under the target's keys (``Mode.RESEAL``).

Between stores with different master keys nothing can be copied as it is: the master
key derives every content id, every seal and where index pages are cut (design §22).
So each checkpoint is written again, as a checkpoint would write it into the target:

* every blob an entry names (a file's chunks, a transcript's segments, a database's
  page groups) is read from the source, verified, and encoded again: its id is the
  target's, and it is sealed with the target's key (or written in the clear, to a plain
  target). A chunk or segment stored as a delta stays one, against the same base, which
  the entry names (a chunk's ``bases``, a segment's anchor); a page group delta and a
  page map delta are stored whole (their bases are named by place, which changes);
* each page map is written again with the new places and page ids, full or delta as it
  was, so a snapshot keeps its maps;
* each tree's index is built anew from the entries, with the target's page cuts;
* the manifest keeps the source's sequence, parent, writer, host, pid, times, trees'
  counts, ``restored`` and ``fork``; its ``parent_id`` names the target's manifest of
  the parent (None when the target lacks it), its ``packs`` the packs written for it.

A blob, page map or page group already re-encoded by this run, or by the run that wrote
the target's newest checkpoint (``seed``: that checkpoint is walked beside the
source's), is not read again: an hourly copy reads what changed. A run and its rerun
after a kill encode the same bytes into the same packs (ids, compression and nonces are
functions of the bytes), so a pack uploaded before the kill is found by name and not
sent again (``Sink``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

import msgspec

from ..errors import CorruptObject, ObjectNotFound
from ..format.index import Previous, build_index, decode_page, walk_pages
from ..format.model import KIND_DIR, KIND_JSONL, KIND_SQLITE, BlobRef, Entry, Manifest, Page, TreeRoot, decode
from ..format.objects import (FLAG_ENTRY_BASES, KIND_CHUNK, KIND_DBPAGE, KIND_PAGE, KIND_PAGEMAP, KIND_SEGMENT,
                              decode_record, embedded_members, encode_record, is_delta)
from ..format.pagemap import PageLoc, decode_map, encode_map, group_base
from ..format.segments import DICT_TAIL, anchors
from ..repository.fetch import RawReader, fetch_in_order
from ..repository.pack import PackWriter
from ..repository.repository import RecordCache, Repository, blob_location, encode_manifest
from .sink import Sink

#: Whole page groups of the source kept for the group deltas decoded against them.
GROUP_CACHE = 32 << 20

Place = tuple[str, int]


def place(ref: BlobRef) -> Place:
    """A record's place in its store: its pack and offset."""
    return ref.pack, ref.offset


class Resealed(msgspec.Struct, frozen=True, kw_only=True):
    """One checkpoint written again: its manifest and that manifest's stored bytes."""

    manifest: Manifest
    manifest_id: str
    record: bytes


class _Tree(msgspec.Struct):
    """A tree as last written to the target: its entries by path and its leaf pages by
    first path (``build_index``'s ``previous``)."""

    entries: dict[str, Entry]
    leaves: dict[str, BlobRef]


class Resealer:
    """Writes the source's checkpoints into ``target`` under its codec, through ``sink``."""

    def __init__(self, source: Repository, target: Repository, sink: Sink, spool_dir: str):
        self.source, self.target, self.sink, self.spool_dir = source, target, sink, spool_dir
        self.kept = RecordCache()                   # the source's whole pages and maps
        self.blobs: dict[Place, BlobRef] = {}       # a source chunk or segment -> the target's
        self.maps: dict[Place, BlobRef] = {}        # a source page map -> the target's
        self.groups: dict[Place, tuple[BlobRef, dict[int, str]]] = {}   # ... page group, and its pages' ids
        self.pages: dict[str, BlobRef] = {}         # the target's index pages by id (``build_index``'s known)
        self.ids: dict[int, str] = {}               # the target's manifest ids by sequence
        self.trees: dict[str, _Tree] = {}
        self._leaves: dict[tuple[str, str], tuple[Entry, ...]] = {}   # a source leaf -> its entries, re-encoded
        self._group_payloads: OrderedDict[Place, bytes] = OrderedDict()
        self._group_bytes = 0
        self._fresh: list[tuple[dict, object]] = []   # memo entries of the checkpoint being written

    # -- the target's newest checkpoint, as the last run left it ------------------------

    def seed(self, seq: int) -> None:
        """Learn what the target's checkpoint ``seq`` (written from the source's ``seq``)
        holds: its entries' blobs and maps stand for the source's at the same paths, its
        pages are known. Nothing is learnt from a checkpoint either side cannot read."""
        try:
            mine, (theirs, tid) = self.source.load_manifest(seq)[0], self.target.load_manifest(seq)
            for name, tree in sorted(mine.trees.items()):
                other = theirs.trees.get(name)
                if tree.root is not None and other is not None and other.root is not None:
                    self._seed_tree(name, tree, other)
        except (CorruptObject, ObjectNotFound):
            return
        self.ids[seq] = tid

    def _seed_tree(self, name: str, tree: TreeRoot, other: TreeRoot) -> None:
        entries, leaves = {}, {}
        for ref, page in walk_pages(other.root, lambda r, key: decode_page(self.target.read_page(r)[0], key)):
            self.pages[ref.id] = ref
            if not page.level:
                leaves[page.entries[0].path] = ref
                entries.update((e.path, e) for e in page.entries)
        self.trees[name] = _Tree(entries, leaves)
        for mine in self._source_entries(tree):
            theirs = entries.get(mine.path)
            if theirs is None or theirs.kind != mine.kind or len(theirs.refs) != len(mine.refs):
                continue
            if mine.kind == KIND_SQLITE:
                self._seed_maps(mine, theirs)
                continue
            pairs = list(zip(mine.refs, theirs.refs))
            if len(mine.bases) == len(theirs.bases):
                pairs += [(a, b) for a, b in zip(mine.bases, theirs.bases) if a is not None and b is not None]
            self.blobs.update((place(a), b) for a, b in pairs if a.size == b.size)

    def _seed_maps(self, mine: Entry, theirs: Entry) -> None:
        for a, b in zip(mine.refs, theirs.refs):
            self.maps[place(a)] = b
            _, src_pages = self._read_map(self.source, a)
            _, dst_pages = self._read_map(self.target, b)
            for pgno, loc in src_pages.items():
                got = dst_pages.get(pgno)
                if got is not None and loc.slot == got.slot:
                    ref, ids = self.groups.setdefault(place(loc.rec), (got.rec, {}))
                    if ref == got.rec:
                        ids[loc.slot] = got.id

    # -- one checkpoint ------------------------------------------------------------------

    def checkpoint(self, manifest: Manifest) -> Resealed:
        """Write the blobs, maps and index of ``manifest`` into the target and return its
        manifest, not yet put. ``CorruptObject``/``ObjectNotFound`` for a source object
        that is damaged or missing: then nothing of it is remembered (its packs, if any
        were uploaded, are orphans the target's gc removes)."""
        self._fresh = []
        data = PackWriter(self.sink, self.spool_dir, codec=self.target.codec)
        try:
            leaves: dict[tuple[str, str], tuple[Entry, ...]] = {}
            trees = {name: self._tree(tree, data, leaves) for name, tree in sorted(manifest.trees.items())}
            data.finish()
        except BaseException:
            data.abort()
            self._forget()
            raise
        self._settle(data)
        index = PackWriter(self.sink, self.spool_dir, target=None, codec=self.target.codec)
        try:
            roots = {name: self._index(name, [_resolved(e, data) for e in entries], index)
                     for name, entries in trees.items()}
            index.finish()
        except BaseException:
            index.abort()
            raise
        self._leaves = {key: tuple(_resolved(e, data) for e in entries) for key, entries in leaves.items()}
        for name, (root, used, keys) in roots.items():
            self.pages.update((pid, index.resolve(ref)) for pid, ref in used.items())
            self.trees[name].leaves = {keys[pid][1]: index.resolve(ref) for pid, ref in used.items()
                                       if keys[pid][0] == 0}
        packs = data.packs + index.packs
        out = msgspec.structs.replace(
            manifest, parent_id=self._parent_id(manifest.parent), packs=tuple(packs),
            trees={name: TreeRoot(root=index.resolve(roots[name][0]) if roots[name][0] else None,
                                  files=tree.files, bytes=tree.bytes) for name, tree in manifest.trees.items()},
            added_bytes=data.uploaded_bytes + index.uploaded_bytes, added_objects=len(packs) + 1)
        mid, record = encode_manifest(out, self.target.codec)
        return Resealed(manifest=out, manifest_id=mid, record=record)

    def committed(self, seq: int, manifest_id: str) -> None:
        """The target holds checkpoint ``seq`` now (its id, for a later parent_id)."""
        self.ids[seq] = manifest_id

    def _parent_id(self, parent: int | None) -> str | None:
        if parent is None:
            return None
        if parent not in self.ids:
            try:
                self.ids[parent] = self.target.load_manifest(parent)[1]
            except (CorruptObject, ObjectNotFound):
                return None
        return self.ids[parent]

    def _forget(self) -> None:
        """Drop what the checkpoint that failed had re-encoded: its packs may be missing."""
        for memo, key in self._fresh:
            memo.pop(key, None)
        self._fresh = []

    def _settle(self, data: PackWriter) -> None:
        """The packs are uploaded: name them in what this checkpoint re-encoded."""
        for memo, key in self._fresh:
            value = memo[key]
            memo[key] = (data.resolve(value[0]), value[1]) if isinstance(value, tuple) else data.resolve(value)
        self._fresh = []

    def _remember(self, memo: dict, key, value) -> None:
        memo[key] = value
        self._fresh.append((memo, key))

    # -- trees ---------------------------------------------------------------------------

    def _tree(self, tree: TreeRoot, data: PackWriter, leaves: dict) -> list[Entry]:
        """Every entry of a source tree, its blobs and maps re-encoded (pending refs)."""
        out: list[Entry] = []
        for key, entries in self._source_leaves(tree):
            done = self._leaves.get(key)
            if done is None:
                done = tuple(self._entry(e, data) for e in entries)
            leaves[key] = done
            out.extend(done)
        return out

    def _source_entries(self, tree: TreeRoot) -> Iterator[Entry]:
        for _key, entries in self._source_leaves(tree):
            yield from entries

    def _source_leaves(self, tree: TreeRoot) -> Iterator[tuple[tuple[str, str], tuple[Entry, ...]]]:
        """The source tree's leaf pages, in path order, each verified and checked against
        its parent; the files and bytes must be the manifest's."""
        if tree.root is None:
            if tree.files or tree.bytes:
                raise CorruptObject("tree root", f"an empty tree, its manifest says {tree.files:,} files")
            return
        files = size = 0
        load = lambda ref, key: decode_page(self.source.read_page(ref, self.kept)[0], key)  # noqa: E731
        for ref, page in walk_pages(tree.root, load):
            if page.level:
                continue
            counted = [e for e in page.entries if e.kind != KIND_DIR]
            files, size = files + len(counted), size + sum(e.size for e in counted)
            yield (ref.pack, ref.id), page.entries
        if (files, size) != (tree.files, tree.bytes):
            raise CorruptObject(f"tree root {tree.root.id[:12]}", f"the tree holds {files:,} files of {size:,} "
                                                                  f"bytes, its manifest says {tree.files:,} of "
                                                                  f"{tree.bytes:,}")

    def _index(self, name: str, entries: list[Entry], index: PackWriter):
        """Build tree ``name``'s index in the target from its entries (resolved refs)."""
        last = self.trees.get(name)
        previous = None
        now = {e.path: e for e in entries}
        if last is not None:
            differ = [p for p, e in now.items() if (was := last.entries.get(p)) is not e and was != e]
            differ += [p for p in last.entries if p not in now]
            previous = Previous(last.leaves, sorted(differ))
        keys: dict[str, tuple[int, str]] = {}

        def add_page(payload: bytes, _key) -> BlobRef:
            marks = FLAG_ENTRY_BASES if any(e.bases for e in decode(payload, Page).entries) else 0
            pid, record = encode_record(KIND_PAGE, payload, marks=marks, codec=self.target.codec)
            return index.add_record(pid, record, len(payload))

        root, used = build_index(entries, self.pages, add_page, keys, self.target.codec, previous)
        self.trees[name] = _Tree(now, {})
        return root, used, keys

    # -- entries -------------------------------------------------------------------------

    def _entry(self, entry: Entry, data: PackWriter) -> Entry:
        if not entry.refs:
            return entry
        if entry.kind == KIND_SQLITE:
            return msgspec.structs.replace(entry, refs=self._snapshot(entry, data))
        bases = tuple(None if b is None else self._whole_chunk(b, data) for b in entry.bases)
        return msgspec.structs.replace(entry, refs=self._blobs(entry, data), bases=bases)

    def _whole_chunk(self, ref: BlobRef, data: PackWriter) -> BlobRef:
        """A delta chunk's base (a whole chunk), re-encoded once."""
        got = self.blobs.get(place(ref))
        if got is None:
            payload = self.source.read_whole(ref, KIND_CHUNK)
            got = data.add(KIND_CHUNK, payload)
            self._remember(self.blobs, place(ref), got)
        return got

    def _blobs(self, entry: Entry, data: PackWriter) -> tuple[BlobRef, ...]:
        """A file's chunks or a transcript's segments, each re-encoded once: a delta
        against the same base (a chunk's, named by the entry; a segment's anchor)."""
        refs = [self.blobs.get(place(r)) for r in entry.refs]
        todo = [i for i, r in enumerate(refs) if r is None]
        if not todo:
            return tuple(refs)
        kind = KIND_SEGMENT if entry.kind == KIND_JSONL else KIND_CHUNK
        anchor = anchors([r.size for r in entry.refs]) if kind == KIND_SEGMENT else [None] * len(refs)
        tails: dict[int, bytes] = {}
        for i, record in zip(todo, fetch_in_order([entry.refs[i] for i in todo], RawReader(self.source))):
            ref = entry.refs[i]
            base = None
            if is_delta(record):
                if entry.bases and entry.bases[i] is not None:
                    base = self.source.read_whole(entry.bases[i], KIND_CHUNK)
                elif anchor[i] is not None:
                    a = anchor[i]
                    base = tails.get(a) or self.source.read_blob(entry.refs[a], KIND_SEGMENT)[-DICT_TAIL:]
            payload = decode_record(record, key=blob_location(ref), expect_id=ref.id, expect_kind=kind,
                                    expect_size=ref.size, base=base, codec=self.source.codec)
            if kind == KIND_SEGMENT and anchor[i] is None:
                tails[i] = payload[-DICT_TAIL:]
            refs[i] = data.add(kind, payload, base=base)
            self._remember(self.blobs, place(ref), refs[i])
        return tuple(refs)

    # -- database snapshots --------------------------------------------------------------

    def _snapshot(self, entry: Entry, data: PackWriter) -> tuple[BlobRef, ...]:
        """A snapshot's page maps, each written again (full or delta, as it was) over its
        page groups re-encoded whole."""
        out = [self.maps.get(place(r)) for r in entry.refs]
        if all(out):
            return tuple(out)
        first, full = self._read_map(self.source, entry.refs[0])
        if not first.full:
            raise CorruptObject(f"pagemap {entry.refs[0].id[:12]}", "first map of a snapshot is not a full map")
        for i, ref in enumerate(entry.refs):
            if out[i] is not None:
                continue
            pm, pages = (first, full) if i == 0 else self._read_map(self.source, ref)
            if i and (pm.full or pm.page_size != first.page_size):
                raise CorruptObject(f"pagemap {ref.id[:12]}", "a later map of a snapshot is not a delta over the first")
            moved = {pgno: self._page(pgno, loc, full, pm.page_size, data) for pgno, loc in pages.items()}
            payload = encode_map(pm.full, pm.page_size, pm.page_count, moved, data.locate)
            out[i] = data.add(KIND_PAGEMAP, payload, roll=False)  # it may name its pack's groups as its own
            self._remember(self.maps, place(ref), out[i])
        return tuple(out)

    def _read_map(self, repo: Repository, ref: BlobRef):
        payload = repo.read_based(ref, KIND_PAGEMAP, self.kept if repo is self.source else None)[0]
        return decode_map(payload, ref.pack, f"pagemap {ref.id[:12]}")

    def _page(self, pgno: int, loc: PageLoc, full: dict[int, PageLoc], size: int, data: PackWriter) -> PageLoc:
        """Where page ``pgno`` lives in the target: its group re-encoded whole (once), and
        the page's id as the target names it."""
        got = self.groups.get(place(loc.rec))
        if got is None or loc.slot not in got[1]:
            payload = self._group_payload(pgno, loc, full, size)
            ids = {s: self.target.codec.id(payload[s * size:(s + 1) * size]) for s in range(len(payload) // size)}
            if got is None:
                got = (data.add(KIND_DBPAGE, payload), ids)
                self._remember(self.groups, place(loc.rec), got)
            else:
                got[1].update(ids)
        return PageLoc(got[1][loc.slot], got[0], loc.slot)

    def _group_payload(self, pgno: int, loc: PageLoc, full: dict[int, PageLoc], size: int) -> bytes:
        """A source page group's pages, verified: a group delta decoded against the full
        map's pages of its members (a version 2 map's one-page delta: the full map's
        page of its own number)."""
        key = place(loc.rec)
        cached = self._group_payloads.get(key)
        if cached is not None:
            self._group_payloads.move_to_end(key)
            return cached
        where = blob_location(loc.rec)
        record = self.source.read_record(loc.rec)
        base = None
        if loc.delta:
            members = [pgno] if loc.legacy else embedded_members(record, key=where) or []
            base = group_base(members, full, lambda m: self._full_page(full[m], size))
            if not base:
                raise CorruptObject(where, "a group delta none of whose members has a base page")
        payload = decode_record(record, key=where, expect_id=loc.rec.id, expect_kind=KIND_DBPAGE, base=base,
                                codec=self.source.codec)
        if len(payload) % size or len(payload) < (loc.slot + 1) * size:
            raise CorruptObject(where, "record is shorter than the slots the map names")
        if not loc.delta:
            self._keep_group(key, payload)
        return payload

    def _full_page(self, loc: PageLoc, size: int) -> bytes:
        """One page of a snapshot's full map (a group delta's base), its group read once."""
        key = place(loc.rec)
        payload = self._group_payloads.get(key)
        if payload is None:
            payload = self.source.read_whole(loc.rec, KIND_DBPAGE)
            self._keep_group(key, payload)
        return payload[loc.slot * size:(loc.slot + 1) * size]

    def _keep_group(self, key: Place, payload: bytes) -> None:
        self._group_payloads[key] = payload
        self._group_bytes += len(payload)
        while self._group_bytes > GROUP_CACHE and len(self._group_payloads) > 1:
            _, old = self._group_payloads.popitem(last=False)
            self._group_bytes -= len(old)


def _resolved(entry: Entry, data: PackWriter) -> Entry:
    """``entry`` naming its blobs' packs, now that they are uploaded."""
    if not entry.refs:
        return entry
    refs = tuple(data.resolve(r) for r in entry.refs)
    bases = tuple(None if b is None else data.resolve(b) for b in entry.bases)
    if refs == entry.refs and bases == entry.bases:
        return entry
    return msgspec.structs.replace(entry, refs=refs, bases=bases)

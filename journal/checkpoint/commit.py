"""Publishing one checkpoint (design §12, steps 5-8): the changed trees' index pages,
the packs, then the manifest, put-if-absent, as the commit point; and the put of a
pending manifest a crash or a fork interrupted."""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Iterable

import msgspec

from ..errors import JournalError, KeyExists
from ..repository.errors import ManifestConflict
from ..format.index import Built, Previous, Update, build_index, decode_page, update_index
from ..format.model import FORK_MANIFEST_VERSION, BlobRef, Fork, Manifest, TreeRoot
from ..format.objects import KIND_PAGE
from ..local.files import Files
from ..local.state import FileState, LocalState, TreeCache, save_state
from ..paths import PAGES_DIR, SPOOL_DIR
from ..repository.blob_cache import BlobCache
from ..repository.lineage import describe_writer, next_free
from ..repository.pack import PackWriter
from ..repository.repository import Repository, encode_manifest, manifest_key, utc_now
from ..store.base import Staged
from .page_delta import IndexWriter, keep_pages
from .recheck import recheck_dir, recheck_kept, touch_kept

#: An entry's path, the key ``commit_manifest`` sorts a tree's entries by.
_PATH = operator.attrgetter("path")


class Committed(msgspec.Struct, frozen=True, kw_only=True):
    """What ``commit_manifest`` published."""

    seq: int
    manifest_id: str
    blobs: int      # blobs written to packs (data and index)
    objects: int    # store objects written: the packs and the manifest
    bytes: int      # their bytes


def commit_manifest(state_dir: str, repo: Repository, state: LocalState, *, trees: dict[str, TreeCache],
                    changed: list[str], data: PackWriter, captured: dict[str, list[FileState]],
                    restored: dict[str, str], seq: int, fork: Fork | None = None) -> Committed:
    """Publish the next manifest and advance ``state`` to it.

    ``trees`` are the trees as they are now; each tree in ``changed`` gets a new index.
    ``data`` holds the packs of the paths ``captured`` this time, by tree (closed, maybe
    still uploading). ``restored`` names the trees whose version is not the newest
    checkpoint's, and why: the manifest says so once. The manifest goes at ``seq``, or
    the first sequence above it that no fork holds. The state is saved twice: with the
    manifest pending, then committed.

    A ``fork`` is off the main line: it goes at the first free sequence from ``seq``,
    and the state takes only its trees (``state.seq`` stays this disk's last checkpoint).
    A kill before its put leaves orphans; after it, a fork the next run may make again."""
    captured = _resolved(trees, captured, data)
    # One index pack, never rolled: inner pages name same-pack children relatively.
    index = PackWriter(repo.store, os.path.join(state_dir, SPOOL_DIR), target=None, codec=repo.codec)
    pages = BlobCache(state_dir, repo, PAGES_DIR, KIND_PAGE)
    writer = IndexWriter(index, pages)
    built = {}
    for name in changed:
        cache, keys = trees[name], {}
        files, add = cache.files, writer.adder(cache)
        update = _update_of(state.trees.get(name), files, captured.get(name, ()))
        done = _updated_index(update, repo, pages, cache, add, keys) if update else None
        if done is None:
            keys = {}
            entries = sorted([fs.entry for fs in files.values()], key=_PATH)
            done = build_index(entries, cache.pages, add, keys, repo.codec, _previous_index(state.trees.get(name), files))
        built[name] = (done, keys)
    index.close()  # its upload starts beside the data packs': every page reference resolves from here
    for name, (done, keys) in built.items():
        cache = trees[name]
        writer.settle(cache, done.used, keys)
        cache.root = index.resolve(done.root) if done.root else None
        cache.pages = {pid: index.resolve(ref) for pid, ref in done.used.items()}
    manifest = Manifest(
        version=FORK_MANIFEST_VERSION if fork is not None else 1, fork=fork or msgspec.UNSET,
        seq=seq, parent=state.seq or None, parent_id=state.manifest_id, created=utc_now(),
        created_ns=time.time_ns(), host=os.uname().nodename, pid=os.getpid(), writer=state.writer,
        trees={n: tree_root(c) for n, c in sorted(trees.items())},
        packs=tuple(data.packs + index.packs),
        added_bytes=data.closed_bytes + index.closed_bytes,   # as if every pack were new: see _as_uploaded
        added_objects=len(data.packs) + len(index.packs) + 1,
        restored=(restored if fork is None else None) or msgspec.UNSET)
    keep = recheck_dir(state_dir)
    if fork is not None:
        _finish_uploads(index, data)
        kept = data.keep_existing(keep) + index.keep_existing(keep)
        manifest, mid, record = _put_fork(repo, _as_uploaded(manifest, index, data))
        state.trees = trees
        save_state(state_dir, state)
    else:
        manifest, mid, record, staged = _stage_while_uploading(repo, manifest, index, data)
        try:
            state.pending_parent = state.seq
            state.trees, state.seq, state.manifest_id = trees, seq, mid
            state.pending, state.pending_seq = record, seq
            # The spool copies of packs found already stored go to recheck/ before anything
            # names them: a kill anywhere from here on leaves them for the next checkpoint's
            # recheck (a copy whose manifest never commits is only checked, and forgotten).
            kept = data.keep_existing(keep) + index.keep_existing(keep)
            save_state(state_dir, state)
            manifest, mid, record, _ = put_pending(state_dir, repo, state, manifest, staged)
        finally:
            if staged is not None:
                staged.discard()
        state.pending = state.pending_seq = None
        mark_said(state, restored)   # said once, by this manifest: kept until it is committed
        save_state(state_dir, state, trees_as_saved=not restored)  # else only the pending manifest changed
    touch_kept(kept)  # the commit time: when their recheck window starts
    recheck_kept(repo.store, keep)
    pages.prune(keep_pages(trees))
    return Committed(seq=manifest.seq, manifest_id=mid, blobs=data.blobs + index.blobs,
                      objects=manifest.added_objects, bytes=manifest.added_bytes + len(record))


def _stage_while_uploading(repo: Repository, manifest: Manifest, index: PackWriter,
                           data: PackWriter) -> tuple[Manifest, str, bytes, Staged | None]:
    """Wait for the packs ``manifest`` names to be stored, its record staged meanwhile
    (``Store.stage``: on hf-mount the manifest uploads beside the packs, and only its
    rename, the commit point, waits for them). Returns the manifest as committed next,
    its id and record, and the staged record (None when a pack was found already
    stored: the manifest then says fewer bytes uploaded and is made again)."""
    mid, record = encode_manifest(manifest, repo.codec)
    try:
        staged = repo.stage_manifest(record, manifest.seq)
    except BaseException:
        index.abort()
        raise
    try:
        _finish_uploads(index, data)
    except BaseException:
        staged.discard()
        raise
    uploaded = _as_uploaded(manifest, index, data)
    if uploaded == manifest:
        return manifest, mid, record, staged
    staged.discard()
    mid, record = encode_manifest(uploaded, repo.codec)
    return uploaded, mid, record, None


def _finish_uploads(index: PackWriter, data: PackWriter) -> None:
    """Wait for every pack upload of the checkpoint; a failure stops the index pack's
    too (the caller aborts the data pack)."""
    try:
        index.finish()
        data.finish()
    except BaseException:
        index.abort()
        raise


def _as_uploaded(manifest: Manifest, index: PackWriter, data: PackWriter) -> Manifest:
    """``manifest`` saying what its checkpoint uploaded: a pack found already stored
    (its put answered ``KeyExists``) is not counted."""
    return msgspec.structs.replace(manifest, added_bytes=data.uploaded_bytes + index.uploaded_bytes,
                                   added_objects=data.uploaded_objects + index.uploaded_objects + 1)


def _resolved(trees: dict[str, TreeCache], captured: dict[str, list[FileState]],
              data: PackWriter) -> dict[str, list[FileState]]:
    """``captured`` with each placeholder pack its entries name replaced by the pack's
    id, now that ``data`` is closed. A ``FileState`` is never changed in place: each
    one that changes is a new object, put in its tree's paths in place of the old.
    ``captured`` itself takes the new lists (and is returned): nothing then holds the
    old objects, which a first checkpoint of 200,000 files would otherwise keep (50 MB)
    until it ends."""
    for name, read in list(captured.items()):
        now: list[FileState] = []
        swapped: dict[str, FileState] = {}
        files = trees[name].files
        for fs in read:
            refs = tuple(data.resolve(r) for r in fs.entry.refs)
            if refs != fs.entry.refs:
                was, fs = fs, msgspec.structs.replace(fs, entry=msgspec.structs.replace(fs.entry, refs=refs))
                if files.get(fs.entry.path) is was:
                    swapped[fs.entry.path] = fs
            now.append(fs)
        if swapped:
            trees[name].files = files.changed(swapped)
        captured[name] = now
    return captured


def mark_said(state: LocalState, restored) -> None:
    """Once a manifest naming them in ``restored`` is committed, those trees' notes are
    said: the next manifest does not repeat them, and a hot restore writes the newest."""
    for name in restored:
        if name in state.trees:
            state.trees[name].restored = state.trees[name].restored_seq = None


def put_pending(state_dir: str, repo: Repository, state: LocalState, manifest: Manifest,
                staged: Staged | None = None) -> tuple[Manifest, str, bytes, bool]:
    """Put the pending manifest ``state`` holds (``manifest``, encoded) put-if-absent: the
    commit point (``staged``: its record staged already, published by a rename). Its
    own bytes already there count as done (a retried put whose first attempt landed); a
    fork there is passed over, the manifest renumbered to the next free sequence (saved
    as pending first); another writer's manifest is ``ManifestConflict``. Returns what
    was committed, and whether this call put it."""
    cache = None
    record = state.pending
    while True:
        try:
            repo.put_manifest(record, manifest.seq, staged)
            put = True
            break
        except KeyExists:
            staged = None   # staged for the sequence taken: the caller discards it
            if repo.store.get(manifest_key(manifest.seq)) == record:
                put = False
                break
            if cache is None:
                from ..repository.history import ManifestCache  # only once the put found a manifest there

                cache = ManifestCache(repo)
            if not cache.is_fork(manifest.seq):
                raise ManifestConflict(manifest.seq, describe_writer(repo, manifest.seq)) from None
        manifest = msgspec.structs.replace(manifest, seq=next_free(repo, manifest.seq, cache))
        mid, record = encode_manifest(manifest, repo.codec)
        state.seq, state.manifest_id, state.pending, state.pending_seq = manifest.seq, mid, record, manifest.seq
        save_state(state_dir, state)
    return manifest, state.manifest_id, record, put


def _put_fork(repo: Repository, manifest: Manifest) -> tuple[Manifest, str, bytes]:
    """Put a fork's manifest at the first sequence from its own that nothing holds."""
    while True:
        mid, record = encode_manifest(manifest, repo.codec)
        try:
            repo.put_manifest(record, manifest.seq)
            return manifest, mid, record
        except KeyExists:
            manifest = msgspec.structs.replace(manifest, seq=manifest.seq + 1)


def _update_of(old: TreeCache | None, files: Files, captured: Iterable[FileState]) -> Update | None:
    """The tree's last index and what changed since, for ``update_index``; None without
    a last index (a first checkpoint, a re-upload).

    Found without a pass over every path: a path the scan did not read holds the very
    ``FileState`` it held, so the paths whose entry differs are among those read this
    time (``captured``) and those gone (looked for only in directories whose group changed)."""
    if old is None or old.root is None or not old.files:
        return None
    held = old.files
    differ = [path for fs in captured if files.get(path := fs.entry.path) is fs
              and ((was := held.get(path)) is None or was.entry != fs.entry)]
    differ += files.gone_from(held)
    differ.sort()
    return Update(old.root, differ, lambda path: fs.entry if (fs := files.get(path)) is not None else None)


def _updated_index(update: Update, repo: Repository, pages: BlobCache, cache: TreeCache, add, keys: dict) -> Built | None:
    """``update_index`` of one tree, its last index's pages read from the local copies
    (``pages/``) or else the store (and kept); None when it cannot answer or a page of
    that index cannot be read (a full build needs none of them)."""
    def load(ref: BlobRef, where: str):
        payload = pages.cached(ref.id)
        if payload is None:
            payload = repo.read_blob(ref, KIND_PAGE)
            pages.remember(ref.id, payload)
        return decode_page(payload, where)

    try:
        return update_index(update, load, cache.pages, add, keys, repo.codec)
    except JournalError:  # a damaged or missing page, a full disk: built whole instead
        return None


def _previous_index(old: TreeCache | None, files: dict[str, FileState]) -> Previous | None:
    """The tree's last index as ``build_index`` takes its unchanged leaves back: its
    leaf pages by first path (``page_keys``, which ``settle`` recorded when that index
    was built from ``old.files``), and the paths whose entry is not the one it holds (a
    ``FileState`` the scan reused keeps its very ``Entry``; entries are frozen) or that
    are gone since."""
    if old is None or not old.page_keys:
        return None
    leaves = {first: old.pages[pid] for pid, (level, first) in old.page_keys.items()
              if level == 0 and pid in old.pages}
    held = old.files
    get = held.get   # a path the scan reused holds the very same FileState: one identity check
    differ = [p for p, fs in files.items() if (was := get(p)) is not fs and (was is None or was.entry is not fs.entry)]
    differ += [p for p in held if p not in files]
    return Previous(leaves, sorted(differ))


def tree_root(cache: TreeCache) -> TreeRoot:
    """The manifest's counts of a tree: its files (no directory) and their bytes, each
    directory's group's totals added up."""
    return TreeRoot(root=cache.root, files=cache.files.nfiles, bytes=cache.files.nbytes)

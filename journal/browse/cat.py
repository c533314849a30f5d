"""``journal cat``: one file's bytes exactly as a checkpoint holds them, streamed.

Reads the manifest, the index pages on the path to the one entry, and that entry's
blobs: only the packs holding that file. A file or transcript is written blob by
blob, each verified before its bytes go out, so memory stays bounded by the fetch
window (``repository/fetch.py``) whatever the file's size. A database is rebuilt from
its snapshot into a temp file by restore's own rebuild (``sqlite/rebuild.py``: every
record verified, ``quick_check`` passed), then copied out.

Damage falls back as restore's does: a checkpoint whose manifest or index pages are
damaged is passed over for an older one (``view.answer``); a copy whose blobs are
damaged or missing is replaced by the newest older copy of the path. Since bytes
already went out, a transcript or file continues from an older copy only if that copy
begins with exactly the blobs already written (an append-only transcript's older copy
does), so the output is always one checkpointed version; otherwise the error says
the output is incomplete.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

import msgspec

from .errors import BadBrowsePath, NoGoodCopy
from ..format.model import KIND_DIR, KIND_FILE, KIND_JSONL, KIND_SQLITE, KIND_SYMLINK, BlobRef, Entry
from ..repository.segments import read_blobs
from .ls import lookup
from .view import DAMAGE, View
from .where import Where, shown_path

#: Bytes copied at a time from a rebuilt database.
COPY_BLOCK = 1 << 20


class CatResult(msgspec.Struct, kw_only=True):
    path: str
    seq: int                        # the checkpoint whose copy was written
    kind: str
    bytes: int = 0
    skipped: list[str] = []         # newer checkpoints passed over (damaged manifests or index pages)
    fallbacks: list[str] = []       # copies passed over (damaged or missing blobs), and why


def cat(view: View, where: Where, out: BinaryIO, at: str | None = None) -> CatResult:
    """Write the file at ``where`` in the newest checkpoint at or before ``at`` to ``out``."""
    if where.tree is None or not where.path:
        raise BadBrowsePath(view.op, str(where), "names a tree, not a file; name a file as TREE/PATH "
                                                 "(`journal ls` lists them)")
    tree, path = where
    seq, entry = view.answer(at, tree, lambda _seq, root: lookup(view, root, [path]).get(path))
    if entry is None:
        raise BadBrowsePath(view.op, str(where), f"not in checkpoint {seq}; `journal ls "
                                                 f"{shown_path(tree, path.rpartition('/')[0])}` lists what is there")
    if entry.kind == KIND_DIR:
        raise BadBrowsePath(view.op, str(where), f"a directory in checkpoint {seq}, not a file; `journal ls "
                                                 f"{where}` lists it")
    if entry.kind == KIND_SYMLINK:
        raise BadBrowsePath(view.op, str(where), f"a symlink to {entry.target!r} in checkpoint {seq}, not a file; "
                                                 "cat follows no link: name the file it points at")
    result = CatResult(path=str(where), seq=seq, kind=entry.kind, skipped=view.skipped)
    older = _older_copies(view, seq, tree, path, entry)
    if entry.kind == KIND_SQLITE:
        _write_db(view, result, entry, older, out)
    else:
        _write_blobs(view, result, entry, older, out)
    return result


def _older_copies(view: View, seq: int, tree: str, path: str, entry: Entry) -> Iterator[tuple[int, Entry]]:
    """Older copies of ``path`` with other blobs than any before them, newest first (read
    only when a newer copy fails). A checkpoint that cannot be read is passed over."""
    data = (KIND_SQLITE,) if entry.kind == KIND_SQLITE else (KIND_FILE, KIND_JSONL)
    seen: set[tuple[BlobRef, ...]] = {entry.refs}
    for old in reversed([s for s in view.seqs if s < seq]):
        try:
            tree_root = view.manifest(old).trees.get(tree)
            got = tree_root and lookup(view, tree_root.root, [path]).get(path)
        except DAMAGE:
            continue
        if got and got.kind in data and got.refs not in seen:
            seen.add(got.refs)
            yield old, got


def _damaged(view: View, result: CatResult, seq: int, err: Exception) -> str:
    note = f"the copy in checkpoint {seq} is damaged ({err})"
    view.reporter.warn(f"{view.op}: {result.path}: {note}")
    return note


def _write_blobs(view: View, result: CatResult, entry: Entry, older, out: BinaryIO) -> None:
    """Write ``entry``'s blobs; on damage, go on from an older copy that begins with the
    blobs already written (any older copy, before the first)."""
    seq, done, first = result.seq, 0, None
    while True:
        try:
            for payload in read_blobs(entry, view.repo, start=done):
                out.write(payload)
                done += 1
                result.bytes += len(payload)
            out.flush()
            return
        except DAMAGE as err:
            note = _damaged(view, result, seq, err)
            first = first or note
        written = [r.id for r in entry.refs[:done]]
        for seq, cand in older:
            if [r.id for r in cand.refs[:done]] == written:
                break
        else:
            detail = first if result.bytes else f"{first}; no older copy is sound"
            raise NoGoodCopy(view.op, result.path, detail, written=result.bytes)
        result.fallbacks.append(f"{note}; written from checkpoint {seq}")
        result.seq, result.kind, entry = seq, cand.kind, cand


def _write_db(view: View, result: CatResult, entry: Entry, older, out: BinaryIO) -> None:
    """Rebuild the snapshot (an older copy's, if its own is damaged) in a temp file,
    checked, then copy it out."""
    from ..sqlite.rebuild import rebuild_db
    from ..sqlite.snapshot import remove_staging

    seq, first = result.seq, None
    with tempfile.TemporaryDirectory(prefix="journal-cat-") as tmp:
        db = os.path.join(tmp, "snapshot.db")
        while True:
            try:
                rebuild_db(entry, view.repo, db)
                break
            except DAMAGE as err:
                remove_staging(db)
                note = _damaged(view, result, seq, err)
                first = first or note
            seq, entry = next(older, (None, None))
            if entry is None:
                raise NoGoodCopy(view.op, result.path, f"{first}; no older copy is sound")
            result.fallbacks.append(f"{note}; written from checkpoint {seq}")
            result.seq = seq
        with open(db, "rb") as fh:
            while block := fh.read(COPY_BLOCK):
                out.write(block)
                result.bytes += len(block)
        out.flush()

"""The SQLite adapter: live database -> snapshot entry, and snapshot entry -> database file.

Checkpoint: snapshot (``sqlite_snapshot``), cut the validated copy into pages,
upload only pages whose id the previous snapshot lacks, and describe the snapshot
with a full page map or a cumulative delta over the previous full map.

Restore: rebuild the file from its verified pages into a temp file, run
``quick_check``, remove stale ``-wal``/``-shm``/``-journal`` companions, rename.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
from collections.abc import Callable

from .atomic import fsync_dir
from .errors import CorruptObject
from .fetch import fetch_in_order
from .localstate import FileState
from .model import KIND_SQLITE, BlobRef, Entry
from .objects import KIND_DBPAGE, KIND_PAGEMAP, blob_id
from .pack import PackWriter
from .pagemap import DELTA_MIN, DELTA_SHARE, encode_map, snapshot_pages
from .presets import SQLITE_COMPANIONS
from .sqlite_snapshot import live_signature, page_size_of, quick_check, remove_staging, snapshot_db

ReadBlob = Callable[[BlobRef], bytes]


def capture_sqlite(full_path: str, rel: str, prev: FileState | None, staging_dir: str,
                   writer: PackWriter, maps) -> FileState:
    """Snapshot one live database; raises SnapshotFailed and then publishes nothing.

    ``maps`` reads page maps by ref (``maps.read``) and keeps new ones (``maps.remember``).
    """
    sig = live_signature(full_path)
    mode = stat_mod.S_IMODE(os.stat(full_path).st_mode)
    staging = snapshot_db(full_path, staging_dir)
    try:
        page_size = page_size_of(staging)
        prev_base = None
        known: dict[str, BlobRef] = {}
        if prev is not None and prev.entry.kind == KIND_SQLITE:
            prev_size, prev_pages, prev_base = snapshot_pages(prev.entry.refs, maps.read)
            if prev_size != page_size:
                prev_base = None
            known = {r.id: r for r in prev_pages}
        pages = _pages(staging, page_size, known, writer)
        refs = _maps(page_size, pages, prev, prev_base, writer, maps)
        size = os.path.getsize(staging)
    finally:
        remove_staging(staging)
    st = os.stat(full_path)
    return FileState(sig, Entry(path=rel, kind=KIND_SQLITE, mode=mode, mtime_ns=st.st_mtime_ns,
                                size=size, refs=refs))


def _pages(staging: str, page_size: int, known: dict[str, BlobRef], writer: PackWriter) -> list[BlobRef]:
    pages = []
    with open(staging, "rb") as fh:
        while page := fh.read(page_size):
            pid = hashlib.sha256(page).hexdigest()
            ref = known.get(pid)
            if ref is None:
                ref = writer.add(KIND_DBPAGE, page)
                known[pid] = ref
            pages.append(ref)
    return pages


def _maps(page_size: int, pages: list[BlobRef], prev: FileState | None, prev_base: dict[int, BlobRef] | None,
          writer: PackWriter, maps) -> tuple[BlobRef, ...]:
    count = len(pages)
    if prev_base is not None:
        delta = {i: p for i, p in enumerate(pages) if i not in prev_base or prev_base[i].id != p.id}
        if len(delta) <= max(DELTA_MIN, count // DELTA_SHARE):
            base_ref = prev.entry.refs[0]
            if not delta and len(prev_base) == count:
                return (base_ref,)
            return (base_ref, _put_map(False, page_size, count, delta, prev, writer, maps))
    return (_put_map(True, page_size, count, dict(enumerate(pages)), prev, writer, maps),)


def _put_map(full: bool, page_size: int, count: int, pages: dict[int, BlobRef], prev: FileState | None,
             writer: PackWriter, maps) -> BlobRef:
    payload = encode_map(full, page_size, count, pages, writer.locate)
    mid = blob_id(payload)
    for ref in (prev.entry.refs if prev is not None and prev.entry.kind == KIND_SQLITE else ()):
        if ref.id == mid:
            return ref
    maps.remember(mid, payload)
    # The map names pages of the open pack as "same pack": it must land in that pack.
    return writer.add(KIND_PAGEMAP, payload, roll=False)


def rebuild_db(entry: Entry, reader, tmp_path: str) -> None:
    """Write the snapshot to ``tmp_path`` from verified pages (``reader``: a Repository)
    and quick_check it. Raises CorruptObject when a page or map is bad or the result
    fails quick_check."""
    _, pages, _ = snapshot_pages(entry.refs, reader.read_blob)
    with open(tmp_path, "wb", buffering=1 << 20) as fh:
        os.fchmod(fh.fileno(), entry.mode & 0o7777 or 0o600)
        for page in fetch_in_order(pages, reader):
            fh.write(page)
        fh.flush()
        os.fsync(fh.fileno())
    problem = quick_check(tmp_path)
    if problem:
        raise CorruptObject(f"snapshot of {entry.path}", f"rebuilt database fails quick_check: {problem}")


def install_db(tmp_path: str, full_path: str, entry: Entry) -> None:
    """Remove stale companions, then rename the rebuilt database into place."""
    for suffix in SQLITE_COMPANIONS:
        try:
            os.unlink(full_path + suffix)
        except FileNotFoundError:
            pass
    os.chmod(tmp_path, entry.mode & 0o7777)
    os.utime(tmp_path, ns=(entry.mtime_ns, entry.mtime_ns))
    os.replace(tmp_path, full_path)
    fsync_dir(os.path.dirname(full_path))

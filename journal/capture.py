"""Reading one live path into an ``Entry`` and the new blobs it needs.

* Ordinary files are cut into fixed ``CHUNK``-sized blobs; a chunk whose id the
  previous version already had is reused, not uploaded again.
* JSONL transcripts that only grew publish just the new complete lines, from the
  previously checkpointed length to the last ``\\n``. A torn last line waits for a
  later checkpoint. Anything else (shrunk, rewritten) is re-based from offset 0.
* A file is read up to the size seen when it was opened, and the stat signature
  taken *before* reading is what the cache records, so a file rewritten during the
  read is selected again on the next pass.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat as stat_mod
from collections.abc import Callable, Iterator

from .localstate import FileState
from .signatures import dir_signature, signature
from .model import KIND_DIR, KIND_FILE, KIND_JSONL, KIND_SYMLINK, BlobRef, Entry
from .objects import KIND_CHUNK, KIND_SEGMENT
from .walk import Item

CHUNK = 1 << 20            # ordinary files: fixed-size chunks
SEGMENT_TARGET = 4 << 20   # JSONL: a segment closes at the first line end past this size
READ_BLOCK = 1 << 20
MERGE_FANOUT = 4           # compaction: this many trailing segments of one size tier merge
MERGE_CAP = 8 << 20        # ... into one segment of at most this size
TIER_BASE = 4096

AddBlob = Callable[[int, bytes], BlobRef]


def capture_item(root: str, item: Item, prev: FileState | None, is_jsonl: bool, add: AddBlob) -> FileState | None:
    """Return the path's new cache record, or None if it vanished meanwhile."""
    st = item.stat
    mode = stat_mod.S_IMODE(st.st_mode)
    if item.kind == KIND_DIR:
        return FileState(dir_signature(st), Entry(path=item.path, kind=KIND_DIR, mode=mode))
    full = os.path.join(root, item.path)
    if item.kind == KIND_SYMLINK:
        try:
            target = os.readlink(full)
        except OSError:
            return None
        return FileState(signature(st), Entry(path=item.path, kind=KIND_SYMLINK, mode=mode,
                                              mtime_ns=st.st_mtime_ns, target=target))
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None  # vanished: the next walk sees what it is now
    except OSError as err:
        if err.errno == errno.ELOOP:
            return None  # swapped for a symlink: the next walk sees it as one
        raise  # unreadable (permissions, I/O): the caller keeps the last checkpoint of it
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        if is_jsonl:
            entry = _capture_jsonl(fd, item.path, st, prev, add)
        else:
            entry = _capture_whole(fd, item.path, st, prev, add)
    finally:
        os.close(fd)
    return FileState(signature(st), entry)


def _capture_whole(fd: int, path: str, st: os.stat_result, prev: FileState | None, add: AddBlob) -> Entry:
    known = {r.id: r for r in prev.entry.refs} if prev else {}
    refs = []
    offset = 0
    while offset < st.st_size:
        data = os.pread(fd, min(CHUNK, st.st_size - offset), offset)
        if not data:
            break  # the file shrank while we read: the next pass re-reads it
        cid = hashlib.sha256(data).hexdigest()
        refs.append(known.get(cid) or add(KIND_CHUNK, data))
        offset += len(data)
    return Entry(path=path, kind=KIND_FILE, mode=stat_mod.S_IMODE(st.st_mode), mtime_ns=st.st_mtime_ns,
                 size=offset, refs=tuple(refs))


def _capture_jsonl(fd: int, path: str, st: os.stat_result, prev: FileState | None, add: AddBlob) -> Entry:
    pe = prev.entry if prev and prev.entry.kind == KIND_JSONL else None
    refs: tuple[BlobRef, ...] = ()
    start = 0
    if pe is not None and st.st_size >= pe.size:
        same_inode = prev.sig is not None and prev.sig[2] == st.st_ino
        if still_prefix(fd, pe, check_all=not same_inode):
            refs, start = pe.refs, pe.size
    new_refs, end = [], start
    for seg_start, data in split_segments(fd, start, st.st_size):
        new_refs.append(add(KIND_SEGMENT, data))
        end = seg_start + len(data)
    mode = stat_mod.S_IMODE(st.st_mode)
    if pe is not None and not new_refs and refs == pe.refs and mode == pe.mode:
        return pe  # only a torn tail changed: nothing to publish, keep the entry as it was
    merged = compact_segments(fd, list(refs) + new_refs, add)
    if merged is None:  # the older bytes changed under us: re-base from offset 0
        merged = [add(KIND_SEGMENT, data) for _, data in split_segments(fd, 0, end)]
    return Entry(path=path, kind=KIND_JSONL, mode=mode, mtime_ns=st.st_mtime_ns,
                 size=end, refs=tuple(merged))


def _tier(size: int) -> int:
    tier = 0
    while size >= TIER_BASE * MERGE_FANOUT:
        size //= MERGE_FANOUT
        tier += 1
    return tier


def compact_segments(fd: int, refs: list[BlobRef], add: AddBlob) -> list[BlobRef] | None:
    """Merge trailing runs of ``MERGE_FANOUT`` same-tier segments (leveled compaction).

    Each append adds one small segment; every ``MERGE_FANOUT`` of a tier become one of
    the next tier, so a transcript built from n appends has O(log n) segments and each
    byte is rewritten O(log n) times. Merged bytes are read back from the live file and
    must hash to the segments they replace; None means they no longer do.
    """
    offsets, pos = [], 0
    for ref in refs:
        offsets.append(pos)
        pos += ref.size
    while len(refs) >= MERGE_FANOUT:
        run = refs[-MERGE_FANOUT:]
        total = sum(r.size for r in run)
        if total > MERGE_CAP or len({_tier(r.size) for r in run}) != 1:
            break
        start = offsets[-MERGE_FANOUT]
        data = os.pread(fd, total, start)
        at = 0
        for r in run:
            if hashlib.sha256(data[at:at + r.size]).hexdigest() != r.id:
                return None
            at += r.size
        del refs[-MERGE_FANOUT:], offsets[-MERGE_FANOUT:]
        refs.append(add(KIND_SEGMENT, data))
        offsets.append(start)
    return refs


def still_prefix(fd: int, entry: Entry, check_all: bool) -> bool:
    """True when the file still starts with the entry's checkpointed bytes.

    Checks the last segment only (an append never touches it), or every segment when
    the file may have been replaced (a new inode, or nothing cached about it).
    """
    if not entry.refs:
        return True
    offsets, pos = [], 0
    for ref in entry.refs:
        offsets.append(pos)
        pos += ref.size
    pairs = list(zip(offsets, entry.refs))
    for offset, ref in (pairs if check_all else pairs[-1:]):
        data = os.pread(fd, ref.size, offset)
        if hashlib.sha256(data).hexdigest() != ref.id:
            return False
    return True


def split_segments(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, bytes)`` segments of complete lines in ``[start, end)``.

    Each segment ends in ``\\n`` and closes at the first line end past
    ``SEGMENT_TARGET``; bytes after the last ``\\n`` (a torn line) are never yielded.
    """
    buf = bytearray()
    buf_start = start
    pos = start
    while pos < end:
        block = os.pread(fd, min(READ_BLOCK, end - pos), pos)
        if not block:
            break
        pos += len(block)
        buf += block
        if len(buf) >= SEGMENT_TARGET:
            cut = buf.rfind(b"\n") + 1
            if cut:
                yield buf_start, bytes(buf[:cut])
                del buf[:cut]
                buf_start += cut
    cut = buf.rfind(b"\n") + 1
    if cut:
        yield buf_start, bytes(buf[:cut])

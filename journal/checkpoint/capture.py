"""Reading one live path into an ``Entry`` and the new blobs it needs.

* Ordinary files are cut into fixed ``CHUNK``-sized blobs; a chunk whose id the
  previous version already had is reused, not uploaded again. A changed chunk of a
  rewritten small file may be stored as a delta of the previous version's
  (``checkpoint/file_delta.py``). A chunk wholly inside a sparse file's hole is zeros
  and is never read (``local/sparse.py``); a chunk the file holds again is stored once.
* JSONL transcripts that only grew publish just the new complete lines, from the
  previously checkpointed length to the last ``\\n``. A torn last line waits for a
  later checkpoint. Anything else (shrunk, rewritten) is re-based from offset 0, with
  a warning naming the file and both sizes. Whether the checkpointed bytes are still
  there is checked in full when the file did not grow (``check_prefix``); a growing
  file re-hashes its last checkpointed segment and a rolling window of the others.
  Memory stays bounded whatever the line length: the last ``\\n`` is found reading
  backwards, a line longer than ``SEGMENT_MAX`` goes on over several segments, and a
  segment that can no longer take part in a merge is stored as soon as it is read.
* A file is read up to the size seen when it was opened, and the stat signature
  taken *before* reading is what the cache records, so a file rewritten during the
  read is selected again on the next pass.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat as stat_mod
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator

from .errors import Unstorable
from ..format.codec import PLAIN, Codec
from ..heap import keep_freed
from .file_delta import MAX_FILE, FileDeltas
from ..local.state import FileState
from ..signatures import dir_signature, grew_in_place, mtime_ns, signature
from ..format.model import KIND_DIR, KIND_FILE, KIND_JSONL, KIND_SYMLINK, BlobRef, Entry
from ..format.objects import CHUNK_BYTES, KIND_CHUNK, KIND_SEGMENT, SEGMENT_BYTES, encode_record
from ..format.segments import ANCHOR_MIN, DICT_TAIL, anchors
from ..local.sparse import ZERO_CHUNK, DataMap, data_map, zero_chunk_id
from ..local.treepath import target_problem
from ..paths import shown
from ..local.walk import Item

CHUNK = CHUNK_BYTES        # ordinary files: fixed-size chunks
#: A file larger than this is read, hashed and compressed ahead by threads (``_chunks_ahead``).
AHEAD_FILE = 8 * CHUNK
AHEAD_THREADS = 2
AHEAD_CHUNKS = 4
READ_BLOCK = 1 << 20
SEGMENT_TARGET = 4 << 20   # JSONL: a segment closes at the first line end past this size,
# ... or, inside a longer line, at this size (the line goes on). It is cut after the read
# that takes it there, so it holds less than SEGMENT_MAX + READ_BLOCK bytes: the most a
# reader accepts (objects.SEGMENT_BYTES, 9 MiB).
SEGMENT_MAX = SEGMENT_BYTES - READ_BLOCK
LINE_SCAN = 64 << 10       # the last line end is looked for backwards, this much at a time
MERGE_FANOUT = 8           # compaction: this many trailing segments merge, when the oldest of
MERGE_RATIO = 0.5          # ... them is at most this share of the others together,
MERGE_CAP = 8 << 20        # ... into one segment of at most this size
#: A growing transcript re-hashes its last checkpointed segment plus at most this many
#: bytes of its earlier segments (at least one), a window that rolls on at every growing
#: capture (``check_prefix``, design §6).
ROLL_BYTES = 4 << 20

#: ``PackWriter.add(kind, payload, *, base=None, encoded=None, digest=None)``, or its
#: ``add_ahead``: a checkpoint's scan compresses the blobs of the next files meanwhile.
AddBlob = Callable[..., BlobRef]


def capture_item(root: str, item: Item, prev: FileState | None, is_jsonl: bool, add: AddBlob,
                 deltas: FileDeltas | None = None, warn: Callable[[str], None] | None = None,
                 codec: Codec = PLAIN) -> FileState | None:
    """Return the path's new cache record, or None if it vanished meanwhile. ``deltas``
    stores the changed chunks of rewritten files (``checkpoint/file_delta.py``); without it every
    changed chunk is stored whole. ``warn`` receives the warning of a transcript whose
    checkpointed bytes are gone (shrunk or rewritten). ``codec`` is the store's (its ids
    are the ones stored entries name). Raises ``Unstorable`` for a symlink whose target
    the path rule refuses (not valid UTF-8)."""
    st = item.stat
    mode = shared(stat_mod.S_IMODE(st.st_mode))
    if item.kind == KIND_DIR:
        return FileState(dir_signature(st), Entry(path=item.path, kind=KIND_DIR, mode=mode))
    full = os.path.join(root, item.path)
    if item.kind == KIND_SYMLINK:
        try:
            target = os.readlink(full)
        except (FileNotFoundError, NotADirectoryError):
            return None  # vanished: the next walk sees what it is now
        except OSError as err:
            if err.errno == errno.EINVAL:
                return None  # no longer a symlink: the next walk sees what it is
            raise  # unreadable (an I/O error): the caller keeps the last checkpoint of it
        problem = target_problem(target)
        if problem is not None:
            raise Unstorable(shown(full), problem, "point the link at a UTF-8 path")
        return FileState(signature(st), Entry(path=item.path, kind=KIND_SYMLINK, mode=mode,
                                              mtime_ns=mtime_ns(st), target=target))
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
            entry, roll = _capture_jsonl(fd, full, item.path, st, prev, add, warn, codec)
        else:
            entry, roll = _capture_whole(fd, item.path, st, prev, add, deltas, codec), 0
    except Changed:
        # Rewritten while it was read: its last checkpoint stays, and the next pass reads it again.
        return None if prev is None else FileState(None, prev.entry)
    finally:
        os.close(fd)
    return _read_state(st, entry, roll)


#: One object per mode and device number: a scan holds these ints once per path (a
#: mode or a device is past the small ints Python shares), and a tree has few of them.
_SHARED: dict[int, int] = {}
_SHARED_MAX = 4096


def shared(n: int) -> int:
    """``n`` as the one object this process holds for that value (a few thousand at most)."""
    held = _SHARED.get(n)
    if held is not None:
        return held
    if len(_SHARED) < _SHARED_MAX:
        _SHARED[n] = n
    return n


def _total(refs: list[BlobRef], size: int) -> int:
    """An entry's ``size``: its one blob's own object when it is the whole (no second int a path)."""
    return refs[0].size if len(refs) == 1 and refs[0].size == size else size


def _read_state(st: os.stat_result, entry: Entry, roll: int) -> FileState:
    """A regular file's record as read: its signature made of the entry's own size and
    time objects where they are equal, and shared modes and devices (a first checkpoint
    of 200,000 files held five ints a path twice over: 30 MB)."""
    size, mtime, ino, mode = signature(st)
    sig = (entry.size if entry.size == size else size, entry.mtime_ns if entry.mtime_ns == mtime else mtime,
           ino, shared(mode))
    return FileState(sig, entry, roll, shared(st.st_dev))


class Changed(Exception):
    """A live file changed while it was read, so that what was read cannot be published
    (a line cut at ``SEGMENT_MAX`` whose line end is no longer there)."""


def _capture_whole(fd: int, path: str, st: os.stat_result, prev: FileState | None, add: AddBlob,
                   deltas: FileDeltas | None, codec: Codec) -> Entry:
    """Fixed-size chunks; an unchanged one is reused, a changed one of a rewritten small
    file is stored as a delta of the previous version's chunk (``checkpoint/file_delta.py``)."""
    old = prev.entry if prev is not None and prev.entry.kind == KIND_FILE else None
    old_refs = old.refs if old is not None else ()
    old_bases = (old.bases or (None,) * len(old_refs)) if old is not None else ()
    known = {r.id: (r, b) for r, b in zip(old_refs, old_bases)}
    rewrite = deltas is not None and old is not None and st.st_size <= MAX_FILE
    refs, bases = [], []
    offset = 0
    holes = data_map(fd, st)   # a sparse file: its holes' chunks are zeros, never read
    chunks = _chunks_ahead(fd, st.st_size, known, codec, holes) if st.st_size > AHEAD_FILE and not rewrite else None
    try:
        while offset < st.st_size:
            if chunks is None:
                data = _read_chunk(fd, offset, min(CHUNK, st.st_size - offset), holes)
                digest, encoded = _digest(data, codec), None
                cid = digest.hex()
            else:
                data, cid, encoded = next(chunks, (b"", "", None))
                digest = None
            if not data:
                break  # the file shrank while we read: the next pass re-reads it
            i = len(refs)
            ref, base = known.get(cid) or (None, None)
            if ref is None and rewrite:
                ref, base = deltas.chunk(data, (old_bases[i] or old_refs[i]) if i < len(old_refs) else None)
            elif ref is None:
                ref = add(KIND_CHUNK, data, encoded=encoded, digest=digest)
            known.setdefault(cid, (ref, base))   # a chunk the file holds again (a hole's zeros) is stored once
            refs.append(ref)
            bases.append(base)
            offset += len(data)
            if chunks is not None and len(data) < CHUNK:
                break  # a short read: the file shrank while we read (the chunks ahead are past it)
    finally:
        if chunks is not None:
            chunks.close()  # waits for its threads, before the caller closes ``fd``
    return Entry(path=path, kind=KIND_FILE, mode=shared(stat_mod.S_IMODE(st.st_mode)), mtime_ns=mtime_ns(st),
                 size=_total(refs, offset), refs=tuple(refs), bases=tuple(bases) if any(bases) else ())


def _read_chunk(fd: int, offset: int, n: int, holes: DataMap | None) -> bytes:
    """The ``n`` bytes of the chunk at ``offset``: zeros, unread, when they are wholly in a hole."""
    if holes is not None and not holes.holds_data(offset, n):
        return ZERO_CHUNK if n == CHUNK else bytes(n)
    return os.pread(fd, n, offset)


def _digest(data: bytes, codec: Codec) -> bytes:
    """A chunk's id as 32 bytes; a hole's whole chunk of zeros is not hashed again."""
    return bytes.fromhex(zero_chunk_id(codec)) if data is ZERO_CHUNK else codec.digest(data)


def _chunks_ahead(fd: int, size: int, known: dict, codec: Codec,
                  holes: DataMap | None = None) -> Iterator[tuple[bytes, str, tuple[str, list] | None]]:
    """``(bytes, id, encoded record, in pieces, or None)`` of each chunk of a large file, in order:
    read, hashed and, unless ``known`` holds its id, compressed into a record by
    ``AHEAD_THREADS`` threads, up to ``AHEAD_CHUNKS`` chunks ahead of the caller
    (``hashlib``, ``zstandard`` and ``pread`` release the GIL, so the caller writes the
    pack meanwhile). Memory stays bounded: at most ``AHEAD_CHUNKS`` chunks and records
    are held. Closing it waits for the threads; none outlives the file's capture."""
    from concurrent.futures import ThreadPoolExecutor  # imported here: most checkpoints never need it

    keep_freed()

    def prepare(offset: int):
        data = _read_chunk(fd, offset, min(CHUNK, size - offset), holes)
        digest = _digest(data, codec)
        cid = digest.hex()
        if not data or cid in known:
            return data, cid, None
        return data, cid, encode_record(KIND_CHUNK, data, digest=digest, codec=codec, joined=False)

    pool = ThreadPoolExecutor(max_workers=AHEAD_THREADS, thread_name_prefix="journal-chunk")
    pending: deque = deque()
    try:
        offsets = iter(range(0, size, CHUNK))
        for offset in itertools.islice(offsets, AHEAD_CHUNKS):
            pending.append(pool.submit(prepare, offset))
        while pending:
            got = pending.popleft().result()
            offset = next(offsets, None)
            if offset is not None:
                pending.append(pool.submit(prepare, offset))
            yield got
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _capture_jsonl(fd: int, full: str, path: str, st: os.stat_result, prev: FileState | None, add: AddBlob,
                   warn: Callable[[str], None] | None, codec: Codec) -> tuple[Entry, int]:
    """The transcript's entry and the next rolling re-check offset (see ``check_prefix``)."""
    pe = prev.entry if prev and prev.entry.kind == KIND_JSONL else None
    old: list[BlobRef] = []
    start = roll = 0
    gone = None  # why the checkpointed bytes are not a prefix of the file any more
    if pe is not None and st.st_size < pe.size:
        gone = f"shrank from {pe.size} to {st.st_size} bytes"
    elif pe is not None:
        # Only a file that grew on the same inode may skip bytes: anything else (a new
        # inode, nothing cached, a changed mtime or mode without growth) re-hashes all.
        grew = prev.sig is not None and grew_in_place(prev.sig, st)
        roll = check_prefix(fd, pe, prev.roll if grew else None, codec)
        if roll is None:
            roll, gone = 0, _rewritten(pe, st)
        else:
            old, start = list(pe.refs), pe.size
    end = last_line_end(fd, start, st.st_size)
    mode = shared(stat_mod.S_IMODE(st.st_mode))
    if pe is not None and end == start and old == list(pe.refs) and mode == pe.mode:
        return pe, roll  # only a torn tail changed: nothing to publish, keep the entry as it was
    refs = append_segments(fd, old, (data for _, data in split_segments(fd, start, end)), add, end, codec)
    if refs is None:  # the older bytes changed under us: re-base from offset 0
        if pe is not None and gone is None:
            gone = _rewritten(pe, st)
        refs = append_segments(fd, [], (data for _, data in split_segments(fd, 0, end)), add, end, codec)
        roll = 0
    if refs is None:
        raise Changed(path)
    if gone is not None and warn is not None:
        warn(f"checkpoint: transcript {shown(full)} {gone}; stored it as a rewrite from its start "
             "(the earlier version stays in earlier checkpoints: `journal restore --at`)")
    return Entry(path=path, kind=KIND_JSONL, mode=mode, mtime_ns=mtime_ns(st),
                 size=_total(refs, sum(r.size for r in refs)), refs=tuple(refs)), roll


def _rewritten(pe: Entry, st: os.stat_result) -> str:
    return f"was rewritten in place ({pe.size} bytes checkpointed, {st.st_size} now)"


def append_segments(fd: int, old: list[BlobRef], fresh: Iterable[bytes], add: AddBlob,
                    end: int | None = None, codec: Codec = PLAIN) -> list[BlobRef] | None:
    """The refs of ``old`` segments followed by ``fresh`` ones, after leveled compaction.

    Each append adds one small segment; the last ``MERGE_FANOUT`` segments become one
    when the oldest of them is at most ``MERGE_RATIO`` of the others together
    (repeatedly). Merged segments thus grow geometrically, like digits of a base-8
    counter, so a transcript built from n appends has O(log n) segments and each byte
    is rewritten O(log n) times, whatever the mix of append sizes (design §6). Merges
    are planned before anything is stored, so only the segments the entry ends with
    are uploaded. Merged old bytes are read back from the live file and must hash (as
    ``codec`` makes ids) to the segments they replace; None means they no longer do.

    ``end`` (the offset the fresh segments will reach) bounds memory: a merge takes a
    trailing run of at most ``MERGE_CAP`` bytes, so a piece that starts more than that
    before ``end`` is final. It is stored as soon as it is read, and its bytes dropped.
    """
    # a piece: [size, stored ref or None, bytes or None (old bytes are read when merged)]
    pieces = [[r.size, r, None] for r in old]
    offsets, pos = [], 0
    for size, _, _ in pieces:
        offsets.append(pos)
        pos += size
    settled, last_anchor = 0, None
    for data in fresh:
        pieces.append([len(data), None, data])
        offsets.append(pos)
        pos += len(data)
        while end is not None and settled < len(pieces) and end - offsets[settled] > MERGE_CAP:
            size, ref, _ = pieces[settled]
            anchor = None if settled == 0 or size >= ANCHOR_MIN else last_anchor
            if ref is None:
                stored = _store_piece(fd, pieces, offsets, settled, anchor, add, codec)
                if stored is None:
                    return None
                pieces[settled] = [size, stored, None]
            if anchor is None:
                last_anchor = settled
            settled += 1
    while len(pieces) >= MERGE_FANOUT:
        run = pieces[-MERGE_FANOUT:]
        total = sum(p[0] for p in run)
        if total > MERGE_CAP or run[0][0] > MERGE_RATIO * (total - run[0][0]):
            break
        parts = [_piece_bytes(fd, offset, piece, codec) for offset, piece in zip(offsets[-MERGE_FANOUT:], run)]
        if any(part is None for part in parts):
            return None
        start = offsets[-MERGE_FANOUT]
        del pieces[-MERGE_FANOUT:], offsets[-MERGE_FANOUT:]
        pieces.append([total, None, b"".join(parts)])
        offsets.append(start)
    # Store the new pieces; a small one is a delta against its anchor (format/segments.py).
    out = []
    for i, anchor in enumerate(anchors([p[0] for p in pieces])):
        ref = pieces[i][1]
        if ref is None:
            ref = _store_piece(fd, pieces, offsets, i, anchor, add, codec)
            if ref is None:
                return None
        out.append(ref)
    return out


def _store_piece(fd: int, pieces: list, offsets: list[int], i: int, anchor: int | None,
                 add: AddBlob, codec: Codec) -> BlobRef | None:
    """Store piece ``i``, a delta against its anchor's tail unless it is an anchor
    itself; None when the anchor's bytes changed under us."""
    data = pieces[i][2]
    base = None
    if anchor is not None:
        _, aref, adata = pieces[anchor]
        base = adata[-DICT_TAIL:] if adata is not None else TAILS.tail(fd, offsets[anchor], aref, codec)
        if base is None:
            return None
    stored = add(KIND_SEGMENT, data, base=base)
    if anchor is None:
        TAILS.remember(stored.id, data)  # later small segments (this tick's or the next's) use it
    return stored


def _piece_bytes(fd: int, offset: int, piece: list, codec: Codec) -> bytes | None:
    size, ref, data = piece
    if data is not None:
        return data
    data = os.pread(fd, size, offset)
    return data if codec.id(data) == ref.id else None


def check_prefix(fd: int, entry: Entry, roll: int | None, codec: Codec = PLAIN) -> int | None:
    """Whether the file still starts with the entry's checkpointed bytes: None when
    not, else the offset where the next rolling re-check starts.

    ``roll`` None re-hashes every segment (the file may have been replaced or edited in
    place: a new inode, nothing cached, a changed mtime without growth). Otherwise the
    file grew, and the cost is bounded: the last segment is re-hashed (an append never
    touches it; a rewrite almost always does), plus the earlier segments from the one
    holding offset ``roll`` on, wrapping to the start, while they total at most
    ``ROLL_BYTES`` (at least one). An in-place change to a segment outside that window
    is found by a later growing capture, once the window reaches it (design §6).
    """
    refs = entry.refs
    if not refs:
        return 0
    offsets, pos = [], 0
    for ref in refs:
        offsets.append(pos)
        pos += ref.size
    earlier = len(refs) - 1
    if roll is None:
        picks, roll = list(range(len(refs))), 0
    else:
        picks = [earlier]
        i = next((k for k in range(earlier) if roll < offsets[k] + refs[k].size), 0)
        spent = 0
        for _ in range(earlier):
            if len(picks) > 1 and spent + refs[i].size > ROLL_BYTES:
                break
            picks.append(i)
            spent += refs[i].size
            i = (i + 1) % earlier
        roll = offsets[i] if earlier else 0
    for i in picks:
        if hash_range(fd, offsets[i], refs[i].size, codec) != refs[i].id:
            return None
    return roll


def hash_range(fd: int, offset: int, size: int, codec: Codec = PLAIN) -> str:
    """The id (as ``codec`` makes ids: SHA-256 in a plain store) of ``size`` bytes of
    ``fd`` from ``offset``, read ``READ_BLOCK`` at a time (a short file hashes what it has)."""
    digest = codec.hasher()
    end = offset + size
    while offset < end:
        block = os.pread(fd, min(READ_BLOCK, end - offset), offset)
        if not block:
            break
        digest.update(block)
        offset += len(block)
    return digest.hexdigest()


def last_line_end(fd: int, start: int, end: int) -> int:
    """The offset just past the last ``\\n`` in ``[start, end)`` (``start`` when there is
    none), read backwards ``LINE_SCAN`` bytes at a time: a long torn tail costs a read,
    never memory."""
    pos = end
    while pos > start:
        n = min(LINE_SCAN, pos - start)
        cut = os.pread(fd, n, pos - n).rfind(b"\n")
        if cut >= 0:
            return pos - n + cut + 1
        pos -= n
    return start


def split_segments(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, bytes)`` segments of the complete lines in ``[start, end)``, where
    ``end`` is just past a line end (``last_line_end``).

    A segment closes at the first line end past ``SEGMENT_TARGET`` (``READ_BLOCK``
    granularity), or at ``SEGMENT_MAX`` inside a longer line, which goes on in the next
    segment; the last one ends in ``\\n``, so no torn line is ever yielded. At most
    ``SEGMENT_MAX + READ_BLOCK`` bytes are held. ``Changed`` when the file no longer
    has the line end a cut inside a line counted on (it was rewritten meanwhile).
    """
    blocks: list = []   # the blocks read since ``buf_start`` (the first maybe a view of its rest), in order
    held = 0            # their bytes
    buf_start = pos = start
    line_end = 0        # just past the last ``\n`` held (0: none)
    mid_line = False    # the last segment yielded ends inside a line
    while pos < end:
        block = os.pread(fd, min(READ_BLOCK, end - pos), pos)
        if not block:
            break
        cut = block.rfind(b"\n")
        if cut >= 0:
            line_end = held + cut + 1
        blocks.append(block)
        held += len(block)
        pos += len(block)
        if (line_end and held >= SEGMENT_TARGET) or held >= SEGMENT_MAX:
            cut = line_end or SEGMENT_MAX
            yield buf_start, _take(blocks, cut)
            mid_line = not line_end
            held -= cut
            buf_start += cut
            line_end = 0
    if line_end:
        yield buf_start, _take(blocks, line_end)
    elif mid_line:
        raise Changed(f"no line end after offset {buf_start}")


def _take(blocks: list, n: int) -> bytes:
    """The first ``n`` bytes of ``blocks``, taken off it, joined with one copy (none
    when they are one whole block read); the rest of a block cut stays as a view."""
    out: list = []
    while n:
        block = blocks.pop(0)
        if len(block) > n:
            view = memoryview(block)
            out.append(view[:n])
            blocks.insert(0, view[n:])
            break
        out.append(block)
        n -= len(block)
    return out[0] if len(out) == 1 and isinstance(out[0], bytes) else b"".join(out)


class AnchorTails:
    """Verified anchor tails by id, for writers: a few recent ones kept in memory."""

    def __init__(self, keep: int = 64):
        self.keep = keep
        self._tails: OrderedDict[str, bytes] = OrderedDict()

    def tail(self, fd: int, offset: int, ref: BlobRef, codec: Codec = PLAIN) -> bytes | None:
        """The last ``DICT_TAIL`` bytes of the anchor ``ref`` at ``offset`` of the live
        file ``fd``; None when those bytes no longer hash to the anchor's id (as ``codec``
        makes ids)."""
        got = self._tails.get(ref.id)
        if got is not None:
            self._tails.move_to_end(ref.id)
            return got
        digest, tail = codec.hasher(), b""
        end = offset + ref.size
        while offset < end:  # a block at a time: an anchor may be large
            block = os.pread(fd, min(READ_BLOCK, end - offset), offset)
            if not block:
                return None
            digest.update(block)
            tail = (tail + block)[-DICT_TAIL:]
            offset += len(block)
        if digest.hexdigest() != ref.id:
            return None
        return self.remember(ref.id, tail)

    def remember(self, blob_id: str, payload: bytes) -> bytes:
        tail = payload[-DICT_TAIL:]
        self._tails[blob_id] = tail
        while len(self._tails) > self.keep:
            self._tails.popitem(last=False)
        return tail


#: One per process: ``journal supervise`` keeps verified anchors between ticks.
TAILS = AnchorTails()

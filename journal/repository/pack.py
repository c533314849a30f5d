"""Packing: many small blobs of one checkpoint go into one closed store object.

On hf-mount every object is one upload, so a checkpoint writes its new blobs into a
few packs instead of one object per blob. A pack is the plain concatenation of
records (see ``format/objects.py``), each sealed on its own in an encrypted store
(``format/codec.py``: so one blob is still read with one ranged read), and its key is
the SHA-256 of its bytes as stored. Packs are spooled to local disk first, so memory
stays bounded whatever the file sizes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import uuid
from collections import deque

import msgspec

from ..atomic import Writeback, makedirs
from ..background import Background
from ..errors import KeyExists
from ..local.errors import LocalWriteError
from ..localfs import clear_dir
from ..format.codec import PLAIN, RECORD, Codec
from ..format.model import PENDING_PACK, BlobRef, is_pending
from ..format.objects import encode_record
from ..paths import PRIVATE_DIR, PRIVATE_FILE
from ..store.base import Store
from .repository import pack_key

#: A pack is closed and uploaded once it reaches this size.
PACK_TARGET = 64 << 20
#: Packs of one checkpoint uploading at once (each is spooled on local disk meanwhile).
UPLOADS_IN_FLIGHT = 3
#: A record at least this long is hashed into its pack's name by a thread while the
#: caller writes the next ones (SHA-256 releases the GIL): a large file's pack hash
#: no longer runs in series with its writes. At most ``HASH_AHEAD`` records wait for it.
HASH_THREAD_MIN = 256 << 10
HASH_AHEAD = 4
#: ``add_ahead``: records encoded (hashed and compressed) by this many threads, at most
#: ``ENCODE_AHEAD`` records and ``ENCODE_AHEAD_BYTES`` of payload ahead of the pack.
ENCODE_THREADS = 2
ENCODE_AHEAD = 8
ENCODE_AHEAD_BYTES = 16 << 20
#: ... of a payload of at least this size; a smaller one is encoded at once, in the
#: caller's thread (a tick's few small appends would pay more for the threads).
ENCODE_AHEAD_MIN = 64 << 10
#: A blob added ahead names this placeholder pack, and a number, until it is written.
AHEAD_REF = f"{PENDING_PACK}ahead-"


class PackWriter:
    """Collects records into spooled packs and uploads each pack when it closes.

    ``add`` returns a ``BlobRef`` whose ``pack`` is a placeholder until ``finish``;
    ``resolve`` swaps placeholders for real pack ids afterwards.

    A writer that failed once (an upload, a write of its spool, the encoding of a
    record added ahead) stays failed: every later ``add``, ``close`` and ``finish``
    raises that first error again (``failed``), so a caller that took it for something
    else (a live file it could not read) can never go on to publish what names the
    lost record or pack.
    """

    def __init__(self, store: Store, spool_dir: str, target: int | None = PACK_TARGET, codec: Codec = PLAIN):
        self.store = store
        self.codec = codec                  # the store's: ids are its, and each record is sealed by it
        self.spool_dir = spool_dir
        self.target = target
        self.packs: list[str] = []          # ids of packs uploaded, in order
        self.uploaded_bytes = 0
        self.uploaded_objects = 0
        self.closed_bytes = 0               # bytes of the packs closed (``packs``), uploaded or not yet
        self.blobs = 0
        self.failed: BaseException | None = None   # the first upload or spool failure (see the class)
        self._ids: dict[str, str] = {}      # placeholder -> pack id
        self._uploads: list = []          # concurrent.futures.Future, one per upload in flight
        self._existing: list[tuple[str, str]] = []   # (pack, spool path) found already stored
        self._pool = None                 # a ThreadPoolExecutor once something is uploaded
        self._hasher = None               # a one-thread ThreadPoolExecutor once a large record is added
        self._hashing: deque = deque()    # its pending updates of ``_hash``, in record order
        self._stats = threading.Lock()
        self._fh = None
        self._writeback = None
        self._path = ""
        self._hash = None
        self._size = 0
        self._slot = ""
        self._encoder = None              # a ThreadPoolExecutor once a blob is added ahead
        self._ahead: deque = deque()      # (future record, payload size, placeholder), in the order added
        self._ahead_bytes = 0
        self._placed: dict[str, BlobRef] = {}   # placeholder -> the record's place, once written

    def add_ahead(self, kind: int, payload: bytes, *, base: bytes | None = None,
                  encoded: tuple[str, bytes] | None = None, digest: bytes | None = None) -> BlobRef:
        """``add``, but the record is encoded by a thread while the caller goes on: the
        returned reference names a placeholder for its place (pack, offset, length),
        which ``resolve`` replaces once ``finish`` has written it. Records are written in
        the order they were added, ahead or not, so the packs are the bytes ``add``
        alone writes. For blobs whose place nothing reads before the commit (file
        chunks, transcript segments; a page map names its pages' offsets). The id is
        hashed here (``digest``: as the caller already hashed it), the rest in the thread."""
        if encoded is not None or len(payload) < ENCODE_AHEAD_MIN:
            return self.add(kind, payload, base=base, encoded=encoded, digest=digest)
        self.check()
        encoder = self._threads("_encoder", ENCODE_THREADS, "encode")
        placeholder = f"{AHEAD_REF}{len(self._placed) + len(self._ahead)}"
        digest = self.codec.digest(payload) if digest is None else digest
        self._ahead.append((encoder.submit(encode_record, kind, payload, base=base, codec=self.codec,
                                                 digest=digest),
                            len(payload), placeholder))
        self._ahead_bytes += len(payload)
        while len(self._ahead) > ENCODE_AHEAD or self._ahead_bytes > ENCODE_AHEAD_BYTES:
            self._write_ahead()
        return BlobRef(digest.hex(), placeholder, 0, 0, len(payload))

    def _write_ahead(self) -> None:
        """Write the oldest record added ahead, once encoded."""
        encoding, size, placeholder = self._ahead.popleft()
        self._ahead_bytes -= size
        try:
            blob_id, record = encoding.result()
        except Exception as err:  # a reference to it was handed out: the writer cannot go on
            self._fail(err)
            raise
        self._placed[placeholder] = self._add_record(blob_id, record, size, True)

    def _catch_up(self) -> None:
        """Write every record added ahead (before a record added now, or the pack's close)."""
        while self._ahead:
            self._write_ahead()

    def add(self, kind: int, payload: bytes, roll: bool = True, *, base: bytes | None = None,
            encoded: tuple[str, bytes] | None = None, digest: bytes | None = None) -> BlobRef:
        """Append one blob; returns its (pending) reference.

        A pack that has reached the target size (``None``: no limit) is closed and
        uploaded first, so no pack grows much past the target; ``roll=False`` keeps the
        blob in the open pack (a page map that names that pack's pages as "same pack").
        ``base``: store a database page as a delta against these bytes (``encode_record``).
        ``encoded``: ``encode_record(kind, payload)`` as the caller already made it (in
        another thread: ``checkpoint/capture.py`` encodes a large file's chunks ahead).
        ``digest``: the payload's id as the caller already hashed it (``codec.digest``).
        """
        blob_id, record = encoded or encode_record(kind, payload, base=base, codec=self.codec, digest=digest)
        return self.add_record(blob_id, record, len(payload), roll)

    def add_record(self, blob_id: str, record: bytes | list, size: int, roll: bool = True) -> BlobRef:
        """Append one record already made by ``encode_record`` (with this writer's codec),
        sealed in an encrypted store; see ``add``. ``record`` may be its list of pieces
        (``encode_record(joined=False)``): written with one ``writev`` and hashed piece by
        piece, never joined (joined, to be sealed, in an encrypted store). Blobs added
        ahead are written first."""
        self.check()
        self._catch_up()
        return self._add_record(blob_id, record, size, roll)

    def check(self) -> None:
        """Raise the writer's first failure again, if it failed (see the class)."""
        if self.failed is not None:
            raise self.failed

    def _fail(self, err: BaseException) -> BaseException:
        """Record ``err`` as the writer's failure, unless it failed before; returns it."""
        self.failed = self.failed or err
        return err

    def _add_record(self, blob_id: str, record: bytes | list, size: int, roll: bool) -> BlobRef:
        if isinstance(record, list) and self.codec.encrypted:
            record = b"".join(record)
        pieces = record if isinstance(record, list) else [self.codec.seal(record, RECORD)]
        if roll and self._fh is not None and self.target is not None and self._size >= self.target:
            self._close_and_upload()
        with self._spooling():
            if self._fh is None:
                self._open()
            offset = self._size
            if len(pieces) == 1:
                self._fh.write(pieces[0])
            else:
                self._fh.flush()
                _write_all(self._fh.fileno(), pieces)
            length = sum(map(len, pieces))
            self._writeback.wrote(length)
        self._hash_record(pieces, length)
        self._size += length
        self.blobs += 1
        return BlobRef(blob_id, self._slot, offset, length, size)

    def _hash_record(self, pieces: list, length: int) -> None:
        """Add a record's ``pieces`` (``length`` bytes) to the open pack's hash, in order:
        a large one in the hash thread, a small one here once the thread has caught up."""
        pending = self._hashing
        while pending and (pending[0].done() or len(pending) >= HASH_AHEAD):
            pending.popleft().result()
        if length < HASH_THREAD_MIN and not pending:
            _update(self._hash, pieces)
            return
        pending.append(self._threads("_hasher", 1, "pack-hash").submit(_update, self._hash, pieces))

    def _pack_name(self) -> str:
        """The open pack's name, once the hash thread has hashed all of it."""
        while self._hashing:
            self._hashing.popleft().result()
        return self._hash.hexdigest()

    def close(self) -> None:
        """Close the current pack, if any, and start its upload without waiting for it:
        from here every reference resolves (``resolve``), so the caller may build what
        names these packs (a checkpoint's index pack) while they upload. ``finish``
        waits for the uploads."""
        self.check()
        self._catch_up()
        if self._fh is not None:
            self._close_and_upload(last=True)

    def finish(self) -> None:
        """Close and upload the current pack, if any, and wait for every upload.

        Raises the first upload error; no pack is then known to be published.
        """
        self.close()
        self._wait(0)
        self._stop_threads(cancel=False)

    def _threads(self, name: str, workers: int, role: str):
        """The writer's thread pool ``name`` (``_pool``, ``_hasher``, ``_encoder``; each
        stopped by ``_stop_threads``), made on first use."""
        pool = getattr(self, name)
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor  # imported on first use: ~5 ms of every start

            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"journal-{role}")
            setattr(self, name, pool)
        return pool

    def _stop_threads(self, cancel: bool) -> None:
        for name in ("_pool", "_hasher", "_encoder"):
            pool = getattr(self, name)
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=cancel)
                setattr(self, name, None)
        self._hashing.clear()
        self._ahead.clear()
        self._ahead_bytes = 0

    def resolve(self, ref: BlobRef) -> BlobRef:
        """Return ``ref`` with its placeholder replaced by the uploaded pack id (and, for
        a blob added ahead, its place in that pack)."""
        if not is_pending(ref.pack):
            return ref
        placed = self._placed.get(ref.pack)
        if placed is not None:
            ref = placed
        return msgspec.structs.replace(ref, pack=self._ids[ref.pack])

    def settled(self, ref: BlobRef) -> BlobRef | None:
        """``resolve(ref)`` once the pack it is written to is closed; None until then."""
        if not is_pending(ref.pack):
            return ref
        placed = self._placed.get(ref.pack)
        return self.resolve(ref) if (placed or ref).pack in self._ids else None

    def locate(self, ref: BlobRef) -> str:
        """Where ``ref`` lives as seen from a blob added next: ``""`` for the open pack."""
        if ref.pack == self._slot and self._fh is not None:
            return ""
        return self.resolve(ref).pack

    def abort(self) -> None:
        """Drop any spooled, not yet uploaded pack and wait for uploads in flight."""
        if self._fh is not None:
            with contextlib.suppress(OSError):  # what it still buffers cannot be written (a full disk)
                self._fh.close()
            self._fh = None
            _unlink(self._path)
        for upload in self._uploads:
            upload.cancel()
        for upload in self._uploads:  # one under way finishes first: its spool file is then removed
            with contextlib.suppress(Exception):
                upload.result()
        self._stop_threads(cancel=True)
        self._uploads = []
        for _, path in self._existing:
            _unlink(path)
        self._existing = []

    def _open(self) -> None:
        makedirs(self.spool_dir, PRIVATE_DIR)
        self._path = os.path.join(self.spool_dir, f"{uuid.uuid4().hex}.pack")
        self._fh = open(os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                PRIVATE_FILE), "wb")
        # A large pack leaves the page cache as it is spooled (``atomic.Writeback``): its
        # fsync at the upload finds it written, and a 2 GiB file's checkpoint writes into
        # pages just freed, not 2 GiB of new ones. Its name is hashed from the records in
        # memory, and a local store links the spool file, so nothing reads it back here.
        self._writeback = Writeback(self._fh.fileno(), flush=self._fh.flush)
        self._hash = hashlib.sha256()
        self._size = 0
        self._slot = f"{PENDING_PACK}{uuid.uuid4().hex}"

    @contextlib.contextmanager
    def _spooling(self):
        """A failed write of the spool (a full disk) is journal's own failure, never a
        live file's: ``LocalWriteError``, naming the spool file (the caller aborts)."""
        try:
            yield
        except OSError as err:  # a record may be half written: nothing more goes in
            raise self._fail(LocalWriteError("write spool", err, self._path or self.spool_dir)) from err

    def _close_and_upload(self, last: bool = False) -> None:
        """Close the open pack and start its upload: in the upload threads, or in a
        thread of its own when it is the ``last`` and the only one (a checkpoint's one
        small pack: no thread pool is started, nor ``concurrent.futures`` imported,
        ~5 ms of a tick's start)."""
        pack = self._pack_name()  # first: a failed hash leaves the file open, for ``abort`` to remove
        with self._spooling():
            self._fh.close()
        self._fh = None
        path, size = self._path, self._size
        alone = last and self._pool is None
        if not alone:
            try:  # a slot first: an earlier upload's failure is raised before this pack is named
                self._wait(UPLOADS_IN_FLIGHT - 1)
            except BaseException:
                _unlink(path)
                raise
        self._ids[self._slot] = pack
        self.packs.append(pack)
        self.closed_bytes += size
        if alone:
            self._uploads.append(Background(self._upload, path, pack, size, name="journal-upload"))
            return
        pool = self._threads("_pool", UPLOADS_IN_FLIGHT, "upload")
        self._uploads.append(pool.submit(self._upload, path, pack, size))

    def _wait(self, keep: int) -> None:
        """Wait until at most ``keep`` uploads are in flight; raise the first failure
        (kept: ``failed``). An upload is forgotten only once it succeeded or failed: an
        interrupted wait leaves it for ``abort`` to wait for."""
        self.check()
        while len(self._uploads) > keep:
            try:
                self._uploads[0].result()
            except Exception as err:
                self._uploads.pop(0)
                self._fail(err)
                raise
            self._uploads.pop(0)

    def _upload(self, path: str, pack: str, size: int) -> None:
        try:
            self.store.put_file_if_absent(pack_key(pack), path)
            with self._stats:
                self.uploaded_bytes += size
                self.uploaded_objects += 1
        except KeyExists:
            # Same bytes, same name: published before (a crashed attempt, or identical
            # content). gc may have tombstoned it, so keep the spool until the manifest
            # that needs it is committed (``keep_existing``).
            with self._stats:
                self._existing.append((pack, path))
            return
        except BaseException:
            _unlink(path)
            raise
        _unlink(path)

    def keep_existing(self, keep_dir: str) -> list[str]:
        """Before the commit: move the spool copy of each pack whose put found it already
        stored into ``keep_dir``, for ``checkpoint/recheck.py``; returns their paths.

        Once the manifest is visible, a gc that lists manifests afterwards keeps the
        pack; but a sweep batch planned from a listing taken before the commit may
        still delete it after a check made then, so the copy outlives this checkpoint
        while a gc may be running. Moved before the manifest is put, so a kill at any
        point after leaves the copy where the next checkpoint's recheck finds it.
        """
        kept = []
        for pack, path in self._existing:
            makedirs(keep_dir, PRIVATE_DIR)
            kept.append(os.path.join(keep_dir, pack))
            os.replace(path, kept[-1])
            os.utime(kept[-1])
        self._existing = []
        return kept


def _update(digest, pieces: list) -> None:
    for piece in pieces:
        digest.update(piece)


def _write_all(fd: int, pieces: list) -> None:
    """Write ``pieces`` back to back at ``fd``'s offset, with as few ``writev`` as it takes."""
    views = [memoryview(piece) for piece in pieces]
    while views:
        done = os.writev(fd, views)
        while views and done >= len(views[0]):
            done -= len(views.pop(0))
        if done:
            views[0] = views[0][done:]


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def clear_spool(spool_dir: str) -> None:
    """Remove spool files left by a crashed checkpoint."""
    clear_dir(spool_dir, ".pack")

"""The cloud backend: S3, GCS and Azure (and S3-compatible services) through obstore.

``put_if_absent`` is a conditional put (``mode="create"``: ``If-None-Match: *``),
surfacing as ``AlreadyExistsError``/``PreconditionError``, which become ``KeyExists``.
Objects up to ``SINGLE_PUT_LIMIT`` are sent in one conditional request; larger
streams (only content-addressed packs are that large) are checked with a HEAD and
sent as a multipart upload, whose content is identical for every writer of that key.

``delete_many`` deletes up to ``DELETE_REQUEST_KEYS`` keys per call to obstore's bulk
delete: on S3 one DeleteObjects request (a missing key is no error there), on Azure batches
of 256, on GCS concurrent single deletes. obstore stops at the first key that fails
without saying which, and GCS and Azure call a missing key a failure, so a batch that
fails is settled again key by key (``delete``: a missing key is fine, any other
failure raises naming its key).

Transient failures (5xx, timeouts, connection resets) are retried with backoff by
obstore's client (``retry_config``); what still fails raises ``StoreError``. No
credentials is ``NoCloudCredentials`` (exit 2); for S3 it is found out before the
first request when none is configured (``cloud_credentials``), never by waiting on the
metadata service.
"""

from __future__ import annotations

import datetime as _dt
import io
import itertools
import os
import threading
from collections.abc import Iterator, Sequence
from typing import BinaryIO
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..atomic import COPY_CHUNK
from ..errors import ConfigError, KeyExists, ObjectNotFound, StoreError
from .cloud_errors import NoCloudCredentials
from .base import Store, check_key
from .cloud_credentials import check_s3_credentials
from .cloud_errors import explain, family, first_line, no_credentials

SINGLE_PUT_LIMIT = 64 << 20
#: Keys per page of a listing (S3 returns at most 1,000 per request).
LIST_PAGE = 1000
#: Keys per bulk delete (S3's DeleteObjects takes at most 1,000).
DELETE_REQUEST_KEYS = 1000
CLIENT_OPTIONS = {"allow_http", "allow_invalid_certificates", "timeout", "connect_timeout", "proxy_url"}
SCHEMES = ("s3", "s3a", "gs", "az", "azure", "abfs", "abfss")


def _obstore():
    try:
        import obstore
        from obstore import exceptions, store
    except ImportError as err:
        raise ConfigError("open store: cloud stores need obstore; run `pip install 'journal[cloud]'`") from err
    return obstore, exceptions, store


class CloudStore(Store):
    """A bucket (and prefix) reached through obstore.

    ``puts`` and ``put_bytes`` count successful puts.
    """

    def __init__(self, url: str):
        obstore, self._exc, store_mod = _obstore()
        self._ob = obstore
        self.location = url
        self.puts = 0
        self.put_bytes = 0
        self._count_lock = threading.Lock()   # a checkpoint's packs upload at once
        parts = urlsplit(url)
        options = dict(parse_qsl(parts.query))
        client = {k: options.pop(k) for k in list(options) if k in CLIENT_OPTIONS}
        base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        self._unchecked = family(url) == "s3"   # its credentials, before the first request (``_ready``)
        self._options = options
        self._probe_lock = threading.Lock()
        retry = {"max_retries": 5, "backoff": {"init_backoff": _dt.timedelta(milliseconds=100),
                                                 "max_backoff": _dt.timedelta(seconds=5), "base": 2},
                 "retry_timeout": _dt.timedelta(seconds=60)}
        try:
            self._store = store_mod.from_url(base, client_options=client or None, retry_config=retry, **options)
        except Exception as err:  # obstore raises several types for a bad URL or option
            raw = str(err)
            problem = explain(url, raw) or first_line(raw)
            failed = ConfigError(f"open store: {url}: {problem}")
            failed.backend_said = raw
            raise failed from err

    def _ready(self) -> None:
        """Before the first request of an S3 store: ``NoCloudCredentials`` when none can
        come (``cloud_credentials``); again on every request while that holds."""
        if not self._unchecked:
            return
        with self._probe_lock:
            if self._unchecked:
                check_s3_credentials(self.location, self._options, os.environ)
                self._unchecked = False

    def _translate(self, key: str, err: Exception) -> Exception:
        if isinstance(err, (FileNotFoundError, self._exc.NotFoundError)):
            return ObjectNotFound(key)
        if isinstance(err, (self._exc.AlreadyExistsError, self._exc.PreconditionError, FileExistsError)):
            return KeyExists(key)
        raw = str(err)
        cause = explain(self.location, raw)
        if cause is not None and no_credentials(raw):
            return NoCloudCredentials(f"store {self.location}: {cause}", backend_said=raw)
        if cause is not None:
            return StoreError(f"store {self.location}: {cause}", backend_said=raw)
        return StoreError(f"store {self.location}: {key or 'listing'}: {first_line(raw)}", backend_said=raw)

    def put_if_absent(self, key: str, data: bytes | BinaryIO) -> None:
        """Conditional create; ``KeyExists`` when the key is present (the old object stays)."""
        check_key(key)
        self._ready()
        payload = data if isinstance(data, (bytes, bytearray, memoryview)) else _read_upto(data, SINGLE_PUT_LIMIT)
        try:
            if isinstance(payload, (bytes, bytearray, memoryview)):
                self._ob.put(self._store, key, bytes(payload), mode="create", use_multipart=False)
                size = len(payload)
            else:
                if self.head(key) is not None:
                    raise KeyExists(key)
                size = self._put_large(key, payload)
        except KeyExists:
            raise
        except Exception as err:
            raise self._translate(key, err) from err
        with self._count_lock:
            self.puts += 1
            self.put_bytes += size

    def _put_large(self, key: str, stream) -> int:
        total = 0

        def pieces():
            nonlocal total
            while piece := stream.read(8 << 20):
                total += len(piece)
                yield piece
        self._ob.put(self._store, key, pieces(), chunk_size=8 << 20, max_concurrency=4)
        return total

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)``; ``ObjectNotFound`` if missing; a range past the end truncates."""
        check_key(key)
        if start < 0 or (end is not None and end < 0):
            raise ValueError(f"invalid byte range: [{start}, {end})")
        self._ready()
        try:
            if start == 0 and end is None:
                return bytes(self._ob.get(self._store, key).bytes())
            if end is not None and end > start:
                try:  # the common case (a blob inside a pack): one request, no HEAD
                    data = bytes(self._ob.get_range(self._store, key, start=start, end=end))
                    if len(data) == end - start:
                        return data
                except Exception as err:
                    if isinstance(self._translate(key, err), ObjectNotFound):
                        raise ObjectNotFound(key) from err
            size = self.head(key)
            if size is None:
                raise ObjectNotFound(key)
            stop = size if end is None else min(end, size)
            if stop <= start:
                return b""
            return bytes(self._ob.get_range(self._store, key, start=start, end=stop))
        except ObjectNotFound:
            raise
        except Exception as err:
            raise self._translate(key, err) from err

    def head(self, key: str) -> int | None:
        """The object's size, or ``None`` when missing."""
        check_key(key)
        self._ready()
        try:
            return int(self._ob.head(self._store, key)["size"])
        except Exception as err:
            translated = self._translate(key, err)
            if isinstance(translated, ObjectNotFound):
                return None
            raise translated from err

    def list(self, prefix: str = "") -> Iterator[str]:
        """Every key starting with ``prefix``, ascending, streamed page by page.

        S3 (ListObjectsV2), GCS and Azure list keys in ascending UTF-8 byte order, and
        obstore yields the pages in the order it fetched them, so the keys stream as they
        come, in bounded memory. obstore does not promise that order, so it is checked:
        a first page out of order (a backend that lists unordered, such as an S3 Express
        directory bucket) makes this listing collect and sort every key instead; a later
        page out of order raises ``StoreError`` rather than yield a key out of order.
        """
        return (key for key, _ in self._listing(prefix))

    def list_sizes(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` for the keys ``list(prefix)`` yields, as it yields them: the
        size comes in the listing page (each object's metadata), no HEAD per key."""
        return self._listing(prefix)

    def _listing(self, prefix: str) -> Iterator[tuple[str, int]]:
        directory = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        pages = self._pages(prefix, directory)
        first = next(pages, [])
        if any(a[0] >= b[0] for a, b in zip(first, first[1:])):
            yield from sorted(m for page in (first, *pages) for m in page if m[0].startswith(prefix))
            return
        last = None
        for batch in itertools.chain([first], pages):
            for meta in batch:
                key = meta[0]
                if last is not None and key <= last:
                    raise StoreError(f"store {self.location}: listing {directory or '/'} is not in ascending "
                                     f"order ({key!r} after {last!r})")
                last = key
                if key.startswith(prefix):
                    yield meta

    def _pages(self, prefix: str, directory: str) -> Iterator[list[tuple[str, int]]]:
        """``(key, size)`` under ``directory``, one list per page, in the order obstore yields them."""
        self._ready()
        try:
            stream = iter(self._ob.list(self._store, prefix=directory or None, chunk_size=LIST_PAGE))
        except Exception as err:
            raise self._translate(prefix, err) from err
        while True:
            try:
                batch = next(stream, None)
            except Exception as err:
                raise self._translate(prefix, err) from err
            if batch is None:
                return
            yield [(meta["path"], int(meta["size"])) for meta in batch]

    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""
        check_key(key)
        self._ready()
        try:
            self._ob.delete(self._store, key)
        except Exception as err:
            translated = self._translate(key, err)
            if not isinstance(translated, ObjectNotFound):
                raise translated from err

    def delete_many(self, keys: Sequence[str], guard=None) -> list[str]:
        """Remove every key of ``keys`` (missing ones are fine), ``DELETE_REQUEST_KEYS`` per
        request; a failed request is redone key by key, each after ``guard`` (see
        ``Store.delete_many``). Returns the keys ``guard`` kept."""
        keys = [check_key(key) for key in keys]
        self._ready()
        kept: list[str] = []
        for start in range(0, len(keys), DELETE_REQUEST_KEYS):
            batch = keys[start:start + DELETE_REQUEST_KEYS]
            try:
                self._ob.delete(self._store, batch)
            except Exception:  # which key failed is not said: settle the batch key by key
                for key in batch:
                    if guard is not None and not guard(key):
                        kept.append(key)
                        continue
                    self.delete(key)
        return kept


def _read_upto(stream: BinaryIO, limit: int):
    """Bytes when the stream holds at most ``limit``; else a stream that replays what was read."""
    head = bytearray()
    while len(head) <= limit:
        piece = stream.read(COPY_CHUNK)
        if not piece:
            return bytes(head)
        head += piece
    return io.BufferedReader(_Chain(bytes(head), stream))


class _Chain(io.RawIOBase):
    def __init__(self, first: bytes, rest: BinaryIO):
        self._first = memoryview(first)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self._first:
            n = min(len(buf), len(self._first))
            buf[:n] = self._first[:n]
            self._first = self._first[n:]
            return n
        data = self._rest.read(len(buf))
        buf[:len(data)] = data
        return len(data)

"""The input journal's operations: append, list, show, mark delivered (design §20).

**Append** stores one input record at ``inputs/<session dir>/i<seq>`` with put-if-absent
and returns only once the store has it (a local store: written, fsynced, renamed and
its directory fsynced; S3: the conditional PUT answered). The record *is* the sequence
slot: an appender tries the sequence after the newest it knows of (one listing of the
session, or the newest this process saw stored there), and on ``KeyExists`` the next
one, listing the session again after ``RELIST`` misses in a row. The record names its
sequence (design §20: a copy at another key is refused), so it is encoded for each
sequence tried; after a miss, a HEAD finds a taken sequence before anything is
written there. It only ever tries ``s`` once ``s - 1``
is known to be stored (listed, stored by itself, or taken by another), so every
stored input's predecessors were stored before it: once every append has returned,
a listing shows no gap (gc's expiries aside).

**A client id** makes an append idempotent. Before its input, the appender writes a
*claim*, ``c<sha256(client id)>``, put-if-absent, naming ``after``: the newest sequence
it knows of, below which its input cannot land. An append that finds the claim taken
is a retry: it reads the inputs above ``after`` in order and answers with the first
one carrying its client id, storing nothing; when that input's text is not the one
given, the client id was reused for another prompt, which is refused
(``ClientIdReused``, exit 2), nothing stored. Finding none, the attempt that wrote the
claim stopped before its input (killed, or failed), and this one stores it in its place.

Within one process, appends of one client id in one session take turns (a lock each),
so a server never takes its own claim for a dead attempt's. A retry in another process
that finds the claim but not yet its input waits while the claiming attempt may still
run (its process alive on this host; a claim younger than ``CLAIM_WAIT`` from another
host), up to ``CLAIM_WAIT``. Everything else races through the store's put-if-absent,
within a process as between processes.
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
import time
from collections.abc import Callable, Iterator

import msgspec

from ..config import DEFAULT_INPUT_LIMIT
from ..errors import CorruptObject, KeyExists, ObjectNotFound, ids_apart
from .errors import ClientIdReused, InputBusy, InputNotFound, InputTooLarge
from ..format.inputs import (DELIVERY_LETTER, INPUT_LETTER, MAX_SEQ, Claim, Delivery, InputHead, check_names,
                             claim_key, decode_claim, decode_delivery, decode_input, delivery_key, encode_claim,
                             encode_delivery, encode_input, input_id, input_key, parse_id, parse_key, session_dir,
                             session_prefix)
from ..report import SILENT, Reporter
from ..repository.lineage import open_repository, refuse_downgrade
from ..repository.repository import Repository
from ..store import open_store

#: Sequence numbers found taken in a row before the session is listed again.
RELIST = 8
#: Sequence numbers one append tries at most.
MAX_TRIES = 1000
#: Seconds a retry waits for the input of a claim whose attempt may still be running.
CLAIM_WAIT = 10.0


class Appended(msgspec.Struct, kw_only=True):
    """What ``append`` stored, or found stored (``duplicate``: a retry of that client id)."""

    id: str
    seq: int
    harness: str
    session: str
    sha256: str
    duplicate: bool = False


class InputInfo(msgspec.Struct, kw_only=True):
    """One stored input, as ``list`` and ``show`` describe it."""

    id: str
    seq: int
    harness: str
    session: str
    pane: str | None
    client_id: str | None
    submitted: str
    submitted_ns: int
    size: int
    sha256: str
    delivered: bool                     # the marker at its sequence names this record
    delivered_at: str | None = None


class Delivered(msgspec.Struct, kw_only=True):
    """What ``mark_delivered`` did: the marker it wrote, or found (``already``)."""

    id: str
    seq: int
    delivered_at: str
    already: bool = False


def utc(ns: int) -> str:
    when = _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def open_log(cfg, store=None, *, create: bool = False, reporter: Reporter = SILENT) -> "InputLog":
    """The input journal of ``cfg``'s store. ``create`` (an append) creates an absent store
    as a checkpoint would (never where this machine's store vanished); reading needs one."""
    store = store or open_store(cfg.store)
    if create:
        repo = open_repository(store, cfg.state_dir, create=True, key=cfg.key)
    else:
        repo = Repository.open(store, key=cfg.key)
        refuse_downgrade(repo, cfg.state_dir)  # `input delivered` writes a marker: never in the clear (§22)
    return InputLog(repo, limit=cfg.input_limit, reporter=reporter)


class InputLog:
    """The inputs of one store. Thread-safe: the socket server shares one between clients."""

    def __init__(self, repo: Repository, *, limit: int = DEFAULT_INPUT_LIMIT, reporter: Reporter = SILENT,
                 clock: Callable[[], int] = time.time_ns):
        self.repo = repo
        self.store = repo.store
        self.codec = repo.codec
        self.limit = limit
        self.reporter = reporter
        self.clock = clock
        self.host = os.uname().nodename[:256]
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], tuple[threading.Lock, int]] = {}
        self._newest: dict[str, int] = {}   # session dir -> the newest sequence this process knows is stored

    # ------------------------------------------------------------------ append

    def append(self, harness: str, session: str, text: bytes, *, pane: str | None = None,
               client_id: str | None = None) -> Appended:
        """Store one input durably and return its id and sequence (see the module
        docstring). ``InputTooLarge`` (a ``ConfigError``) over the limit, with nothing
        stored; ``ConfigError`` for a name an input cannot carry."""
        check_names(harness, session, pane, client_id)
        text = bytes(text)
        if len(text) > self.limit:
            raise InputTooLarge(len(text), self.limit)
        sdir = session_dir(harness, session, self.codec)
        if client_id is None:
            return self._store(sdir, harness, session, pane, client_id, text)
        with self._client_lock(sdir, client_id):
            return self._claim(sdir, client_id, text) or self._store(sdir, harness, session, pane, client_id, text)

    def _client_lock(self, sdir: str, client_id: str):
        """One lock per session and client id while an append of it runs (dropped after)."""
        with self._guard:
            lock, users = self._locks.get((sdir, client_id), (threading.Lock(), 0))
            self._locks[(sdir, client_id)] = (lock, users + 1)
        return _Held(self, (sdir, client_id), lock)

    def _release(self, name: tuple[str, str]) -> None:
        with self._guard:
            lock, users = self._locks[name]
            if users == 1:
                del self._locks[name]
            else:
                self._locks[name] = (lock, users - 1)

    def _claim(self, sdir: str, client_id: str, text: bytes) -> Appended | None:
        """Take ``client_id`` in the session (None: go on and store the input), or find
        the input an earlier attempt stored for it (``ClientIdReused`` when its text is
        not ``text``)."""
        key = claim_key(sdir, client_id, self.codec)
        now = self.clock()
        claim = Claim(client_id=client_id, after=self._known(sdir), created=utc(now), created_ns=now,
                      host=self.host, pid=os.getpid())
        try:
            self.store.put_if_absent(key, encode_claim(claim, self.codec))
            return None
        except KeyExists:
            pass
        try:
            taken = decode_claim(self.store.get(key), key, self.codec)
        except ObjectNotFound:   # gc expired it meanwhile, with its input
            return self._first_with(sdir, client_id, 0, text)
        except CorruptObject as err:
            self.reporter.warn(f"append input: {err}; looking through the whole session for client id {client_id!r}")
            return self._first_with(sdir, client_id, 0, text)
        if taken.client_id != client_id:
            return self._first_with(sdir, client_id, 0, text)
        return self._stored_by(sdir, client_id, taken, text)

    def _stored_by(self, sdir: str, client_id: str, taken: Claim, text: bytes) -> Appended | None:
        """The input the attempt that wrote ``taken`` stored. While that attempt may still
        be running (``_may_run``), it is waited for, up to ``CLAIM_WAIT`` seconds: a retry
        that arrives while the first attempt is still uploading answers with its input
        instead of storing the prompt a second time. None: that attempt stored nothing."""
        found = self._first_with(sdir, client_id, taken.after, text)
        if found is not None or not self._may_run(taken):
            return found
        self.reporter.warn(f"append input: client id {client_id!r} was claimed by pid {taken.pid} on {taken.host}, "
                           f"whose input is not stored yet; waiting up to {CLAIM_WAIT:g} s for it")
        deadline, pause = time.monotonic() + CLAIM_WAIT, 0.02
        while found is None and time.monotonic() < deadline and self._may_run(taken):
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
            found = self._first_with(sdir, client_id, taken.after, text)
        return found or self._first_with(sdir, client_id, taken.after, text)

    def _may_run(self, taken: Claim) -> bool:
        """Whether the attempt that wrote ``taken`` may still be storing its input: on
        this host, while its process lives (another process of this one's failed, as the
        per-client lock serialises them); from another host, while the claim is younger
        than ``CLAIM_WAIT`` by this host's clock."""
        if taken.host != self.host:
            return self.clock() - taken.created_ns < CLAIM_WAIT * 1e9
        if taken.pid == os.getpid():
            return False
        try:
            os.kill(taken.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:   # alive, another user's
            return True
        return True

    def _first_with(self, sdir: str, client_id: str, after: int, text: bytes) -> Appended | None:
        """The first input above ``after`` that carries ``client_id``, or None;
        ``ClientIdReused`` when its text is not ``text`` (a retry sends the same text)."""
        for seq in self._seqs(sdir, after):
            key = input_key(sdir, seq)
            try:
                head, stored, rid = decode_input(self.store.get(key), key, self.codec)
            except ObjectNotFound:
                continue
            except CorruptObject as err:
                self.reporter.warn(f"append input: skipping {err}")
                continue
            if head.client_id == client_id:
                if bytes(stored) != text:
                    raise ClientIdReused(client_id, input_id(sdir, seq))
                return Appended(id=input_id(sdir, seq), seq=seq, harness=head.harness, session=head.session,
                                sha256=rid, duplicate=True)
        return None

    def _store(self, sdir: str, harness: str, session: str, pane: str | None, client_id: str | None,
               text: bytes) -> Appended:
        """Put the input at the first free sequence after the newest known one. Its
        record names the sequence, so each sequence tried gets its own encoding; after
        the first miss a HEAD skips a taken sequence without writing there."""
        now = self.clock()
        head = InputHead(harness=harness, session=session, pane=pane, client_id=client_id, submitted=utc(now),
                         submitted_ns=now, size=len(text), host=self.host)
        for tried, seq in enumerate(self._slots(sdir)):
            key = input_key(sdir, seq)
            if tried and self.store.exists(key):
                continue
            rid, record = encode_input(msgspec.structs.replace(head, seq=seq), text, self.codec)
            try:
                self.store.put_if_absent(key, record)
            except KeyExists:
                continue
            with self._guard:
                self._newest[sdir] = max(self._newest.get(sdir, 0), seq)
            return Appended(id=input_id(sdir, seq), seq=seq, harness=harness, session=session, sha256=rid)
        raise InputBusy(sdir, MAX_TRIES)

    def _slots(self, sdir: str) -> Iterator[int]:
        """The sequences an append tries, each only once the one before is known stored:
        the one after the newest known, then after each miss the next one, or further
        when this process stored further meanwhile; every ``RELIST`` misses, past the
        newest a listing shows (other processes are appending)."""
        seq = self._known(sdir) + 1
        for misses in range(1, MAX_TRIES + 1):
            if seq > MAX_SEQ:
                return
            yield seq   # resumed: ``seq`` is taken, so stored
            listed = self._listed(sdir) if misses % RELIST == 0 else 0
            with self._guard:
                known = self._newest[sdir] = max(self._newest.get(sdir, 0), seq, listed)
            seq = known + 1

    def _known(self, sdir: str) -> int:
        """The newest sequence this process knows to be stored in the session, else the
        listing's (0: none). A known one whose input is gone (gc expired it: it keeps a
        session's newest only) is no longer a start: the slots after it may be ones gc
        freed, below inputs others stored since (one HEAD; then the listing)."""
        with self._guard:
            known = self._newest.get(sdir)
        if known and not self.store.exists(input_key(sdir, known)):
            known = None
        if known is None:
            known = self._listed(sdir)
            with self._guard:
                self._newest[sdir] = max(self._newest.get(sdir, 0), known)
        return known

    def _listed(self, sdir: str) -> int:
        seqs = self._seqs(sdir, 0)
        return seqs[-1] if seqs else 0

    def _seqs(self, sdir: str, after: int) -> list[int]:
        """The stored inputs' sequences above ``after``, ascending (one listing)."""
        found = []
        for key in self.store.list(f"{session_prefix()}{sdir}/{INPUT_LETTER}"):
            parsed = parse_key(key)
            if parsed is not None and parsed[1] == INPUT_LETTER and parsed[2] > after:
                found.append(parsed[2])
        return found

    # ------------------------------------------------------------------ read

    def list(self, *, harness: str | None = None, session: str | None = None, since_ns: int | None = None,
             undelivered: bool = False) -> Iterator[InputInfo]:
        """Every stored input (or one harness's, or one session's), by session then
        sequence, each read and verified; a damaged one is skipped with a warning. An
        input is delivered only when the marker at its sequence names its record
        (``_delivery``), so a delivered one is read with its marker, an undelivered
        one alone."""
        current, marked = None, set()
        for key in self.store.list(session_prefix(harness, session, self.codec)):
            parsed = parse_key(key)
            if parsed is None:
                continue
            sdir, letter, seq = parsed
            if sdir != current:   # a directory lists its markers before its inputs
                current, marked = sdir, set()
            if letter == DELIVERY_LETTER:
                marked.add(seq)
            if letter != INPUT_LETTER:
                continue
            try:
                head, _text, rid = decode_input(self.store.get(key), key, self.codec)
            except ObjectNotFound:   # gc expired it since the listing
                continue
            except CorruptObject as err:
                self.reporter.warn(f"list inputs: skipping {err}; `journal verify --full` lists every damaged object")
                continue
            marker = self._delivery(sdir, seq, rid, "list inputs") if seq in marked else None
            if not (undelivered and marker) and (since_ns is None or head.submitted_ns >= since_ns):
                yield _info(sdir, seq, head, rid, marker)

    def show(self, text_id: str) -> tuple[InputInfo, bytes]:
        """One input, verified, and its text byte for byte."""
        sdir, seq = parse_id(text_id)
        head, text, rid = self._read(text_id, sdir, seq)
        return _info(sdir, seq, head, rid, self._delivery(sdir, seq, rid, "show input")), text

    def _read(self, text_id: str, sdir: str, seq: int) -> tuple[InputHead, bytes, str]:
        key = input_key(sdir, seq)
        try:
            return decode_input(self.store.get(key), key, self.codec)
        except ObjectNotFound:
            raise InputNotFound(text_id, key) from None

    def _delivery(self, sdir: str, seq: int, rid: str, doing: str) -> Delivery | None:
        """The delivery marker of input ``seq`` (record ``rid``), or None: none stored,
        or one that is damaged or names another record (the input it marked was lost and
        its sequence taken again), which is ignored with a warning: the input reads as
        undelivered, to be delivered again rather than never."""
        key = delivery_key(sdir, seq)
        try:
            marker = decode_delivery(self.store.get(key), key, self.codec)
        except ObjectNotFound:
            return None
        except CorruptObject as err:
            self.reporter.warn(f"{doing}: ignoring {err}; `journal verify --full` lists every damaged object")
            return None
        if marker.input != rid:
            self.reporter.warn(f"{doing}: ignoring the delivery marker {key}: {_stale(marker, rid)}")
            return None
        return marker

    # ------------------------------------------------------------------ deliver

    def mark_delivered(self, text_id: str) -> Delivered:
        """Record that input ``text_id`` was delivered: a marker, put-if-absent, naming the
        input record it read and verified. Marking it again changes nothing (``already``).
        A marker found there that names another record is stale (``_delivery``): it is
        replaced, with a warning."""
        sdir, seq = parse_id(text_id)
        head, _text, rid = self._read(text_id, sdir, seq)
        now = self.clock()
        marker = Delivery(input=rid, seq=seq, client_id=head.client_id, submitted_ns=head.submitted_ns,
                          delivered=utc(now), delivered_ns=now, host=self.host)
        key = delivery_key(sdir, seq)
        for _ in range(2):
            try:
                self.store.put_if_absent(key, encode_delivery(marker, self.codec))
                return Delivered(id=input_id(sdir, seq), seq=seq, delivered_at=marker.delivered)
            except KeyExists:
                pass
            try:
                existing = decode_delivery(self.store.get(key), key, self.codec)
            except ObjectNotFound:   # gc expired it since the put: the input goes with it
                raise InputNotFound(text_id, input_key(sdir, seq)) from None
            if existing.input == rid:
                return Delivered(id=input_id(sdir, seq), seq=seq, delivered_at=existing.delivered, already=True)
            self.reporter.warn(f"mark delivered: replacing the delivery marker {key}: {_stale(existing, rid)}")
            self.store.delete(key)
        raise CorruptObject(key, f"delivery marker {_stale(existing, rid)}, again after it was replaced")


class _Held:
    """``with``: hold one of ``InputLog``'s client-id locks."""

    def __init__(self, log: InputLog, name: tuple[str, str], lock: threading.Lock):
        self.log, self.name, self.lock = log, name, lock

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *exc) -> None:
        self.lock.release()
        self.log._release(self.name)


def _stale(marker: Delivery, rid: str) -> str:
    said, held = ids_apart(marker.input, rid)
    return (f"it names input record {said}, the input at #{marker.seq} is {held} (the input it "
            "marked was lost and its sequence taken again)")


def _info(sdir: str, seq: int, head: InputHead, rid: str, marker: Delivery | None) -> InputInfo:
    return InputInfo(id=input_id(sdir, seq), seq=seq, harness=head.harness, session=head.session,
                     pane=head.pane, client_id=head.client_id, submitted=head.submitted,
                     submitted_ns=head.submitted_ns, size=head.size, sha256=rid, delivered=marker is not None,
                     delivered_at=marker.delivered if marker is not None else None)

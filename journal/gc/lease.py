"""A lease object in the store: one gc at a time, across machines.

``leases/gc`` holds who took it and when it expires. It is taken with
put-if-absent; a lease past its expiry is deleted and taken over (put-if-absent
again, so of two takers exactly one wins). A gc checks that its lease is still its
own and unexpired before each tombstone it writes and before each deletion request
(a batch of at most ``journal.gc.run.DELETE_BATCH`` keys).

A gc runs longer than one lease on a big store, so the holder renews it: once less
than half of it is left (``keep``, called often, costs a clock read until then), it
re-reads the record, and if it is its own with more than a quarter left, deletes it
and puts a new one with a fresh expiry. The store has no conditional overwrite, so
the renewal relies on timing: the delete must complete while more than a quarter of
the lease is left, before any other gc may judge the lease expired, so what it deleted
was this gc's own record; the put is put-if-absent, so a gc that took the empty key
in between wins and this one stops (``LeaseLost``). A renewal that cannot keep to
those times is not attempted: the gc stops, and the next run continues the work
(``docs/design.md`` §16). The holder releases the lease by deleting it after
checking it is still its own, with more than a quarter left; else it lets it expire.
In an encrypted store the record is sealed (it names a host); one that does not open
is unreadable, as a torn one is.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
import uuid
from collections.abc import Callable

import msgspec

from ..errors import CorruptObject, JournalError, KeyExists, ObjectNotFound
from .errors import GcBusy
from ..format.codec import LEASE, PLAIN, Codec
from ..format.model import Count, Text
from ..repository.repository import LEASE_KEY, LEASE_SECONDS, RENEWING_KEY
from ..store.base import Store

#: The holder renews its lease once less than this share of it is left...
RENEW_BELOW = 0.5
#: ...and deletes it (to renew or release it) only while more than this share is left.
SAFE_LEFT = 0.25


class LeaseRecord(msgspec.Struct, frozen=True, kw_only=True):
    holder: Text
    token: Text
    acquired_ns: Count
    expires_ns: Count


class LeaseLost(GcBusy):
    """This gc no longer holds the lease (it ran out, or another gc took it): it stops
    before changing anything more; what it did stands, and the next run continues."""

    def __init__(self, why: str, current: LeaseRecord | None):
        self.holder = current.holder if current else "nobody"
        self.expires = _iso(current.expires_ns) if current else "-"
        now = f"held by {self.holder} until {self.expires}" if current else "free"
        JournalError.__init__(self, f"gc: {why} (the lease is now {now}); gc stopped there, and what it "
                                    "did stands: run gc again to continue")


def _decode(raw: bytes, codec: Codec = PLAIN) -> LeaseRecord | None:
    """The lease record, or None when the bytes are not one (a torn or foreign write)."""
    try:
        return msgspec.json.decode(codec.open(raw, LEASE, LEASE_KEY), type=LeaseRecord)
    except (msgspec.DecodeError, msgspec.ValidationError, CorruptObject):
        return None


def _iso(ns: int) -> str:
    return _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc).isoformat(timespec="seconds")


class Lease:
    """The gc lease, held for one gc run (a context manager). ``renewals`` counts renewals.

    ``clock`` is the wall clock in nanoseconds since the epoch (``time.time_ns``; tests
    drive a fake one): every expiry is judged by it, and every record written stamped.
    ``codec`` is the store's: it seals the record in an encrypted store.
    """

    def __init__(self, store: Store, seconds: float = LEASE_SECONDS, clock: Callable[[], int] = time.time_ns,
                 codec: Codec = PLAIN):
        self.store = store
        self.codec = codec
        self.seconds = seconds
        self.clock = clock
        self.record: LeaseRecord | None = None
        self.renewals = 0

    def __enter__(self) -> "Lease":
        now = self.clock()
        mine = LeaseRecord(holder=f"host {os.uname().nodename} pid {os.getpid()}", token=uuid.uuid4().hex,
                           acquired_ns=now, expires_ns=now + self._ns(1.0))
        for _ in range(3):
            try:
                self.store.put_if_absent(LEASE_KEY, self.codec.seal(msgspec.json.encode(mine), LEASE))
            except KeyExists:
                raw = self._raw()
                if raw is None:
                    continue  # gone since the put: released, or its holder is renewing it; put again
                other = _decode(raw, self.codec)
                if other is not None and other.expires_ns > self.clock():
                    raise GcBusy(other.holder, _iso(other.expires_ns)) from None
                # Expired (or unreadable): take it over, but delete only the very record
                # judged expired; a taker that got there first has put a live one. (An
                # absent key is never deleted: a renewing holder's new record may land
                # between that read and the delete.)
                if self._raw() == raw:
                    self.store.delete(LEASE_KEY)
                continue
            current = self._read()
            if current is not None and current.token == mine.token:
                self.record = mine
                # A renewal marker left now is stale: its gc crashed mid-renewal, or is
                # in the gap we took the key in, and stops at its put (``renew``).
                self.store.delete(RENEWING_KEY)
                return self
        other = self._read()
        raise GcBusy(other.holder if other else "unknown", _iso(other.expires_ns) if other else "unknown")

    def _ns(self, share: float) -> int:
        """``share`` of the lease, in nanoseconds."""
        return int(self.seconds * share * 1e9)

    def _raw(self) -> bytes | None:
        try:
            return self.store.get(LEASE_KEY)
        except ObjectNotFound:
            return None

    def _read(self) -> LeaseRecord | None:
        raw = self._raw()
        return None if raw is None else _decode(raw, self.codec)

    def _mine(self) -> LeaseRecord:
        """The lease record, if it is still ours and unexpired; else ``LeaseLost``."""
        current = self._read()
        if current is None or current.token != self.record.token:
            raise LeaseLost("this gc lost its lease", current)
        if current.expires_ns <= self.clock():
            raise LeaseLost("this gc's lease expired", current)
        return current

    def check(self) -> None:
        """Raise ``LeaseLost`` (a ``GcBusy``) unless the lease is still ours and unexpired;
        renew it when it is due."""
        self._mine()
        self.keep()

    def keep(self) -> None:
        """Renew the lease once less than half of it is left; until then only reads the clock."""
        if self.clock() >= self.record.expires_ns - self._ns(RENEW_BELOW):
            self.renew()

    def renew(self) -> None:
        """Replace our lease record by one expiring a whole lease from now, or raise ``LeaseLost``.

        Delete, then put-if-absent: the delete removes our own record only if it lands
        before anyone may judge it expired, so it must complete with more than
        ``SAFE_LEFT`` of the lease left; a gc that takes the key in between wins. The
        renewal marker (``RENEWING_KEY``) is put before the delete and deleted after the
        put, so a checkpoint looking for a running gc (``checkpoint/recheck.py``) never
        finds both keys absent while this gc runs; one left by a failed renewal only
        makes checkpoints more careful until the next gc takes the lease.
        """
        current = self._mine()
        if current.expires_ns - self.clock() <= self._ns(SAFE_LEFT):
            raise LeaseLost("lease time used up before gc could renew it safely", current)
        self._mark_renewing(current)
        self.store.delete(LEASE_KEY)
        if current.expires_ns - self.clock() <= self._ns(SAFE_LEFT):
            raise LeaseLost("lease time used up while gc renewed it", self._read())
        now = self.clock()
        renewed = msgspec.structs.replace(current, expires_ns=now + self._ns(1.0))
        try:
            self.store.put_if_absent(LEASE_KEY, self.codec.seal(msgspec.json.encode(renewed), LEASE))
        except KeyExists:
            raise LeaseLost("another gc took the lease while this one renewed it", self._read()) from None
        self.store.delete(RENEWING_KEY)
        self.record = renewed
        self.renewals += 1

    def _mark_renewing(self, current: LeaseRecord) -> None:
        """Put the renewal marker. One already there is stale (we hold the lease, so no
        other gc renews): it is replaced."""
        data = self.codec.seal(msgspec.json.encode(current), LEASE)
        try:
            self.store.put_if_absent(RENEWING_KEY, data)
        except KeyExists:
            self.store.delete(RENEWING_KEY)
            try:
                self.store.put_if_absent(RENEWING_KEY, data)
            except KeyExists:
                raise LeaseLost("another gc is renewing a lease while this one holds it", self._read()) from None

    def __exit__(self, *exc) -> None:
        current = self._read()
        if (current is not None and self.record is not None and current.token == self.record.token
                and current.expires_ns - self.clock() > self._ns(SAFE_LEFT)):
            self.store.delete(LEASE_KEY)

"""A lease object in the store: one gc at a time, across machines.

``leases/gc`` holds who took it and when it expires. It is taken with
put-if-absent; a lease past its expiry is deleted and taken over (put-if-absent
again, so of two takers exactly one wins). The holder releases it by deleting it
after checking it is still its own. A gc checks that its lease is still its own
and unexpired before each tombstone it writes, before its first deletion and every
``journal.gc.LEASE_CHECK_EVERY`` (32) deletions after it.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import time
import uuid

import msgspec

from .errors import GcBusy, KeyExists, ObjectNotFound
from .store.base import Store

LEASE_KEY = "leases/gc"
LEASE_SECONDS = 15 * 60


class LeaseRecord(msgspec.Struct, frozen=True, kw_only=True):
    holder: str
    token: str
    acquired_ns: int
    expires_ns: int


def _iso(ns: int) -> str:
    return _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc).isoformat(timespec="seconds")


class Lease:
    """The gc lease, held for one gc run (a context manager)."""

    def __init__(self, store: Store, seconds: float = LEASE_SECONDS):
        self.store = store
        self.seconds = seconds
        self.record: LeaseRecord | None = None

    def __enter__(self) -> "Lease":
        now = time.time_ns()
        mine = LeaseRecord(holder=f"host {socket.gethostname()} pid {os.getpid()}", token=uuid.uuid4().hex,
                           acquired_ns=now, expires_ns=now + int(self.seconds * 1e9))
        for _ in range(2):
            try:
                self.store.put_if_absent(LEASE_KEY, msgspec.json.encode(mine))
            except KeyExists:
                other = self._read()
                if other is not None and other.expires_ns > time.time_ns():
                    raise GcBusy(other.holder, _iso(other.expires_ns)) from None
                # Expired (or unreadable): take it over, but delete only the record we
                # judged expired; a taker that got there first has put a live one.
                again = self._read()
                if again == other:
                    self.store.delete(LEASE_KEY)
                continue
            current = self._read()
            if current is not None and current.token == mine.token:
                self.record = mine
                return self
        other = self._read()
        raise GcBusy(other.holder if other else "unknown", _iso(other.expires_ns) if other else "unknown")

    def _read(self) -> LeaseRecord | None:
        try:
            return msgspec.json.decode(self.store.get(LEASE_KEY), type=LeaseRecord)
        except (ObjectNotFound, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def check(self) -> None:
        """Raise GcBusy if our lease expired (another gc may have taken over)."""
        current = self._read()
        if current is None or current.token != self.record.token or current.expires_ns <= time.time_ns():
            holder = current.holder if current else "nobody"
            raise GcBusy(f"lease lost; now held by {holder}", _iso(current.expires_ns) if current else "-")

    def __exit__(self, *exc) -> None:
        current = self._read()
        if current is not None and self.record is not None and current.token == self.record.token:
            self.store.delete(LEASE_KEY)

"""The gc lease: renewal with short leases on a fake clock (design §16, "Lease").

A holder renews once less than half of its lease is left, by deleting its record and
putting a new one, and only while more than a quarter is left; whatever goes wrong
in between, at most one gc believes it holds the lease. Time passes only where a test
moves the clock, so a stalled machine changes nothing.
"""

from __future__ import annotations

import time

import msgspec
import pytest

from conftest import run_on_crafted
from journal.errors import KeyExists
from journal.gc.errors import GcBusy
from journal.checkpoint.recheck import gc_running
from journal.gc.lease import LEASE_KEY, Lease, LeaseLost, LeaseRecord
from journal.repository.repository import RENEWING_KEY
from journal.store.memory import MemoryStore

from conftest import FakeClock


class OnDelete(MemoryStore):
    """A memory store that calls ``hook(key)`` after each delete."""

    def __init__(self, hook):
        super().__init__()
        self.hook = hook

    def delete(self, key):
        super().delete(key)
        self.hook(key)


def stored(store) -> LeaseRecord:
    return msgspec.json.decode(store.get(LEASE_KEY), type=LeaseRecord)


def test_a_lease_is_renewed_once_half_of_it_is_left_and_outlives_its_first_expiry():
    store, clock = MemoryStore(), FakeClock()
    with Lease(store, seconds=1.0, clock=clock) as lease:
        first = lease.record
        clock.advance(0.45)
        lease.keep()
        lease.check()
        assert lease.renewals == 0 and stored(store) == first and store.puts == 1  # not due: nothing written

        clock.advance(0.1)
        lease.keep()
        assert lease.renewals == 1
        renewed = stored(store)
        assert renewed == lease.record and renewed.token == first.token
        assert renewed.expires_ns == first.expires_ns + 550_000_000
        with pytest.raises(GcBusy):
            Lease(store, clock=clock).__enter__()

        clock.advance(0.5)  # past the first expiry
        lease.check()
    assert store.head(LEASE_KEY) is None  # released


def test_a_renewal_too_close_to_expiry_stops_the_gc_and_lets_the_lease_expire():
    store, clock = MemoryStore(), FakeClock()
    lease = Lease(store, seconds=0.4, clock=clock).__enter__()
    raw = store.get(LEASE_KEY)
    clock.advance(0.32)  # less than a quarter left: another gc may judge it expired before a delete lands

    with pytest.raises(LeaseLost, match="run gc again to continue"):
        lease.keep()
    assert store.get(LEASE_KEY) == raw  # neither deleted nor renewed
    lease.__exit__(None, None, None)
    assert store.get(LEASE_KEY) == raw  # nor released

    clock.advance(0.1)
    with Lease(store, clock=clock) as taker:  # expired: the next gc takes it over
        assert stored(store).token == taker.record.token


def test_a_gc_that_takes_the_key_during_a_renewal_holds_the_lease_alone():
    competitor: list[Lease] = []
    clock = FakeClock()

    def take(key):
        if key == LEASE_KEY and not competitor:
            competitor.append(Lease(store, clock=clock).__enter__())  # between the renewal's delete and its put

    store = OnDelete(take)
    lease = Lease(store, seconds=1.0, clock=clock).__enter__()
    clock.advance(0.55)

    with pytest.raises(LeaseLost, match="another gc took the lease"):
        lease.keep()
    (other,) = competitor
    other.check()
    with pytest.raises(GcBusy):
        lease.check()
    lease.__exit__(None, None, None)
    assert stored(store).token == other.record.token  # the loser released nothing


def test_a_renewal_whose_delete_answers_late_puts_no_new_record():
    clock = FakeClock()
    store = OnDelete(lambda key: key == LEASE_KEY and clock.advance(0.35))  # the delete's answer comes late
    lease = Lease(store, seconds=1.0, clock=clock).__enter__()
    clock.advance(0.55)

    with pytest.raises(LeaseLost, match="while gc renewed it"):
        lease.keep()
    assert store.head(LEASE_KEY) is None  # its own record went, no new one came: nobody holds it
    with Lease(store, clock=clock) as taker:
        taker.check()


def test_a_lease_taken_over_is_neither_renewed_nor_released():
    store, clock = MemoryStore(), FakeClock()
    lease = Lease(store, seconds=1.0, clock=clock).__enter__()
    store.delete(LEASE_KEY)  # as a taker that judged it expired would

    with Lease(store, clock=clock) as other:
        with pytest.raises(LeaseLost, match="lost its lease"):
            lease.check()
        clock.advance(0.55)
        with pytest.raises(LeaseLost, match="lost its lease"):
            lease.keep()  # due: the renewal reads the record first
        lease.__exit__(None, None, None)
        other.check()
        assert stored(store) == other.record


def test_a_taker_that_finds_the_key_gone_never_deletes_a_renewed_record():
    """The holder renews (delete, then put) while another gc starts: the other gc's put
    meets the old record, its reads find the key gone (the renewal's delete), and the
    renewal's put lands just after. Whoever's record is stored must be the only one
    that believes it holds the lease: a taker that read the key as absent must never
    delete the renewed record and take the lease beside it."""
    class Interleaved(MemoryStore):
        def __init__(self):
            super().__init__()
            self.script: list = []   # actions run before the next store calls, one per call

        def _step(self):
            if self.script:
                self.script.pop(0)()

        def put_if_absent(self, key, data):
            self._step()
            return super().put_if_absent(key, data)

        def get(self, key):
            self._step()
            return super().get(key)

        def delete(self, key):
            self._step()
            return super().delete(key)

    store = Interleaved()
    holder = Lease(store, seconds=60).__enter__()
    renewed = LeaseRecord(holder="the holder", token=holder.record.token, acquired_ns=holder.record.acquired_ns,
                          expires_ns=time.time_ns() + 60 * 10**9)
    renewal_put: list[bool] = []

    def renewal_puts():
        try:
            MemoryStore.put_if_absent(store, LEASE_KEY, msgspec.json.encode(renewed))
            renewal_put.append(True)
        except KeyExists:
            renewal_put.append(False)   # another gc got the key first: the holder knows it lost

    store.script = [lambda: None,                                  # the taker's put meets the old record
                    lambda: MemoryStore.delete(store, LEASE_KEY),  # the renewal's delete
                    lambda: None,
                    renewal_puts]                                  # the renewal's put
    try:
        taker = Lease(store, seconds=60).__enter__()
    except GcBusy:
        taker = None
    holders = ([holder.record.token] if renewal_put == [True] else []) + ([taker.record.token] if taker else [])
    assert holders == [stored(store).token], (renewal_put, taker)


@pytest.mark.parametrize("fields", [{"expires_ns": 1 << 70}, {"holder": "a\nforged: line"}])
def test_a_crafted_lease_record_is_unreadable_and_taken_over(live, fields):
    """A lease that expires past any clock ended gc in a traceback (its expiry does not
    fit a date); a holder with a line break made a two-line error. Either is a record
    no gc wrote: unreadable, so it is taken over like a torn one."""
    live.checkpoint()
    now = time.time_ns()
    record = LeaseRecord(holder="elsewhere", token="t", acquired_ns=now, expires_ns=now + 60 * 10**9)
    live.store.put_if_absent(LEASE_KEY, msgspec.json.encode(msgspec.structs.replace(record, **fields)))

    proc = run_on_crafted(live, "gc", "--keep-last", "1")

    assert proc.returncode == 0, proc.stderr
    assert live.store.head(LEASE_KEY) is None  # taken over, then released


# --------------------------------------------------------------------------- the renewal marker

def test_a_renewal_is_never_a_moment_with_no_gc_to_see():
    """A renewal deletes the lease and puts it again; a checkpoint looking for a running
    gc (``gc_running``) in between must still see one: the marker is put before the
    delete and deleted after the put."""
    clock = FakeClock()
    seen: list[bool] = []
    store = OnDelete(lambda key: key == LEASE_KEY and seen.append(gc_running(store)))
    with Lease(store, seconds=1.0, clock=clock) as lease:
        clock.advance(0.55)
        lease.keep()
        assert lease.renewals == 1 and seen == [True]  # in the gap: the lease was gone, the marker there
        assert store.head(RENEWING_KEY) is None and gc_running(store)
    assert not gc_running(store)


class Renewing(MemoryStore):
    """A store in which a gc's renewal runs between a checkpoint's looks: its lease is
    deleted (the marker put) as the first look is answered, and put back (the marker
    deleted) as the second one is."""

    def __init__(self):
        super().__init__()
        self.looks: list[str] = []

    def head(self, key):
        self.looks.append(key)
        if len(self.looks) == 1:
            self.put_if_absent(RENEWING_KEY, b"{}")
            super().delete(LEASE_KEY)
        elif len(self.looks) == 2:
            self.put_if_absent(LEASE_KEY, b"{}")
            super().delete(RENEWING_KEY)
        return super().head(key)


def test_a_renewal_that_ends_between_two_looks_is_seen_by_the_third():
    store = Renewing()
    store.put_if_absent(LEASE_KEY, b"{}")
    assert gc_running(store)
    assert store.looks == [LEASE_KEY, RENEWING_KEY, LEASE_KEY]  # absent, absent, back


def test_a_renewal_marker_left_by_a_crashed_renewal_counts_as_a_gc_until_the_next_gc_takes_the_lease():
    store, clock = MemoryStore(), FakeClock()
    store.put_if_absent(RENEWING_KEY, b"{}")  # its gc died between the marker and the new lease
    assert gc_running(store)  # careful, not wrong: the checkpoint keeps its copies longer
    with Lease(store, seconds=1.0, clock=clock) as lease:
        assert store.head(RENEWING_KEY) is None
        store.put_if_absent(RENEWING_KEY, b"{}")  # (or left again): the renewal replaces it
        clock.advance(0.55)
        lease.keep()
        assert lease.renewals == 1 and store.head(RENEWING_KEY) is None
    assert not gc_running(store)

"""The key set: which key objects open an encrypted store, changed only by a claim (design §22).

Every change of a store's keys (``journal key add``, ``remove``, ``rotate``) is one
put-if-absent of the next key set::

    keys/set-<seq, 12 digits>   {"version":1,"store_id":"<32 hex>","seq":N,"keys":["<32 hex>",...],
                                 "removed":["<32 hex>",...],"check":"<64 hex>"}

The newest set (the highest ``seq`` listed) names the store's keys: only they unlock
it. A store whose keys never changed has no set: its keys are every key object of its
store id (set 0). A change reads the newest set N, decides the next one from it, and
puts ``keys/set-<N+1>`` only if absent: of two changes racing from N, one claims N+1
and the other reads that and decides again. So every set derives from the one before
it, and two rules keep a key that opens the store in the newest set:

* a change is refused unless the key it opened the store with is in the newest set,
  and the next set holds that key (add, remove) or the new key, written and read back
  before the claim (rotate): no set is ever empty;
* a key object is deleted only after a claimed set moved its id to ``removed``, and an
  id in ``removed`` never comes back: no member of the newest set is ever deleted.

``check`` is the key check (``keyring.py``) of the set's JSON with ``check`` empty: a
change, holding the master key, refuses a set that fails it or does not decode. Sets
are never deleted (a few hundred bytes per key change), so the newest is never gone.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable
from typing import Annotated, Literal, NamedTuple

import msgspec

from ..errors import CorruptObject, KeyExists, ObjectNotFound
from .errors import KeyRefused
from ..format.codec import KEYS_PREFIX
from ..format.model import decode, encode
from .keyring import Keyring

SET_PREFIX = KEYS_PREFIX + "set-"
_SET_NAME = re.compile(r"keys/set-(\d{12})")
_KEY_ID = re.compile(r"[0-9a-f]{32}")
#: How many times a change decides again after another change claimed the set it read.
CLAIM_TRIES = 16
#: A set names at most this many ids (keys and removed): a key change is a person's act.
MAX_IDS = 10_000

KeyId = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]


class KeySet(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One key set (the module docstring); ``keys`` and ``removed`` sorted, disjoint."""

    version: Literal[1] = 1
    store_id: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]
    seq: Annotated[int, msgspec.Meta(ge=0, le=10 ** 12 - 1)]
    keys: Annotated[list[KeyId], msgspec.Meta(max_length=MAX_IDS)]
    removed: Annotated[list[KeyId], msgspec.Meta(max_length=MAX_IDS)] = []
    check: Annotated[str, msgspec.Meta(pattern=r"^([0-9a-f]{64})?$")] = ""


class Listing(NamedTuple):
    """One listing of ``keys/``: the key objects' ids in listing order, the key sets' seqs
    (ascending), and names of neither shape."""

    ids: list[str]
    sets: list[int]
    odd: list[str]

    @property
    def newest(self) -> int:
        """The newest key set's seq; 0: the store has none."""
        return self.sets[-1] if self.sets else 0


def set_key(seq: int) -> str:
    """The store key of key set ``seq`` (fixed width: no key is a prefix of another)."""
    return f"{SET_PREFIX}{seq:012d}"


def is_key_id(name: str) -> bool:
    return _KEY_ID.fullmatch(name) is not None


def list_keys_dir(store) -> Listing:
    """The key objects and key sets the store lists under ``keys/``."""
    ids, sets, odd = [], [], []
    for key in store.list(KEYS_PREFIX):
        name = key[len(KEYS_PREFIX):]
        if is_key_id(name):
            ids.append(name)
        elif (named := _SET_NAME.fullmatch(key)) is not None and int(named[1]) > 0:
            sets.append(int(named[1]))
        else:
            odd.append(key)
    return Listing(ids, sorted(sets), odd)


def read_set(store, store_id: str, seq: int) -> KeySet:
    """Key set ``seq`` (>= 1); ``CorruptObject`` naming it when it does not decode or
    names another store or sequence, ``ObjectNotFound`` when it is gone."""
    key = set_key(seq)
    try:
        got = decode(store.get(key), KeySet)
    except msgspec.DecodeError as err:
        raise CorruptObject(key, f"does not decode as a key set: {err}") from None
    if got.store_id != store_id or got.seq != seq:
        raise CorruptObject(key, f"names store {got.store_id} and set {got.seq}, not this store's set {seq}")
    if set(got.keys) & set(got.removed):
        raise CorruptObject(key, "names a key both as a key and as removed")
    return got


def members(store, store_id: str, listing: Listing) -> frozenset[str] | None:
    """The keys the newest set names, to unlock with; None when there is no set, or it
    cannot be read (then every key object of the store id is tried, as with no set:
    ``verify`` reports the set, and key changes refuse it)."""
    if not listing.newest:
        return None
    try:
        return frozenset(read_set(store, store_id, listing.newest).keys)
    except (CorruptObject, ObjectNotFound):
        return None


def set_check(keyring: Keyring, ks: KeySet) -> str:
    """What ``ks``'s ``check`` must be."""
    return keyring.key_check(encode(msgspec.structs.replace(ks, check="")))


def set_problem(keyring: Keyring, ks: KeySet) -> str | None:
    """Why set ``ks`` is not one this store's master key wrote, or None."""
    if not hmac.compare_digest(ks.check, set_check(keyring, ks)):
        return "fails its check: a byte changed after it was written, or it was not written by a holder of a key"
    return None


class Decision(NamedTuple):
    """What a change makes of the newest set: the next set's keys, and the id it removes (if any)."""

    keys: list[str]
    removes: str | None


#: ``decide(newest set, others)``: the change, or ``KeyRefused``. ``others`` are the key
#: objects of the store id listed outside the set: an add or rotate that stopped before
#: its claim, or a removed key whose deletion did not happen.
Decide = Callable[[KeySet, list[str]], Decision]
#: ``own(ids)``: those of ``ids`` whose key objects name this store (or do not decode).
Own = Callable[[list[str]], list[str]]


def newest_set(store, store_id: str, keyring: Keyring, listing: Listing, own: Own, op: str) -> KeySet:
    """The newest key set, its check verified (``KeyRefused`` naming it when it fails);
    set 0, every key object of the store id, when the store has none."""
    if not listing.newest:
        return KeySet(store_id=store_id, seq=0, keys=sorted(own(listing.ids)))
    try:
        got = read_set(store, store_id, listing.newest)
        problem = set_problem(keyring, got)
    except (CorruptObject, ObjectNotFound) as err:
        problem = getattr(err, "detail", "is missing")
    if problem is not None:
        raise KeyRefused(op, f"the newest key set {set_key(listing.newest)} of {store.location} {problem}; copy it "
                             "back from a backup of the store (`journal verify` names every damaged key object)")
    return got


def claim(store, store_id: str, keyring: Keyring, current: str, op: str, decide: Decide, own: Own,
          keeps: str | None = None) -> KeySet:
    """Claim the next key set as ``decide`` makes it of the newest one, deciding again
    from the set that won when another change claimed first; then delete the key
    objects the new set's ``removed`` names. The next set must hold ``keeps`` (a key
    read back before the claim; default ``current``). ``KeyRefused`` (nothing changed)
    when the key ``current`` this command opened the store with is not in the newest
    set, when ``decide`` refuses, or after ``CLAIM_TRIES`` lost claims."""
    for _ in range(CLAIM_TRIES):
        listing = list_keys_dir(store)
        now = newest_set(store, store_id, keyring, listing, own, op)
        if current not in now.keys:
            raise KeyRefused(op, f"key {current}, which this command opened {store.location} with, was removed by "
                                 "another key change meanwhile; open the store with one of its keys")
        keys, removes = decide(now, own([k for k in listing.ids if k not in now.keys]))
        removed = sorted({*now.removed, *([removes] if removes else [])})
        if (keeps or current) not in keys or set(keys) & set(removed):  # the rules above, before anything is put
            raise KeyRefused(op, f"the next key set of {store.location} would leave no key to open it")
        nxt = KeySet(store_id=store_id, seq=now.seq + 1, keys=sorted(set(keys)), removed=removed)
        nxt = msgspec.structs.replace(nxt, check=set_check(keyring, nxt))
        try:
            store.put_if_absent(set_key(nxt.seq), encode(nxt))
        except KeyExists:
            continue   # another change claimed this set first: decide again from it
        for kid in listing.ids:   # removed by this change, or by one that stopped before deleting
            if kid in removed:
                store.delete(KEYS_PREFIX + kid)
        return nxt
    raise KeyRefused(op, f"other key changes claimed {store.location}'s key set {CLAIM_TRIES} times while this one "
                         "tried; run it again")

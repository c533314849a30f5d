"""Changing an encrypted store's keys (``journal key list|add|remove|rotate``) and
``verify``'s audit of ``keys/`` (design §22).

Every change claims the next key set (``keyset.py``): two changes racing from two
processes are ordered by the claim, and the loser decides again from what the winner
left, so no interleaving leaves the store without a key. A new key's object is put and
read back before the claim that names it; a key is deleted only after the claim that
removes it. None of them rewrites any other object.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from functools import partial
from typing import NamedTuple

import msgspec

from ..config import KeySource
from ..errors import CorruptObject, ObjectNotFound
from .errors import KeyRefused
from ..format.codec import KEYS_PREFIX
from .keyring import Keyring
from .keys import (HKDF, Secret, forget_unlocked, key_check, key_objects, own_ids, put_key_object, read_key_object,
                   read_secret, unwrap, wrap)
from .keyset import Decide, Decision, KeySet, claim, list_keys_dir, members, read_set, set_key, set_problem


class KeyInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One key as ``journal key list`` shows it."""

    id: str
    kind: str                 # "key file", "passphrase", or "damaged" (an object that does not decode)
    created: str | None
    current: bool             # the key this command opened the store with


class KeyProblem(NamedTuple):
    """What ``verify`` reports of one object under ``keys/``."""

    key: str
    detail: str
    warning: bool = False     # a healthy store can show it (a key change that stopped): it opens nothing


def list_keys(store, store_id: str, current: str | None) -> list[KeyInfo]:
    """The store's keys (the newest key set's), oldest first."""
    listing = list_keys_dir(store)
    named = members(store, store_id, listing)
    out = [KeyInfo(id=kid, kind="damaged" if obj is None else ("key file" if obj.kdf == HKDF else "passphrase"),
                   created=None if obj is None else obj.created, current=kid == current)
           for kid, obj in key_objects(store, store_id, [k for k in listing.ids if named is None or k in named])]
    return sorted(out, key=lambda k: (k.created or "", k.id))


def add_key(store, store_id: str, keyring: Keyring, current: str, source: KeySource, created: str) -> str:
    """Wrap the master key under a new user key and claim a key set that adds it; the
    new key's id."""
    op = "key add"
    kid = _new_key(store, store_id, keyring, read_secret(source), created, op)

    def decide(now: KeySet, _others: list[str]) -> Decision:
        _still_new(kid, now, op)
        return Decision([*now.keys, kid], None)

    _claim(store, store_id, keyring, current, op, decide)
    return kid


def remove_key(store, store_id: str, keyring: Keyring, current: str, which: str) -> str:
    """Claim a key set without the one key whose id starts with ``which``, then delete
    it; never the key this command opened the store with, nor the last one. A key
    object outside the set (a key change that stopped) is deleted the same way.
    Returns its id."""
    op, location, removed = "key remove", store.location, []

    def decide(now: KeySet, others: list[str]) -> Decision:
        matches = [kid for kid in (*now.keys, *others) if which and kid.startswith(which)]
        if len(matches) != 1:
            raise KeyRefused(op, f"{which!r} names {len(matches) or 'no'} key(s) of {location}; "
                                 "`journal key list` shows their ids")
        kid = matches[0]
        if kid in now.keys and len(now.keys) < 2:
            raise KeyRefused(op, f"key {kid} is the last key of {location}: without it nothing could open the "
                                 "store (`journal key rotate` replaces it)")
        if kid == current:
            raise KeyRefused(op, f"key {kid} is the one this command opened {location} with; open the store with "
                                 "another of its keys to remove it, or replace it with `journal key rotate`")
        removed[:] = [kid]
        return Decision([k for k in now.keys if k != kid], kid)

    _claim(store, store_id, keyring, current, op, decide)
    return removed[0]


def rotate_key(store, store_id: str, keyring: Keyring, current: str, source: KeySource, created: str) -> str:
    """Replace the key this command opened the store with by a new one, in one claimed
    key set: a rotate that stops before the claim leaves the old key in use and the new
    object outside the set (it opens nothing). Returns the new key's id."""
    op = "key rotate"
    kid = _new_key(store, store_id, keyring, read_secret(source), created, op)

    def decide(now: KeySet, _others: list[str]) -> Decision:
        _still_new(kid, now, op)
        return Decision([*(k for k in now.keys if k != current), kid], current)

    _claim(store, store_id, keyring, current, op, decide, keeps=kid)
    forget_unlocked(current)
    return kid


def _new_key(store, store_id: str, keyring: Keyring, secret: Secret, created: str, op: str) -> str:
    """A new key object wrapping the master key under ``secret``, put and read back
    (it must unwrap to the master key) before any set names it; its id."""
    kid = put_key_object(store, wrap(keyring, secret, store_id, created))
    back = read_key_object(store.get(KEYS_PREFIX + kid), KEYS_PREFIX + kid)
    if unwrap(back, secret, store_id) != keyring.master:
        raise KeyRefused(op, f"key object {kid} did not read back as written; remove it with "
                             f"`journal key remove {kid}`")
    return kid


def _claim(store, store_id: str, keyring: Keyring, current: str, op: str, decide: Decide,
           keeps: str | None = None) -> None:
    claim(store, store_id, keyring, current, op, decide, partial(own_ids, store, store_id), keeps=keeps)


def _still_new(kid: str, now: KeySet, op: str) -> None:
    if kid in now.removed:
        raise KeyRefused(op, f"the new key {kid} was removed by another key change before this one could name it")


def key_problems(store, store_id: str, keyring: Keyring) -> Iterator[KeyProblem]:
    """Every object under ``keys/`` that is not an intact key object or key set of this
    store (a name of another shape, bytes that do not decode, another store's id, a
    ``check`` that does not match), a key the newest set names that is missing, and
    (warnings) key objects outside it: a key change that stopped. For ``verify``."""
    listing = list_keys_dir(store)
    for key in listing.odd:
        yield KeyProblem(key, "is not named as a key object (keys/<32 hex>) or a key set (keys/set-<12 digits>)")
    newest = None
    for seq in listing.sets:
        try:
            got = read_set(store, store_id, seq)
        except ObjectNotFound:
            continue
        except CorruptObject as err:
            yield KeyProblem(set_key(seq), err.detail)
            continue
        problem = set_problem(keyring, got)
        if problem is not None:
            yield KeyProblem(set_key(seq), problem)
        elif seq == listing.newest:
            newest = got
    if newest is not None:
        for kid in sorted(set(newest.keys) - set(listing.ids)):
            yield KeyProblem(set_key(newest.seq), f"names key {kid}, which the store does not hold")
    yield from _object_problems(store, store_id, keyring, listing.ids, newest)


def _object_problems(store, store_id: str, keyring: Keyring, ids: list[str], newest: KeySet | None
                     ) -> Iterator[KeyProblem]:
    for kid in ids:
        key = KEYS_PREFIX + kid
        try:
            obj = read_key_object(store.get(key), key)
        except ObjectNotFound:
            continue  # removed since the listing
        except CorruptObject as err:
            yield KeyProblem(key, err.detail)
            continue
        if obj.store_id != store_id:
            yield KeyProblem(key, f"belongs to store {obj.store_id}, not to this one (an init that stopped before "
                                  "its config)")
        elif not hmac.compare_digest(obj.check, key_check(keyring, obj)):
            yield KeyProblem(key, "fails its check: a byte changed after it was written")
        elif newest is not None and kid in newest.removed:
            yield KeyProblem(key, f"was removed by key set {newest.seq} but is still there (a key change that "
                                  "stopped before deleting it); it opens nothing, and the next key change deletes it",
                             warning=True)
        elif newest is not None and kid not in newest.keys:
            yield KeyProblem(key, "is in no key set (a `journal key add` or `rotate` that stopped before naming "
                                  f"it): it opens nothing; `journal key remove {kid}` deletes it", warning=True)

"""The target of a copy: opened (with its own key), or created when the location is
absent or empty, and how the source's objects are written there.

* ``Mode.SAME``: both stores plain, or both sealed with one master key. Every object
  is copied byte for byte: its name and bytes are the same in both stores.
* ``Mode.RESEAL``: the codecs differ (an encrypted store and a plain one, or two
  encrypted stores, each with its own master key). Content ids, index page cuts, pack
  names and the input journal's names all derive from the master key, so every object
  is re-encoded under the target's (``reseal.py``, ``inputs.py``).

A target that would hold the source's encrypted checkpoints in the clear (a plain one,
existing or created because no key is set for it) is refused unless the caller asks
for it (``decrypt_to_plain``): nothing is written then, not even a new target's config.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from ..config import KeySource
from ..repository.errors import NoStore
from ..repository.repository import Repository
from ..store.base import Store
from .errors import PlainTarget, SameStore

#: A payload hashed by both codecs: equal ids mean one id key, so one master key.
_PROBE = b"journal copy: do these stores share a master key?"


class Mode(str, enum.Enum):
    SAME = "same"        # objects copied as they are
    RESEAL = "reseal"    # objects re-encoded under the target's keys


class Target(NamedTuple):
    """The opened target (None: absent or empty, and a dry run creates nothing), how
    objects go there, and whether this copy created it."""

    repo: Repository | None
    mode: Mode
    created: bool


def open_target(source: Repository, store: Store, key: KeySource | None, *, decrypt_to_plain: bool = False,
                dry_run: bool = False) -> Target:
    """Open the target ``store`` with ``key`` (its own; None: no key is set for it), or
    create it (encrypted with ``key`` when one is set) when the location is absent or
    empty. Raises ``SameStore``, ``PlainTarget`` (an encrypted source and a plain target,
    unless ``decrypt_to_plain``) and whatever opening a store raises (``NotEncrypted``,
    a wrong key, a location that is not a store)."""
    if store.location == source.store.location:
        raise SameStore(store.location)
    try:
        repo = Repository.open(store, key=key)
    except NoStore:
        if source.codec.encrypted and key is None and not decrypt_to_plain:
            raise PlainTarget(source.store.location, store.location,
                              "would be created plain (no key is set for it)") from None
        plain = not source.codec.encrypted and key is None
        if dry_run:
            return Target(None, Mode.SAME if plain else Mode.RESEAL, False)
        repo = Repository.open(store, create=True, key=key)
        return Target(repo, _mode(source, repo), True)
    if source.codec.encrypted and not repo.codec.encrypted and not decrypt_to_plain:
        raise PlainTarget(source.store.location, store.location, "is not encrypted")
    return Target(repo, _mode(source, repo), False)


def _mode(source: Repository, target: Repository) -> Mode:
    """SAME when both stores name a payload alike (both plain, or one id key)."""
    if source.codec.encrypted != target.codec.encrypted:
        return Mode.RESEAL
    return Mode.SAME if source.codec.id(_PROBE) == target.codec.id(_PROBE) else Mode.RESEAL

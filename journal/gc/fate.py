"""What a gc sweep does with one item of a ripe tombstone (``run._Gc._fate``, and
``inputs.input_fate`` for an input's keys)."""

from __future__ import annotations

import enum


class Fate(enum.Enum):
    """What the sweep does with one item of a ripe tombstone."""

    #: Delete it now.
    DELETE = "delete"
    #: Nothing, as it is resolved: a pack a manifest present at the start reaches, or one
    #: gone when the mark listed packs; a manifest deleted first, gone, or kept by the policy.
    DONE = "done"
    #: Nothing for now, so it stays named (a swept tombstone is written again with it):
    #: an orphan whose checkpoint may still commit.
    WAIT = "wait"
    #: Nothing for now, so it stays named (as ``WAIT``): an unreadable item, or an expired
    #: manifest that is not deleted this time.
    KEEP = "keep"

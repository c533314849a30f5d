"""Input retention: which stored inputs a gc lets go (``--keep-inputs-within``; design §16, §20).

An input *expires* when it was submitted longer ago than the policy's duration, it
was marked delivered (or ``--include-undelivered`` is given), and it is not its
session's newest: the newest input holds the session's sequence, and without it the
next append would number a new prompt as the expired one. An expired input goes with
its client-id claim and its delivery marker; a marker whose input is gone (a sweep
stopped between the two) expires alone. The keys go into gc's tombstones as ``input``
items and are deleted by a later sweep past the grace, when that run's policy still
expires them, in this order: claim and input, then, in a later run, the marker (an
input that lost its marker first would read as undelivered, and be replayed).

Deciding reads each candidate input (an undelivered one only with
``--include-undelivered``) and the marker of a delivered one: a marker counts only
when it names the input's record, as everywhere (design §20), so a marker left by a
lost input never expires the new prompt stored at its sequence. The listing is
streamed one session at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import msgspec

from ..errors import CorruptObject, ObjectNotFound, ids_apart
from ..format.inputs import (CLAIM_LETTER, DELIVERY_LETTER, INPUT_LETTER, INPUT_PREFIX, claim_key, decode_delivery,
                             decode_input, delivery_key, input_key, parse_key)
from ..format.codec import PLAIN, Codec
from ..report import Reporter
from ..store.base import Store
from .fate import Fate


class InputPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """``keep_within``: seconds (None: keep every input); ``include_undelivered``: expire
    undelivered inputs too."""

    keep_within: float | None = None
    include_undelivered: bool = False

    def is_empty(self) -> bool:
        return self.keep_within is None


def expired_inputs(store: Store, policy: InputPolicy, now_ns: int, reporter: Reporter,
                   keep: Callable[[], None] = lambda: None, codec: Codec = PLAIN) -> Iterator[tuple[str, int]]:
    """``(key, size)`` of every key under ``inputs/`` the policy lets go now, session by
    session: each expired input's claim, the input, its marker; then the session's
    orphan markers. Nothing when the policy keeps every input. ``codec`` is the store's."""
    if policy.is_empty():
        return
    cutoff = now_ns - int(policy.keep_within * 1e9)
    session: _Session | None = None
    for key, size in store.list_sizes(INPUT_PREFIX):
        keep()
        parsed = parse_key(key)
        if parsed is None:
            continue  # verify reports keys of other shapes; gc leaves them alone
        sdir, letter, seq = parsed
        if session is None or session.sdir != sdir:
            if session is not None:
                yield from session.finish()
            session = _Session(store, sdir, policy, cutoff, reporter, codec)
        session.add(letter, seq, key, size)
    if session is not None:
        yield from session.finish()


class _Session:
    """One session directory as its listing streams: claims, then markers, then inputs."""

    def __init__(self, store: Store, sdir: str, policy: InputPolicy, cutoff: int, reporter: Reporter, codec: Codec):
        self.store, self.sdir, self.policy, self.cutoff, self.reporter = store, sdir, policy, cutoff, reporter
        self.codec = codec
        self.claims: dict[str, int] = {}
        self.markers: dict[int, int] = {}
        self.held: tuple[int, int] | None = None   # the last input seen: the newest, until another comes
        self.out: list[tuple[str, int]] = []

    def add(self, letter: str, seq: int | None, key: str, size: int) -> None:
        if letter == CLAIM_LETTER:
            self.claims[key] = size
        elif letter == DELIVERY_LETTER:
            self.markers[seq] = size
        elif letter == INPUT_LETTER:
            if self.held is not None:
                self._judge(*self.held)
            self.held = (seq, size)

    def finish(self) -> list[tuple[str, int]]:
        if self.held is not None:
            self.markers.pop(self.held[0], None)   # the newest stays, with its marker
        for seq, size in sorted(self.markers.items()):
            self.out.append((delivery_key(self.sdir, seq), size))   # markers whose input is gone
        return self.out

    def _judge(self, seq: int, size: int) -> None:
        """Decide input ``seq`` (not the session's newest)."""
        marker_size = self.markers.pop(seq, None)
        if marker_size is None and not self.policy.include_undelivered:
            return
        key = input_key(self.sdir, seq)
        try:
            head, _text, rid = decode_input(self.store.get(key), key, self.codec)
            delivered = marker_size is not None and self._marks(seq, rid)
        except ObjectNotFound:
            return  # gone since the listing
        except CorruptObject as err:
            self.reporter.warn(f"gc: keeping input {key}: {err}")
            return
        if not (delivered or self.policy.include_undelivered) or head.submitted_ns >= self.cutoff:
            return
        claim = claim_key(self.sdir, head.client_id, self.codec) if head.client_id is not None else None
        if claim in self.claims:
            self.out.append((claim, self.claims[claim]))
        self.out.append((key, size))
        if marker_size is not None:
            self.out.append((delivery_key(self.sdir, seq), marker_size))

    def _marks(self, seq: int, rid: str) -> bool:
        """Whether the marker at ``seq`` names the input record ``rid`` (else it is stale:
        the input counts as undelivered, with a warning)."""
        key = delivery_key(self.sdir, seq)
        marker = decode_delivery(self.store.get(key), key, self.codec)
        if marker.input != rid:
            said, held = ids_apart(marker.input, rid)
            self.reporter.warn(f"gc: {key} names input record {said}, the input at #{seq} is {held}: it counts "
                               "as undelivered")
        return marker.input == rid


def input_fate(key: str, expired: Callable[[str], bool]) -> Fate:
    """What the sweep does with an ``input`` item of a ripe tombstone, given which keys
    this run's policy lets go (``expired``): ``DELETE`` it; ``DONE`` (kept by the policy
    now, or gone); or ``KEEP`` the tombstone: a marker whose input is still there goes
    in a later run, after its input."""
    if expired(key):
        parsed = parse_key(key)
        if parsed is None or parsed[1] != DELIVERY_LETTER or not expired(input_key(parsed[0], parsed[2])):
            return Fate.DELETE
        return Fate.KEEP
    return Fate.DONE

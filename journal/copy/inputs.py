"""The input journal copied (design §20, §23): the input records, delivery markers and
client-id claims the target lacks, session by session.

* An input is copied when its sequence is above the newest the target's session holds
  (the target's own gc expires older ones: they are not copied back), a claim when its
  ``after`` is at or above that newest (a claim is written before its input), and a
  delivery marker when the target holds its input. In a session, claims go first, then
  inputs, then markers: a marker is never there before its input.
* ``Mode.SAME``: each object is verified (decoded with the source's codec, its place
  checked against its key) and put as it is. A key the target holds with other bytes
  (another size in the listing, or other bytes when a put finds the key taken) is a
  target that moved on.
* ``Mode.RESEAL``: each object is decoded and encoded again under the target's codec:
  its session directory and a claim's name are the target's (keyed digests in an
  encrypted store), and a marker names the target's record of its input.

An object that fails its checks is not copied and is named in ``refused``; the rest of
the journal is still copied.
"""

from __future__ import annotations

import msgspec

from ..errors import CorruptObject, KeyExists, ObjectNotFound
from ..format.inputs import (CLAIM_LETTER, INPUT_LETTER, INPUT_PREFIX, claim_key, decode_claim, decode_delivery,
                             decode_input, delivery_key, encode_claim, encode_delivery, encode_input, input_key,
                             parse_key, session_dir)
from ..repository.repository import Repository
from .errors import TargetMovedOn
from .sink import Sink
from .target import Mode


class Session(msgspec.Struct):
    """One session directory's keys, from a listing, with their sizes."""

    inputs: dict[int, int] = {}      # seq -> size
    markers: dict[int, int] = {}     # seq -> size
    claims: dict[str, int] = {}      # key -> size

    @property
    def newest(self) -> int:
        return max(self.inputs, default=0)


def list_sessions(repo: Repository) -> dict[str, Session]:
    """Every session directory of the store's input journal (one listing)."""
    sessions: dict[str, Session] = {}
    for key, size in repo.store.list_sizes(INPUT_PREFIX):
        parsed = parse_key(key)
        if parsed is None:
            continue
        sdir, letter, seq = parsed
        session = sessions.setdefault(sdir, Session())
        if letter == CLAIM_LETTER:
            session.claims[key] = size
        elif letter == INPUT_LETTER:
            session.inputs[seq] = size
        else:
            session.markers[seq] = size
    return sessions


class InputCopy:
    """Copies the input journal of ``source`` into ``target`` through ``sink`` (None:
    a dry run, which counts what it would copy); ``refused`` names what failed its checks."""

    def __init__(self, source: Repository, target: Repository | None, sink: Sink | None, mode: Mode):
        self.source, self.target, self.sink, self.mode = source, target, sink, mode
        self.copied = 0
        self.refused: list[str] = []

    def run(self) -> None:
        theirs = list_sessions(self.target) if self.target is not None else {}
        for sdir, mine in sorted(list_sessions(self.source).items()):
            if self.mode is Mode.SAME:
                self._same(sdir, mine, theirs.get(sdir) or Session())
            else:
                self._reseal(sdir, mine, theirs)

    # -- as they are -----------------------------------------------------------------------

    def _same(self, sdir: str, mine: Session, theirs: Session) -> None:
        for seq in mine.inputs.keys() & theirs.inputs.keys():
            if mine.inputs[seq] != theirs.inputs[seq]:
                raise TargetMovedOn(self.target.store.location,
                                    f"its input {input_key(sdir, seq)} is not the source's")
        newest = theirs.newest
        codec = self.source.codec
        for key in sorted(mine.claims.keys() - theirs.claims.keys()):
            claim = self._read(key, lambda data, k: decode_claim(data, k, codec))
            if claim is not None and claim[1].after >= newest:
                self._put(key, claim[0])
        held = set(theirs.inputs)
        for seq in sorted(s for s in mine.inputs if s > newest):
            key = input_key(sdir, seq)
            got = self._read(key, lambda data, k: decode_input(data, k, codec))
            if got is not None:
                self._put(key, got[0])
                held.add(seq)
        for seq in sorted(s for s in mine.markers if s not in theirs.markers and s in held):
            key = delivery_key(sdir, seq)
            got = self._read(key, lambda data, k: decode_delivery(data, k, codec))
            if got is not None:
                self._put(key, got[0])

    # -- re-sealed -------------------------------------------------------------------------

    def _reseal(self, sdir: str, mine: Session, sessions: dict[str, Session]) -> None:
        named = self._newest_input(sdir, mine)
        if named is None:
            return
        dst = self.target.codec if self.target is not None else None
        tdir = session_dir(named[1][0].harness, named[1][0].session, dst) if dst is not None else sdir
        theirs = sessions.get(tdir) or Session()
        todo = [s for s in sorted(mine.inputs) if s > theirs.newest]
        if dst is None:   # a dry run into a target to be created: its names are not known yet
            self.copied += len(todo)
            return
        if todo:
            self._reseal_claims(mine, tdir, theirs)
        ids = self._reseal_inputs(sdir, tdir, todo, dict([named]))
        for seq in sorted(s for s in mine.markers if (s in ids or s in theirs.inputs) and s not in theirs.markers):
            self._reseal_marker(sdir, tdir, seq, ids.get(seq))

    def _newest_input(self, sdir: str, mine: Session):
        """``(seq, (head, text, record id))`` of the session's newest readable input, which
        names the session; None when it has none (markers and claims whose inputs are
        gone) or none can be read (named in ``refused``)."""
        for seq in sorted(mine.inputs, reverse=True):
            key = input_key(sdir, seq)
            try:
                return seq, decode_input(self.source.store.get(key), key, self.source.codec)
            except (CorruptObject, ObjectNotFound):
                continue   # named when it is to be copied
        if mine.inputs:
            self.refused.append(f"session {sdir}: none of its {len(mine.inputs)} input(s) can be read")
        return None

    def _reseal_claims(self, mine: Session, tdir: str, theirs: Session) -> None:
        src, dst = self.source.codec, self.target.codec
        for key in sorted(mine.claims):
            got = self._read(key, lambda data, k: decode_claim(data, k, src))
            if got is not None and got[1].after >= theirs.newest:
                tkey = claim_key(tdir, got[1].client_id, dst)
                if tkey not in theirs.claims:
                    self._put(tkey, encode_claim(got[1], dst))

    def _reseal_inputs(self, sdir: str, tdir: str, todo: list[int], read: dict) -> dict[int, tuple[str, str]]:
        """Copy inputs ``todo``; ``{seq: (the source's record id, the target's)}``."""
        ids = {}
        for seq in todo:
            got = read.get(seq) or self._decoded_input(sdir, seq)
            if got is not None:
                head, text, rid = got
                tid, data = encode_input(head, text, self.target.codec)
                self._put(input_key(tdir, seq), data)
                ids[seq] = (rid, tid)
        return ids

    def _reseal_marker(self, sdir: str, tdir: str, seq: int, pair: tuple[str, str] | None) -> None:
        """Copy the marker of input ``seq``, naming the target's record of that input (a
        marker of an input that was lost, its sequence taken again, marks nothing there too)."""
        got = self._read(delivery_key(sdir, seq), lambda data, k: decode_delivery(data, k, self.source.codec))
        pair = pair or self._ids(sdir, tdir, seq)
        if got is not None and pair is not None:
            marker = got[1]
            named = pair[1] if marker.input == pair[0] else marker.input
            self._put(delivery_key(tdir, seq), encode_delivery(msgspec.structs.replace(marker, input=named),
                                                               self.target.codec))

    def _decoded_input(self, sdir: str, seq: int):
        got = self._read(input_key(sdir, seq), lambda data, k: decode_input(data, k, self.source.codec))
        return None if got is None else got[1]

    def _ids(self, sdir: str, tdir: str, seq: int) -> tuple[str, str] | None:
        """The record ids of input ``seq`` in the source and in the target (already copied)."""
        mine = self._decoded_input(sdir, seq)
        key = input_key(tdir, seq)
        try:
            theirs = decode_input(self.target.store.get(key), key, self.target.codec)
        except (CorruptObject, ObjectNotFound):
            return None
        return None if mine is None else (mine[2], theirs[2])

    # -- reads and puts --------------------------------------------------------------------

    def _read(self, key: str, decode):
        """``(stored bytes, decoded)`` of the source's object ``key``, verified; None
        (named in ``refused``) when it fails its checks or is gone."""
        try:
            data = self.source.store.get(key)
            return data, decode(data, key)
        except (CorruptObject, ObjectNotFound) as err:
            self.refused.append(str(err))
            return None

    def _put(self, key: str, data: bytes) -> None:
        """Put ``data`` at ``key`` in the target; the same bytes there already count as
        copied before, other bytes are a target that moved on."""
        if self.sink is None:
            self.copied += 1
            return
        try:
            self.sink.put_if_absent(key, data)
        except KeyExists:
            if self.target.store.get(key) != data:
                raise TargetMovedOn(self.target.store.location, f"its {key} is not the source's") from None
            return
        self.copied += 1

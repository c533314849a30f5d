"""``journal copy``: the source's checkpoints and input journal written into a second
store, incrementally (design §23).

The order of the work:

1. open the target with its own key, or create it (``target.py``: refused before
   anything is written when the source's sealed objects would land in the clear);
2. decide the checkpoints to copy (``fence.py``: the source's above the target's
   newest, which must be the source's);
3. for each, ascending: every object it needs (``Mode.SAME``: the packs its index and
   page maps reach, each verified against its name; ``Mode.RESEAL``: its blobs, maps
   and index written again), then its manifest, put only if absent: the manifest goes
   last, once every object it names is in the target. A checkpoint that needs a source
   object that is damaged or missing is not copied (its manifest is not written), is
   named in ``refused``, and the copy goes on with the next;
4. the input journal (``inputs.py``);
5. ``Mode.SAME``: the packs this run relied on are listed again, and a pack a gc on the
   target took meanwhile is copied again.

Every put is put-if-absent of an object named by its content (or, for a manifest and
an input record, by its place, checked against what is there), so a copy killed at
any point leaves the target a valid store, and a rerun copies only what is missing: a
pack is HEADed before it is sent (``sink.py``).
"""

from __future__ import annotations

import msgspec

from ..config import KeySource
from ..errors import CorruptObject, KeyExists, ObjectNotFound
from ..gc.reach import Reach
from ..report import SILENT, Reporter
from ..repository.repository import RecordCache, Repository, manifest_key
from ..store.base import Store
from .errors import TargetMovedOn
from .fence import checkpoints_to_copy, same_checkpoint
from .inputs import InputCopy
from .packs import copy_pack, sweep_spool
from .reseal import Resealer
from .sink import Sink, Tally
from .target import Mode, open_target


class CopyResult(msgspec.Struct, kw_only=True):
    """What a copy did (a dry run: what it would do). ``objects``/``bytes``: put into the
    target; ``skipped_*``: found there already; ``checkpoints``: copied (or to copy);
    ``refused``: source objects that failed their checks, and what was not copied."""

    source: str
    target: str
    mode: Mode
    dry_run: bool = False
    created: bool = False
    checkpoints: list[int] = []
    objects: int = 0
    bytes: int = 0
    skipped_objects: int = 0
    skipped_bytes: int = 0
    inputs: int = 0
    refused: list[str] = []

    @property
    def complete(self) -> bool:
        return not self.refused


def copy_store(source: Repository, target_store: Store, *, key: KeySource | None, spool_dir: str,
               decrypt_to_plain: bool = False, dry_run: bool = False, reporter: Reporter = SILENT) -> CopyResult:
    """Copy ``source``'s checkpoints and input journal into ``target_store`` (opened with
    ``key``, its own), spooling packs in ``spool_dir``. With ``dry_run`` nothing is
    written, and the result says what would be."""
    target = open_target(source, target_store, key, decrypt_to_plain=decrypt_to_plain, dry_run=dry_run)
    seqs = checkpoints_to_copy(source, target.repo, target.mode)
    result = CopyResult(source=source.store.location, target=target_store.location, mode=target.mode,
                        dry_run=dry_run, created=target.created)
    how = " (re-encoded for the target: its own ids, seals and index)" if target.mode is Mode.RESEAL else ""
    if seqs:
        reporter.note(f"copy: {len(seqs)} checkpoint(s) to {'look at' if dry_run else 'copy'}, {seqs[0]} to "
                      f"{seqs[-1]}, into {target_store.location}{how}")
    if dry_run:
        _plan(source, target.repo, target.mode, seqs, result)
        inputs = InputCopy(source, target.repo, None, target.mode)
    else:
        sweep_spool(spool_dir)
        sink = Sink(target.repo.store)
        run = _Same(source, target.repo, sink, spool_dir) if target.mode is Mode.SAME else \
            _Resealed(source, target.repo, sink, spool_dir)
        run.copy(seqs, result, reporter)
        inputs = InputCopy(source, target.repo, sink, target.mode)
    inputs.run()
    result.inputs = inputs.copied
    result.refused += [f"input journal: {why}" for why in inputs.refused]
    if dry_run:
        result.objects += inputs.copied
    else:
        _count(result, sink.tally)
    if result.inputs:
        reporter.note(f"copy: {result.inputs} input-journal object(s) {'to copy' if dry_run else 'copied'}")
    return result


def _count(result: CopyResult, tally: Tally) -> None:
    result.objects, result.bytes = tally.objects, tally.bytes
    result.skipped_objects, result.skipped_bytes = tally.skipped_objects, tally.skipped_bytes


class _Same:
    """``Mode.SAME``: packs and manifests copied as they are."""

    def __init__(self, source: Repository, target: Repository, sink: Sink, spool_dir: str):
        self.source, self.target, self.sink, self.spool_dir = source, target, sink, spool_dir
        self.present = set(target.pack_sizes())
        self.kept = RecordCache()
        self.needed: set[str] = set()   # every pack the manifests this run wrote reach

    def copy(self, seqs: list[int], result: CopyResult, reporter: Reporter) -> None:
        reach = Reach(self.source, self.kept)
        for n, seq in enumerate(seqs, 1):
            before = self.sink.tally.objects, self.sink.tally.bytes
            try:
                record = self.source.store.get(manifest_key(seq))
                _walk(reach, self.source.load_manifest(seq)[0])
                for pack in sorted(reach.packs - self.present):
                    copy_pack(self.source.store, self.sink, pack, self.spool_dir)
                    self.present.add(pack)
            except (CorruptObject, ObjectNotFound) as err:
                _refuse(self.source, seq, err, result, reporter)
                reach = Reach(self.source, self.kept)   # the pages it walked may name packs it did not copy
                continue
            self.needed |= reach.packs
            _commit(self.sink, self.source, self.target, seq, record, Mode.SAME)
            result.checkpoints.append(seq)
            _said(reporter, seq, n, len(seqs), self.sink.tally, before)
        if result.checkpoints:
            self._recheck(reporter)

    def _recheck(self, reporter: Reporter) -> None:
        """Copy again a pack the target lost since it was found there (a gc of its own
        that planned before these manifests were put)."""
        gone = sorted(self.needed - set(self.target.pack_sizes()))
        for pack in gone:
            copy_pack(self.source.store, self.sink, pack, self.spool_dir)
        if gone:
            reporter.note(f"copy: {len(gone)} pack(s) the target's gc removed meanwhile were copied again")


class _Resealed:
    """``Mode.RESEAL``: every checkpoint written again under the target's codec."""

    def __init__(self, source: Repository, target: Repository, sink: Sink, spool_dir: str):
        self.source, self.target, self.sink = source, target, sink
        self.resealer = Resealer(source, target, sink, spool_dir)
        held = target.manifest_seqs()
        if held:
            self.resealer.seed(held[-1])

    def copy(self, seqs: list[int], result: CopyResult, reporter: Reporter) -> None:
        for n, seq in enumerate(seqs, 1):
            before = self.sink.tally.objects, self.sink.tally.bytes
            try:
                written = self.resealer.checkpoint(self.source.load_manifest(seq)[0])
            except (CorruptObject, ObjectNotFound) as err:
                _refuse(self.source, seq, err, result, reporter)
                continue
            mid = _commit(self.sink, self.source, self.target, seq, written.record, Mode.RESEAL) or written.manifest_id
            self.resealer.committed(seq, mid)
            result.checkpoints.append(seq)
            _said(reporter, seq, n, len(seqs), self.sink.tally, before)


def _walk(reach: Reach, manifest) -> None:
    for name, tree in sorted(manifest.trees.items()):
        reach.walk_tree(manifest.seq, name, tree.root)


def _commit(sink: Sink, source: Repository, target: Repository, seq: int, record: bytes, mode: Mode) -> str | None:
    """Put manifest ``seq``'s ``record`` into the target, last. One there already must be
    the same checkpoint (a copy that got there first: returns its id), else the target
    moved on."""
    try:
        sink.put_if_absent(manifest_key(seq), record)
        return None
    except KeyExists:
        if not same_checkpoint(source, target, seq, mode):
            raise TargetMovedOn(target.store.location, f"checkpoint {seq} was put there meanwhile, and it is not "
                                                       "the source's") from None
        return target.load_manifest(seq)[1]


def _refuse(source: Repository, seq: int, err: Exception, result: CopyResult, reporter: Reporter) -> None:
    """Checkpoint ``seq`` needs a source object that failed: not copied, and said so,
    unless the source's gc removed the checkpoint meanwhile."""
    if source.store.head(manifest_key(seq)) is None:
        reporter.note(f"copy: checkpoint {seq} left the source while it was copied (its gc expired it); passed over")
        return
    why = f"checkpoint {seq} not copied: {err}"
    result.refused.append(why)
    reporter.warn(f"copy: {why}")


def _said(reporter: Reporter, seq: int, n: int, total: int, tally: Tally, before: tuple[int, int]) -> None:
    objects, size = tally.objects - before[0], tally.bytes - before[1]
    reporter.note(f"copy: checkpoint {seq} ({n} of {total}): {objects} object(s), {size:,} bytes")


def _plan(source: Repository, target: Repository | None, mode: Mode, seqs: list[int], result: CopyResult) -> None:
    """A dry run: the checkpoints to copy, and (``Mode.SAME``) the packs and bytes they
    need that the target lacks. Reads the source's index pages and maps, writes nothing."""
    result.checkpoints = list(seqs)
    if mode is not Mode.SAME:
        return
    present = set(target.pack_sizes()) if target is not None else set()
    kept = RecordCache()
    reach, needed = Reach(source, kept), set()
    for seq in seqs:
        try:
            _walk(reach, source.load_manifest(seq)[0])
        except (CorruptObject, ObjectNotFound) as err:
            result.checkpoints.remove(seq)
            result.refused.append(f"checkpoint {seq} would not be copied: {err}")
            reach = Reach(source, kept)
            continue
        needed |= reach.packs
    sizes = source.pack_sizes()
    missing = needed - present
    result.objects = len(missing) + len(result.checkpoints)
    result.bytes = sum(sizes.get(p, 0) for p in missing)
    result.skipped_objects = len(needed) - len(missing)
    result.skipped_bytes = sum(sizes.get(p, 0) for p in needed & present)

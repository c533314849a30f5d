"""The verify operation: an audit of every manifest and what it names.

Quick: every manifest decodes and passes its hash check, every index page loads and
every tree passes the walk's checks (``index.iter_pages``: each path once, in order,
counts that add up to the manifest's), no path escapes its tree or lies inside a file,
every snapshot's size is its pages', and every pack a manifest names exists and is
long enough for every record named in it (the sizes come with the one listing of
``packs/``), including the packs of every SQLite snapshot's pages (its full map's
pages are the dictionaries of its group deltas, so a snapshot needs all of them) and
of every base a delta names (an index page's, a page map's, a chunk's). Full
(``--full``): additionally every blob is read, decompressed and re-hashed (never past
its kind's size limit), every JSONL entry's last segment ends in ``\\n`` (a line
longer than a segment goes on over several, design §6), every snapshot is rebuilt
(each group delta decoded against its verified base pages) and integrity-checked (the
snapshots over one full map one after another, each from the one before:
``sqlite/rebuild_chain.py``), and
every pack a manifest reaches is hashed against its name. Sampled (``--sample PERCENT``):
the full checks on that share of the packs a manifest reaches (``sample_packs``, drawn by
a seed the result records): the blobs in them, the snapshots whose page maps are in
them, and their names.

Each distinct index page and page map is read once, however many manifests name it
(``verify_shared``: gc's reach shares the reads, and what a tree or snapshot must be
told of a subtree or map it shares comes from what the first read kept), and with
``full`` each distinct blob is re-hashed once, each full map's page records are read
once however many snapshots name the map, and a snapshot's rebuild reads only the
delta records the one rebuilt before it did not use.

Both also audit the input journal (``_check_inputs``: quick from its listing, full by
reading every input, marker and claim) and, in an encrypted store, every key object
(``corrupt-key``, design §22), and check the store's ``config`` (``corrupt-config``: missing, malformed, or not
matching its checksum) and look for packs that no manifest names or reaches and no gc
tombstone names (``unreferenced-pack``; not while a manifest is unreadable, since it may
name any pack). On a store with checkpoints such a pack is a warning, not a failure: a checkpoint that crashed, lost a commit race or is running now
leaves exactly that (gc's orphans), and a pack whose manifest the store lost looks the
same. On a store with packs and no manifest at all it is an error: the history is gone.
Every pack no manifest names or reaches is counted (``orphans``, as gc calls them, with
their bytes), and so are those of them a gc tombstone names already (``orphans_marked``:
no finding, gc deletes them after its grace period): information, never damage.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from typing import NamedTuple

import msgspec

from .errors import ConfigError, CorruptObject, ObjectNotFound, ids_apart
from .local.errors import UnsafePath
from .format.index import decode_page
from .restore.entry import inside_problem, own_problem
from .format.model import KIND_FILE, KIND_JSONL, KIND_SQLITE, BlobRef, Entry, Manifest, Page
from .format.inputs import (CLAIM_LETTER, DELIVERY_LETTER, INPUT_LETTER, INPUT_PREFIX, decode_claim, decode_delivery,
                            decode_input, delivery_key)
from .format.inputs import parse_key as parse_input_key
from .format.objects import HEADER, KIND_CHUNK, KIND_PAGEMAP, KIND_SEGMENT, decode_record, is_id
from .format.pagemap import load_snapshot
from .gc.reach import Reach
from .paths import shown
from .report import SILENT, Reporter
from .repository.repository import RecordCache, Repository, blob_location, manifest_key, pack_key, pack_of
from .store.whole import WholeReads
from .format.segments import anchor_refs
from .repository.segments import chunk_reader, read_segment
from .sqlite.rebuild_chain import ChainRebuild
from .sqlite.snapshot import integrity_check
from .format.tombstone import tombstoned_packs
from .verify_shared import MapBook, Nested, TreeAudit

TORN_MANIFEST = "torn-manifest"
CORRUPT_PAGE = "corrupt-page"
MISSING_OBJECT = "missing-object"
CORRUPT_OBJECT = "corrupt-object"
TORN_SEGMENT = "torn-segment"
UNSAFE_PATH = "unsafe-path"
BAD_SNAPSHOT = "bad-snapshot"
SHORT_PACK = "short-pack"
CORRUPT_CONFIG = "corrupt-config"
CORRUPT_KEY = "corrupt-key"
UNREFERENCED_PACK = "unreferenced-pack"
CORRUPT_INPUT = "corrupt-input"
ODD_INPUT_KEY = "odd-input-key"
ORPHAN_DELIVERY = "orphan-delivery"
DUPLICATE_CLIENT_ID = "duplicate-client-id"
#: The record kind each entry kind's refs name.
BLOB_KINDS = {KIND_FILE: KIND_CHUNK, KIND_JSONL: KIND_SEGMENT, KIND_SQLITE: KIND_PAGEMAP}
#: Bytes of a pack ``--full`` reads at a time to check its name.
PACK_READ = 8 << 20
#: Bytes of whole index pages and page maps kept while the manifests are read (a delta's base).
KEPT_BYTES = 8 << 20
#: Child page references found sound, kept so that a new inner page's unchanged children
#: are not checked again (dropped all at once past this many).
SOUND_REFS = 1 << 15

ERROR = "error"      # the store is damaged: verify fails
WARNING = "warning"  # worth a look, but a healthy store can show it: verify still passes


class Finding(msgspec.Struct, kw_only=True):
    kind: str
    manifest: int | None
    key: str
    detail: str
    severity: str = ERROR


class VerifyResult(msgspec.Struct, kw_only=True):
    full: bool
    manifests: int = 0
    pages: int = 0
    packs: int = 0
    blobs: int = 0
    packs_hashed: int = 0
    snapshots: int = 0          # SQLite snapshots rebuilt and integrity-checked (full, sample)
    inputs: int = 0
    orphans: int = 0            # packs no manifest names or reaches (gc's orphans: it deletes them)
    orphans_marked: int = 0     # ... of them, those a gc tombstone names already
    orphan_bytes: int = 0       # ... the bytes the orphans hold
    sample: float | None = None  # --sample: the percentage of the reached packs whose content was checked
    seed: int | None = None     # ... the seed that chose them: the same seed chooses the same packs again
    packs_sampled: int = 0      # ... how many packs that was
    findings: list[Finding] = []

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]


def verify(repo: Repository, reporter: Reporter = SILENT, *, full: bool = False, sample: float | None = None,
           seed: int | None = None) -> VerifyResult:
    """Audit the store; see the module docstring. Never modifies anything. With
    ``sample`` (a percentage), ``full``'s content checks run on that share of the packs
    the manifests reach, chosen by ``seed`` (``sample_packs``)."""
    _check_sample_options(full, sample, seed)
    result = VerifyResult(full=full, sample=sample)
    if repo.config_problem is not None:
        result.findings.append(Finding(kind=CORRUPT_CONFIG, manifest=None, key="config", detail=repo.config_problem))
    packs = repo.pack_sizes()  # listed before the manifests: each manifest's own packs are looked for again
    # A checkpoint's index pages sit in one small pack: read once, whole, for all of them.
    repo = repo.reading_through(WholeReads(repo.store, lambda key: packs.get(pack_of(key) or "")))
    audit = _Manifests(repo, packs, result, full or sample is not None)
    for seq, manifest, mid in repo.iter_manifests_desc():
        result.manifests += 1
        if manifest is None:
            result.findings.append(Finding(kind=TORN_MANIFEST, manifest=seq, key=manifest_key(seq), detail=str(mid)))
            continue
        audit.manifest(manifest)
    result.findings.extend(audit.late)
    result.packs = len(packs)
    _check_unreferenced(repo, packs, audit.reach.packs, result)
    if full:
        _check_blobs(repo, audit.blobs, result, reporter)
        _check_snapshots(repo, audit.snapshots, result)
        _check_pack_names(repo, sorted(audit.reach.packs & packs.keys()), packs, result, reporter)
    elif sample is not None:
        _check_sample(repo, audit, packs, result, reporter, seed)
    _check_inputs(repo, result, full)
    _check_keys(repo, result)
    return result


def _check_sample_options(full: bool, sample: float | None, seed: int | None) -> None:
    if sample is None:
        if seed is not None:
            raise ConfigError("verify: a seed only chooses the packs a sample checks; no sample was asked for")
        return
    if full:
        raise ConfigError("verify: a full check reads every pack and a sample a share of them; ask for one of them")
    if not 0 < sample <= 100:
        raise ConfigError(f"verify: a sample of {sample:g}% is not a percentage above 0 up to 100")


def sample_packs(reached: list[str], percent: float, seed: int) -> list[str]:
    """The packs ``--sample percent --seed seed`` checks, by name: ``percent`` of the
    ``reached`` ones rounded up (one at least, of one or more), drawn by a generator
    seeded with ``seed`` from them in name order, so the same seed on the same packs
    draws the same ones."""
    import random

    names = sorted(reached)
    return sorted(random.Random(seed).sample(names, min(len(names), math.ceil(len(names) * percent / 100))))


def _check_sample(repo: Repository, audit: "_Manifests", packs: dict[str, int], result: VerifyResult,
                  reporter: Reporter, seed: int | None) -> None:
    """``--full``'s checks on a sample of the packs the manifests reach: each blob in
    them re-hashed, each snapshot whose page map is in them rebuilt and checked, and
    each of them hashed against its name. ``seed`` None: one is drawn (and recorded)."""
    if seed is None:
        import secrets

        seed = secrets.randbelow(1 << 32)
    chosen = sample_packs(list(audit.reach.packs & packs.keys()), result.sample, seed)
    result.seed, result.packs_sampled = seed, len(chosen)
    picked = set(chosen)
    _check_blobs(repo, {at: blob for at, blob in audit.blobs.items() if at[0] in picked}, result, reporter)
    _check_snapshots(repo, {refs: snap for refs, snap in audit.snapshots.items()
                            if any(ref.pack in picked for ref in refs)}, result)
    _check_pack_names(repo, chosen, packs, result, reporter)


class _Refused(NamedTuple):
    """An entry restore refuses whatever else its tree holds (``entry.own_problem``)."""

    path: str
    why: str


class _Short(NamedTuple):
    """A record of an entry whose pack is missing (``size`` None) or ends before ``end``."""

    pack: str
    path: str
    base: bool      # the record is a chunk's base
    end: int
    size: int | None


class _Manifests:
    """The audit of every manifest's trees and snapshots, newest first, each distinct
    index page and page map read once (``verify_shared``). Findings of a snapshot wait
    in ``late`` until every manifest is read; ``blobs`` (with ``full``) and ``snapshots``
    are what ``--full`` reads next; ``reach`` the packs the manifests reach."""

    def __init__(self, repo: Repository, packs: dict[str, int], result: VerifyResult, full: bool):
        self.repo, self.packs, self.result, self.full = repo, packs, result, full
        self.kept = RecordCache(KEPT_BYTES)   # whole pages and maps: a delta's base is read once
        self.reach = Reach(repo, self.kept)
        self.maps = MapBook(self.reach.read_map, packs)
        self.reach.load_map = self.maps.load
        self.trees = TreeAudit(self._load_page, self._leaf)
        # (pack, offset) -> (seq, ref, its record kind, its anchor or base, is some entry's last segment)
        self.blobs: dict[tuple[str, int], tuple[int, BlobRef, int, BlobRef | None, bool]] = {}
        self.snapshots: dict[tuple[BlobRef, ...], tuple[int, str, Entry]] = {}
        self.reported: set[tuple[int, str]] = set()  # (manifest, pack): one finding each
        self.looked: set[str] = set()                # packs the listing lacked, looked for again
        # tree -> path -> the newest entry of it met with nothing to report: an equal entry
        # in a later leaf (most of a leaf a tick replaces) is not checked or noted again
        self.sound: dict[str, dict[str, Entry]] = {}
        self.sound_refs: set[tuple[str, str]] = set()   # (id, pack) of child references found sound
        self.late: list[Finding] = []
        self._new: list[tuple[BlobRef, ...]] = []    # snapshots first met in this manifest
        self.seq, self.tree = 0, ""

    def manifest(self, manifest: Manifest) -> None:
        self.reach.packs.update(manifest.packs)
        self._look_again(manifest.packs)
        for name, tree in sorted(manifest.trees.items()):
            self.seq, self.tree = manifest.seq, name
            try:
                notes = self.trees.check(tree.root, tree)
            except ObjectNotFound as err:
                self.result.findings.append(Finding(kind=MISSING_OBJECT, manifest=manifest.seq, key=err.key,
                                                    detail=f"tree {name}: index page"))
                continue
            except CorruptObject as err:
                self.result.findings.append(Finding(kind=CORRUPT_PAGE, manifest=manifest.seq, key=err.key,
                                                    detail=f"tree {name}: {err.detail}"))
                continue
            self._report(manifest.seq, name, notes)
        for refs in self._new:
            self._check_snapshot(*self.snapshots[refs])
        self._new.clear()

    def _look_again(self, named: tuple[str, ...]) -> None:
        """HEAD each pack a manifest uploaded (``Manifest.packs``) that the listing lacks,
        and add the ones found: a checkpoint committing while verify runs puts its packs
        after the listing and its manifest before verify lists or reads the manifests;
        that manifest is whole (design §12: objects before the manifest), and no pack
        it names is missing. A pack still missing is reported where it is needed."""
        for pack in named:
            if pack not in self.packs and pack not in self.looked and is_id(pack):
                self.looked.add(pack)
                size = self.repo.store.head(pack_key(pack))
                if size is not None:
                    self.packs[pack] = size

    def _report(self, seq: int, name: str, notes: tuple) -> None:
        """One tree's findings: each entry restore refuses (why: its own problem, else the
        shortest non-directory entry it lies inside), then each pack per manifest."""
        refused: dict[str, tuple[int, str]] = {}
        for note in notes:
            if isinstance(note, (_Refused, Nested)):
                rank, why = (-1, note.why) if isinstance(note, _Refused) else (
                    len(note.parent), inside_problem(note.parent, note.kind))
                if rank < refused.get(note.path, (len(note.path), ""))[0]:
                    refused[note.path] = (rank, why)
        for path in sorted(refused):
            self.result.findings.append(Finding(kind=UNSAFE_PATH, manifest=seq, key=f"{name}/{path}",
                                                detail=str(UnsafePath(path, refused[path][1]))))
        for note in notes:
            if isinstance(note, _Short):
                who = f"tree {name}: {shown(note.path)}" + (" (a chunk's base)" if note.base else "")
                _report_pack(note.pack, note.end, note.size, seq, who, self.reported, self.result.findings)

    def _load_page(self, ref: BlobRef, key: str) -> Page:
        """One index page, read and checked (``index.LoadPage``); the first read of it
        tells ``reach`` what it needs (a bad page map is the snapshot check's to report)."""
        fresh = self.reach.enter_page(self.seq, self.tree, ref)
        if ref.pack not in self.packs:
            raise ObjectNotFound(pack_key(ref.pack))
        payload, base = self.repo.read_page(ref, self.kept)
        if base is not None and base.pack not in self.packs:
            raise ObjectNotFound(pack_key(base.pack))
        if fresh:
            self.reach.note_base(self.seq, self.tree, base)
        known, refs = self.sound.setdefault(self.tree, {}), self.sound_refs
        page = decode_page(payload, key, lambda item: known.get(item.path) == item if type(item) is Entry
                           else (item.ref.id, item.ref.pack) in refs)
        if page.level:
            if len(refs) > SOUND_REFS:
                refs.clear()
            refs.update((c.ref.id, c.ref.pack) for c in page.children)
        if fresh:
            self.result.pages += 1
            try:
                new = [e for e in page.entries if known.get(e.path) != e]   # the rest are noted already
                self.reach.note_entries(self.seq, self.tree, msgspec.structs.replace(page, entries=new))
            except (CorruptObject, ObjectNotFound):
                pass  # a damaged page map: the snapshot checks report it, once, where it is named
        return page

    def _check_snapshot(self, seq: int, name: str, entry: Entry) -> None:
        """A snapshot's maps fit together and its size is its pages' (``MapBook.snapshot``);
        every record its pages (and the bases of its group deltas) live in is in a pack
        that exists and is long enough. Only when a map names a missing or short pack
        are its pages resolved again, to name the records this snapshot needs."""
        packs, late, where = self.packs, self.late, f"tree {name}: {shown(entry.path)}"
        if any(ref.pack not in packs or ref.offset + ref.length > packs[ref.pack] for ref in entry.refs):
            return  # already reported
        try:
            count, page_size, sound = self.maps.snapshot(entry.refs)
        except ObjectNotFound as err:  # the pack of a map delta's base
            _report_pack(err.key.rsplit("/", 1)[-1], 0, None, seq, f"{where} (a page map's base)", self.reported, late)
            return
        except CorruptObject as err:
            late.append(Finding(kind=BAD_SNAPSHOT, manifest=seq, key=f"{name}/{entry.path}", detail=f"page map: {err}"))
            return
        if count * page_size != entry.size:
            late.append(Finding(kind=BAD_SNAPSHOT, manifest=seq, key=f"{name}/{entry.path}",
                                detail=f"the entry says {entry.size:,} bytes, its page maps {count:,} pages of "
                                       f"{page_size:,}"))
        if sound:
            return
        snap = load_snapshot(entry.refs, lambda ref: self.repo.read_blob(ref, KIND_PAGEMAP))
        needed = {loc.rec: "database page" for loc in snap.pages}
        if snap.deltas:  # any page of the full map may be a base of a group delta
            for pgno, loc in snap.base.items():
                needed.setdefault(loc.rec, f"base page {pgno} of a page delta")
        for rec, what in sorted(needed.items(), key=lambda item: (item[0].pack, item[0].offset)):
            _pack_problem(rec, packs, seq, f"{where} ({what})", self.reported, late)

    def _leaf(self, page: Page) -> tuple:
        """What one leaf page holds that a tree naming it reports (``_Refused``, ``_Short``);
        its snapshots and, with ``full``, its blobs are noted once here."""
        notes: list = []
        packs, known = self.packs, self.sound.setdefault(self.tree, {})
        for e in page.entries:
            if known.get(e.path) == e:
                continue
            before = len(notes)
            why = own_problem(e)
            if why is not None:
                notes.append(_Refused(e.path, why))
            if e.kind == KIND_SQLITE and e.refs not in self.snapshots:
                self.snapshots[e.refs] = (self.seq, self.tree, e)
                self._new.append(e.refs)
            anchor_of = anchor_refs(e.refs) if e.kind == KIND_JSONL else [None] * len(e.refs)
            base_of = e.bases or [None] * len(e.refs)
            for i, (ref, anchor, base) in enumerate(zip(e.refs, anchor_of, base_of)):
                short = _short(ref, packs, e.path) or (base is not None and _short(base, packs, e.path, True))
                if short:
                    notes.append(short)
                    continue
                if self.full:
                    last = e.kind == KIND_JSONL and i == len(e.refs) - 1
                    got = self.blobs.get((ref.pack, ref.offset))
                    if got is None or (last and not got[4]):
                        self.blobs[(ref.pack, ref.offset)] = (self.seq, ref, BLOB_KINDS[e.kind], anchor or base, last)
            if len(notes) == before:
                known[e.path] = e
        return tuple(notes)


def _check_keys(repo: Repository, result: VerifyResult) -> None:
    """An encrypted store's key objects and key sets (``corrupt-key``): each intact and
    its own; a key object outside the newest set is a warning (a key change that stopped)."""
    if not repo.codec.encrypted:
        return
    from .crypto.manage import key_problems

    for key, problem, warning in key_problems(repo.store, repo.store_id, repo.codec):
        result.findings.append(Finding(kind=CORRUPT_KEY, manifest=None, key=key, detail=problem,
                                       severity=WARNING if warning else ERROR))


def _check_inputs(repo: Repository, result: VerifyResult, full: bool) -> None:
    """The input journal (design §20), from one listing of ``inputs/``: every key has an
    input key's shape and holds at least a record header; a delivery marker whose input
    is gone is a warning (a gc sweep deletes the input first, and a sweep that stopped
    or runs now leaves one). With ``full`` every input, marker and claim is read and
    verified (its record, its fields, the key they belong under), every marker must name
    the input record at its sequence, and a client id two inputs of a session carry is
    a warning (two appenders in different processes sent it at the same moment)."""
    session = _InputSession(repo, result, full, "")
    for key, size in repo.store.list_sizes(INPUT_PREFIX):
        parsed = parse_input_key(key)
        if parsed is None:
            result.findings.append(Finding(kind=ODD_INPUT_KEY, manifest=None, key=key, severity=WARNING,
                                           detail="not a key the input journal writes; journal leaves it alone"))
            continue
        if parsed[0] != session.sdir:
            session.finish()
            session = _InputSession(repo, result, full, parsed[0])
        session.add(key, parsed[1], parsed[2], size)
    session.finish()


class _InputSession:
    """One session directory of ``_check_inputs``: markers are listed before inputs."""

    def __init__(self, repo: Repository, result: VerifyResult, full: bool, sdir: str):
        self.repo, self.result, self.full, self.sdir = repo, result, full, sdir
        self.markers: dict[int, str | None] = {}   # seq -> the input record it names (full), else None
        self.clients: dict[str, int] = {}

    def add(self, key: str, letter: str, seq: int | None, size: int) -> None:
        named = self.markers.pop(seq, None) if letter == INPUT_LETTER else None
        self.result.inputs += letter == INPUT_LETTER
        if size < HEADER.size + self.repo.codec.overhead:
            self._corrupt(key, f"{size} bytes, shorter than a record header")
            return
        if letter == DELIVERY_LETTER:
            self.markers[seq] = None
        if not self.full:
            return
        try:
            data = self.repo.store.get(key)
            if letter == DELIVERY_LETTER:
                self.markers[seq] = decode_delivery(data, key, self.repo.codec).input
            elif letter == CLAIM_LETTER:
                decode_claim(data, key, self.repo.codec)
            else:
                self._input(key, seq, data, named)
        except ObjectNotFound:
            return  # gc deleted it since the listing
        except CorruptObject as err:
            self._corrupt(key, err.detail)

    def _input(self, key: str, seq: int, data: bytes, named: str | None) -> None:
        head, _text, rid = decode_input(data, key, self.repo.codec)
        if named is not None and named != rid:
            said, held = ids_apart(named, rid)
            self._corrupt(delivery_key(self.sdir, seq), f"names input record {said}, the input at #{seq} is {held}")
        if head.client_id is not None:
            first = self.clients.setdefault(head.client_id, seq)
            if first != seq:
                self.result.findings.append(Finding(
                    kind=DUPLICATE_CLIENT_ID, manifest=None, key=key, severity=WARNING,
                    detail=f"client id {head.client_id!r} was stored as #{first} too; a retry answers with #{first}"))

    def finish(self) -> None:
        for seq in sorted(self.markers):
            self.result.findings.append(Finding(
                kind=ORPHAN_DELIVERY, manifest=None, key=delivery_key(self.sdir, seq), severity=WARNING,
                detail="a delivery marker whose input is gone: a gc sweep deletes the input first and the marker "
                       "in its next run (`journal gc --keep-inputs-within` removes it)"))

    def _corrupt(self, key: str, detail: str) -> None:
        self.result.findings.append(Finding(kind=CORRUPT_INPUT, manifest=None, key=key, detail=detail))


def _short(ref: BlobRef, packs: dict[str, int], path: str, base: bool = False) -> _Short | None:
    """A ``_Short`` when ``ref``'s pack is missing or too short for it: a pack cut short
    is found without reading it."""
    size, end = packs.get(ref.pack), ref.offset + ref.length
    return None if size is not None and end <= size else _Short(ref.pack, path, base, end, size)


def _pack_problem(ref: BlobRef, packs: dict[str, int], seq: int, who: str, reported, findings) -> bool:
    """True (and one finding per manifest and pack) when ``ref``'s pack is missing or
    too short for it."""
    short = _short(ref, packs, "")
    if short is not None:
        _report_pack(ref.pack, short.end, short.size, seq, who, reported, findings)
    return short is not None


def _report_pack(pack: str, end: int, size: int | None, seq: int, who: str, reported, findings) -> None:
    """One finding per manifest and pack: missing (``size`` None), or ending before ``end``."""
    if (seq, pack) in reported:
        return
    reported.add((seq, pack))
    if size is None:
        findings.append(Finding(kind=MISSING_OBJECT, manifest=seq, key=pack_key(pack), detail=f"{who} needs it"))
    else:
        findings.append(Finding(kind=SHORT_PACK, manifest=seq, key=pack_key(pack),
                                detail=f"{who} needs bytes up to {end:,}, the pack holds {size:,}"))


def _check_unreferenced(repo: Repository, packs: dict[str, int], reached: set[str], result: VerifyResult) -> None:
    """Count the orphans, the packs no manifest names or reaches (as gc counts them), and
    those of them a tombstone names already; one finding per orphan no tombstone names
    (gc knows the others as garbage). Not when a manifest is unreadable: it may name any
    of them (and it is a finding of its own)."""
    if any(f.kind == TORN_MANIFEST for f in result.findings):
        return
    orphans = packs.keys() - reached
    marked = tombstoned_packs(repo.store, repo.codec) & orphans if orphans else set()
    result.orphans, result.orphans_marked = len(orphans), len(marked)
    result.orphan_bytes = sum(packs[p] for p in orphans)
    loose = sorted(orphans - marked)
    if not loose:
        return
    if result.manifests:
        severity, why = WARNING, ("no checkpoint names it and no gc tombstone does: a checkpoint that crashed, "
                                  "lost a commit race or is running now uploaded it (`journal gc` deletes it), "
                                  "or the store lost the manifest that named it")
    else:
        severity, why = ERROR, ("the store holds packs but no manifest at all: its checkpoints were deleted "
                                "(restore finds nothing here), unless a very first checkpoint is running now")
    for pack in loose:
        result.findings.append(Finding(kind=UNREFERENCED_PACK, manifest=None, key=pack_key(pack),
                                       detail=f"{packs[pack]:,} bytes; {why}", severity=severity))


def _check_pack_names(repo, names: list[str], sizes: dict[str, int], result, reporter) -> None:
    """``--full``: every pack a manifest reaches hashes to its name (the SHA-256 of its
    stored bytes, design §4). A record's own checks miss a changed byte that leaves its
    payload intact (a zstd frame header bit that only widens the window decodes to the
    same bytes); the pack's name does not, and the next such change may not be harmless.
    A pack some finding already names is not read again (one finding per damage)."""
    named = {f.key.split("@", 1)[0] for f in result.findings}
    for done, pack in enumerate(names, 1):
        key = pack_key(pack)
        if key in named:
            continue
        digest = hashlib.sha256()
        try:
            for start in range(0, sizes[pack], PACK_READ):
                digest.update(repo.store.get(key, start, min(start + PACK_READ, sizes[pack])))
        except ObjectNotFound:
            continue   # reported with the blobs it holds
        result.packs_hashed += 1
        if digest.hexdigest() != pack:
            result.findings.append(Finding(kind=CORRUPT_OBJECT, manifest=None, key=key,
                                           detail="its bytes do not hash to its name: changed after it was written"))
        reporter.progress(done, len(names))


def _check_snapshots(repo, snapshots, result) -> None:
    """Rebuild every SQLite snapshot into a temp file and run integrity_check on it: the
    snapshots over one full map one after another, in manifest order, each made from
    the one before (``ChainRebuild``: the full map's records read once)."""
    first: dict[tuple[BlobRef, ...], int] = {}   # full map -> when first met (a damaged entry may name none)
    for _seq, _name, entry in snapshots.values():
        first.setdefault(entry.refs[:1], len(first))
    order = sorted(snapshots.values(), key=lambda s: (first[s[2].refs[:1]], s[0]))
    with tempfile.TemporaryDirectory(prefix="journal-verify-") as tmp, ChainRebuild(repo, tmp) as chain:
        for seq, name, entry in order:
            try:
                chain.rebuild(entry)  # every record the maps name
                # integrity_check: all quick_check does, and more
                problem = integrity_check(chain.path)
            except (CorruptObject, ObjectNotFound) as err:
                problem = str(err)
            finally:
                chain.clear_companions()
            result.snapshots += 1
            if problem:
                result.findings.append(Finding(kind=BAD_SNAPSHOT, manifest=seq, key=f"{name}/{entry.path}",
                                               detail=problem))


def _check_blobs(repo, blobs, result, reporter) -> None:
    total = len(blobs)
    for done, (seq, ref, kind, anchor, last) in enumerate(blobs.values(), 1):
        is_segment = kind == KIND_SEGMENT
        try:
            if is_segment:
                payload = read_segment(repo, ref, anchor)
            elif anchor is not None:  # a file's delta chunk and its base
                payload = decode_record(repo.read_record(ref), key=blob_location(ref), expect_id=ref.id,
                                        expect_kind=kind, expect_size=ref.size, base=chunk_reader(repo)(anchor),
                                        codec=repo.codec)
            else:
                payload = repo.read_blob(ref, kind)
        except ObjectNotFound as err:
            result.findings.append(Finding(kind=MISSING_OBJECT, manifest=seq, key=err.key, detail="blob"))
            continue
        except CorruptObject as err:
            result.findings.append(Finding(kind=CORRUPT_OBJECT, manifest=seq, key=err.key, detail=err.detail))
            continue
        result.blobs += 1
        if last and payload and not payload.endswith(b"\n"):
            result.findings.append(Finding(kind=TORN_SEGMENT, manifest=seq, key=blob_location(ref),
                                           detail="the last JSONL segment of an entry does not end in a newline"))
        reporter.progress(done, total)

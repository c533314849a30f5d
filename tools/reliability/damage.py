"""Damage sweeps: every kind of stored object damaged or crafted, then verify, restore
and gc judged.

The store is built once by an agent and journal (``build``): five checkpoints holding
every record kind (chunks whole and delta, segments whole and delta, index pages whole
and delta, page maps full and delta, page groups whole and delta), two gcs (so there
are tombstones) and a lease left by a gc that died. Each *case* copies that store,
damages one object and judges what journal makes of it, in forked children bounded
in memory and time:

* a **record** (inside a pack, by kind), a **pack**, a **manifest** (the newest, and
  an older one), the **config**: ``flip`` (one byte), ``truncate``, ``empty`` (a
  record zeroed, an object made empty), ``delete``, ``swap`` (the bytes of another of
  its kind). ``verify --full`` must report an error, except where the store alone
  cannot tell (``UNSEEN``: a deleted manifest is a shorter history, which the writer's
  lineage guard refuses as ``HistoryLost``; a config swapped for another store's is a
  valid config, which the writer refuses as ``ForeignStore``).
* an **input**, a **delivery marker** or a **client-id claim** of the input journal,
  damaged the same ways (a swap takes another session's: two inputs of one session
  trading places cannot be seen, since an input's sequence is its key's): verify must
  report each but a deletion (``HARMLESS``), and reading the inputs back never shows a
  text no append stored.
* a **tombstone** or the **lease**, damaged the same ways: gc's bookkeeping. verify
  must stay clean, gc must run (a damaged tombstone is ignored with a warning; an
  unreadable lease is taken over), and every manifest it keeps must still restore.
* a **crafted** checkpoint (``CRAFTED``): traversal paths, duplicate paths, huge
  sizes, a page naming itself or one child over and over, a decompression bomb:
  verify reports it; a restore takes the tree from the checkpoint before (exit 3).

And a new container's restore of each damaged store: it never writes a byte that no
checkpoint held (every restored path is some checkpoint's version of it), it ends
clean (exit 0, everything exactly the newest checkpoint) only when the damage is in
nothing the newest checkpoint needs, and otherwise falls back (exit 3) or reports
what it lost (exit 1); it writes nothing outside its container. ``gc --dry-run``
ends in a result or a ``JournalError``, never a traceback.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from journal.format.index import build_index
from journal.format.model import KIND_FILE, KIND_SQLITE, BlobRef, Entry, Manifest, Page, PageRef, TreeRoot, encode
from journal.format.objects import HEADER, KIND_CHUNK, KIND_NAMES, KIND_PAGE, KIND_PAGEMAP, encode_record
from journal.repository.pack import PackWriter

from .checks import Trees, differences
from .procs import run_forked
from .world import Agent, Container

DAMAGES = ("flip", "truncate", "empty", "delete", "swap")
RECORD_DAMAGES = ("flip", "truncate", "empty", "swap")
#: Damage the store alone cannot show (see the module docstring), and who refuses it.
UNSEEN = {("manifest-newest", "delete"): "HistoryLost", ("config", "swap"): "ForeignStore"}
#: What the store cannot tell from gc's own work, or from an input not yet acted on: an
#: older manifest deleted (gc expires them; each manifest is self-contained), an input
#: deleted (gc expires inputs: a sequence with no input is what it leaves), a delivery
#: marker deleted (the input reads as not delivered, and is delivered again), a client-id
#: claim deleted (a retry of that client id may store its input twice; verify --full
#: then warns of the client id stored twice).
HARMLESS = {("manifest-old", "delete"), ("input", "delete"), ("delivery", "delete"), ("claim", "delete")}
INPUT_TARGETS = ("input", "delivery", "claim")
#: What every crafted file holds (a valid blob of the crafted checkpoint).
CRAFTED_BYTES = b"hello\n"
MEMORY = 512 << 20
TIMEOUT = 120.0


@dataclass
class Case:
    target: str          # "record:chunk", "pack", "manifest-newest", "manifest-old", "config", "tombstone",
                         # "lease", or "crafted:<name>"
    damage: str
    key: str = ""        # the object damaged
    offset: int = -1     # a record's place in its pack (a record, or a pack's flip or cut in one)
    length: int = 0
    at: int = -1         # the byte flipped, or where the object is cut
    newest_needs: bool = False  # whether the newest checkpoint needs what is damaged

    def name(self) -> str:
        where = f"{self.key}@{self.offset}" if self.offset >= 0 else self.key
        return f"{self.target} {self.damage} ({where})"


@dataclass
class DamageResult:
    cases: int = 0
    by_target: dict[str, int] = field(default_factory=dict)
    reported: int = 0          # cases verify --full reported (of those it must)
    must_report: int = 0
    restores: dict[int, int] = field(default_factory=dict)   # restore exit code -> cases
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        codes = ", ".join(f"exit {k}: {v}" for k, v in sorted(self.restores.items()))
        return (f"damage: {self.cases} cases, verify --full reported {self.reported} of the {self.must_report} it "
                f"must, restores ({codes}), {len(self.problems)} violations")


class DamageSweep:
    def __init__(self, workdir: str | Path, seed: int = 0):
        self.workdir = Path(workdir)
        self.template = self.workdir / "template"
        self.work = self.workdir / "work"
        self.seed = seed
        self.versions: dict[int, Trees] = {}
        self.records: list[tuple[str, int, int, int]] = []   # (pack key, offset, length, kind) some manifest reads
        self.needed: set[tuple[str, int]] = set()            # (pack key, offset) the newest checkpoint reads

    # --- the store -------------------------------------------------------------------

    def build(self) -> None:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        a = Container(self.template / "a", str(self.template / "store"))
        agent = Agent(a, self.seed)
        rng = random.Random(self.seed)
        for i in range(5):
            agent.step(appends=rng.randint(2, 6), tear=True, commits=3)
            trees = a.describe(agent.dbs)
            self._must(run_forked(a.checkpoint()), f"checkpoint {i + 1}")
            self.versions[i + 1] = trees
            if i in (2, 3):  # the first tombstones a manifest, the second sweeps it and tombstones the next
                self._must(run_forked(a.gc(keep_last=2)), "a gc")
        agent.close()
        self._must(run_forked(_put_lease(str(self._store()))), "the lease")
        self.texts = set(self._must(run_forked(_put_inputs(str(self._store()))), "the inputs").value)
        self._index()

    @staticmethod
    def _must(out, what: str):
        if not out.ok:
            raise RuntimeError(f"damage: building the store: {what}: {out.status} {out.message[-500:]}")
        return out

    def _store(self, root: Path | None = None) -> Path:
        return (root or self.template) / "store"

    @property
    def inputs(self) -> list[str]:
        store = self._store()
        return sorted(str(p.relative_to(store)) for p in (store / "inputs").rglob("*") if p.is_file())

    def _index(self) -> None:
        """Every record of every pack that some manifest reads (packs are records back to
        back; a pack outlives some of its records: gc deletes whole packs only, so a
        manifest it expired leaves records nothing reads, and damage to them is no damage),
        and which of them the newest checkpoint reads."""
        from journal.format.objects import parse_header

        store = self._store()
        out = self._must(run_forked(lambda: _reads(str(store))), "walking the manifests")
        reads, self.needed = out.value
        for path in sorted((store / "packs").rglob("*")):
            if not path.is_file():
                continue
            data = path.read_bytes()
            key = str(path.relative_to(store))
            offset = 0
            while offset + HEADER.size <= len(data):
                header = parse_header(data[offset:offset + HEADER.size], key=key)
                if (key, offset) in reads:
                    self.records.append((key, offset, HEADER.size + header.stored_size, header.kind))
                offset += HEADER.size + header.stored_size

    # --- cases -----------------------------------------------------------------------

    def cases(self, every: bool, rng: random.Random) -> list[Case]:
        """Every object damaged every way (``every``); else one object of each kind, each
        damaged one way (drawn by ``rng``), and every crafted checkpoint."""
        store = self._store()
        out: list[Case] = []
        by_kind: dict[int, list[tuple[str, int, int, int]]] = {}
        for rec in self.records:
            by_kind.setdefault(rec[3], []).append(rec)
        for kind, recs in sorted(by_kind.items()):
            for damage in RECORD_DAMAGES if every else [rng.choice(RECORD_DAMAGES)]:
                for key, offset, length, _ in (recs if every else [rng.choice(recs)]):
                    out.append(Case(f"record:{KIND_NAMES[kind]}", damage, key, offset, length,
                                    rng.randrange(offset, offset + length), (key, offset) in self.needed))
        packs = sorted({rec[0] for rec in self.records})
        manifests = sorted(str(p.relative_to(store)) for p in (store / "manifests").iterdir())
        tombstones = sorted(str(p.relative_to(store)) for p in (store / "tombstones").iterdir())
        if not every:
            packs, tombstones = [rng.choice(packs)], tombstones[:1]
            manifests = [rng.choice(manifests[:-1]), manifests[-1]]
        inputs = {t: [k for k in self.inputs if _input_target(k) == t] for t in INPUT_TARGETS}
        if not every:
            inputs = {t: [rng.choice(keys)] for t, keys in inputs.items()}
        objects = [("pack", k) for k in packs] + [("manifest-newest", manifests[-1])] + \
                  [("manifest-old", k) for k in manifests[:-1]] + [("config", "config")] + \
                  [("tombstone", k) for k in tombstones] + [("lease", "leases/gc")] + \
                  [(t, k) for t in INPUT_TARGETS for k in inputs[t]]
        for target, key in objects:
            for damage in DAMAGES if every else [rng.choice(DAMAGES)]:
                case = Case(target, damage, key, newest_needs=target in ("manifest-newest", "config"))
                if target == "pack":  # a flip or a cut falls in a record some manifest reads
                    _, case.offset, case.length, _ = rng.choice([r for r in self.records if r[0] == key])
                    case.at = rng.randrange(case.offset, case.offset + case.length)
                    case.newest_needs = any(k == key and (damage not in ("flip", "truncate") or
                                                          (o == case.offset if damage == "flip" else
                                                           o + self._length(k, o) > case.at))
                                            for k, o in self.needed)
                out.append(case)
        out += [Case(f"crafted:{name}", "crafted", newest_needs=True) for name in CRAFTED]
        return out

    def _length(self, key: str, offset: int) -> int:
        return next(r[2] for r in self.records if (r[0], r[1]) == (key, offset))

    def reset(self) -> Path:
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        shutil.copytree(self._store(), self._store(self.work))
        return self._store(self.work)

    def apply(self, case: Case, store: Path, rng: random.Random) -> None:
        if case.target.startswith("crafted:"):  # in a child: the pack writer's upload threads stay there
            craft = CRAFTED[case.target.split(":", 1)[1]]
            self._must(run_forked(lambda: craft(str(store), self.work / "spool")), case.name())
            return
        path = store / case.key
        data = bytearray(path.read_bytes()) if path.exists() else bytearray()
        record = case.target.startswith("record:")
        lo, hi = (case.offset, case.offset + case.length) if record else (0, len(data))
        at = case.at if case.at >= 0 else rng.randrange(len(data)) if data else 0
        if case.damage == "delete":
            path.unlink()
            return
        if case.damage == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif case.damage == "truncate":
            del data[at:]
        elif case.damage == "empty":
            data[lo:hi] = bytes(hi - lo) if record else b""
        elif case.damage == "swap":
            data[lo:hi] = self._other(case, store, rng)
        path.write_bytes(bytes(data))

    def _other(self, case: Case, store: Path, rng: random.Random) -> bytes:
        """The bytes of another object of the same kind (a record: resized to this one's
        length, so the pack keeps its shape)."""
        if case.target.startswith("record:"):
            same = [r for r in self.records if KIND_NAMES[r[3]] == case.target.split(":")[1]
                    and (r[0], r[1]) != (case.key, case.offset)]
            if not same:
                return bytes(case.length)
            key, offset, length, _ = rng.choice(same)
            other = (store / key).read_bytes()[offset:offset + length]
            return (other + bytes(case.length))[:case.length]
        if case.target == "config":
            return _other_config()
        if case.target in INPUT_TARGETS:  # another session's: within one, two inputs may trade places unseen
            others = [k for k in self.inputs if _input_target(k) == case.target
                      and k.split("/")[1] != case.key.split("/")[1]]
            return (store / rng.choice(others)).read_bytes()
        siblings = [p for p in (store / case.key).parent.parent.rglob("*")
                    if p.is_file() and str(p.relative_to(store)) != case.key and
                    str(p.relative_to(store)).split("/")[0] == case.key.split("/")[0]]
        return rng.choice(siblings).read_bytes() if siblings else b""

    # --- judging ---------------------------------------------------------------------

    def run(self, every: bool = True, seed: int = 0) -> DamageResult:
        self.build()
        rng = random.Random(seed)
        result = DamageResult()
        for case in self.cases(every, rng):
            store = self.reset()
            self.apply(case, store, rng)
            result.cases += 1
            result.by_target[case.target] = result.by_target.get(case.target, 0) + 1
            result.problems += [f"{case.name()}: {p}" for p in self.judge(case, store, result)]
        shutil.rmtree(self.work, ignore_errors=True)
        return result

    def judge(self, case: Case, store: Path, result: DamageResult) -> list[str]:
        problems = []
        url = str(store)
        a = Container(self.work / "a", url)
        bookkeeping = case.target in ("tombstone", "lease")
        verify = run_forked(a.verify(), memory=MEMORY, timeout=TIMEOUT)
        if not verify.ok:
            problems.append(f"verify --full ended {verify.status}: {verify.error}: {_last(verify.message)}")
        elif bookkeeping:
            if verify.value["errors"]:
                problems.append(f"verify --full reports gc's bookkeeping as damage: {verify.value['errors'][:2]}")
        elif (case.target, case.damage) not in UNSEEN and (case.target, case.damage) not in HARMLESS:
            result.must_report += 1
            kinds = {kind for kind, *_ in verify.value["errors"]}
            want = CRAFTED[case.target.split(":", 1)[1]].finding if case.target.startswith("crafted:") else None
            if kinds and (want is None or want in kinds):
                result.reported += 1
            else:
                problems.append(f"verify --full does not report it (findings: {sorted(kinds)}, expected "
                                f"{want or 'any error'})")
        outside = _files(self.work, exclude=self.work / "fresh")
        fresh = Container(self.work / "fresh", url)
        restore = run_forked(fresh.restore(), memory=MEMORY, timeout=TIMEOUT)
        if _files(self.work, exclude=self.work / "fresh") != outside:
            problems.append("the restore wrote outside its container")
        code = _exit_code(restore)
        result.restores[code] = result.restores.get(code, 0) + 1
        if code == -1:
            problems.append(f"restore ended {restore.status}: {restore.error}: {_last(restore.message)}")
        else:
            problems += self._judge_restore(case, fresh, code, restore)
        gc = run_forked(_gc_dry_run(url), memory=MEMORY, timeout=TIMEOUT)
        if gc.status not in ("ok", "error"):
            problems.append(f"gc --dry-run ended {gc.status}: {_last(gc.message)}")
        if bookkeeping:
            problems += self._judge_gc(a, url)
        if case.target in INPUT_TARGETS:
            problems += self._judge_inputs(url)
        if (case.target, case.damage) in UNSEEN:
            problems += self._judge_writer(case, store)
        return problems

    def _judge_restore(self, case: Case, fresh: Container, code: int, restore) -> list[str]:
        newest = self.versions[max(self.versions)]
        got = fresh.describe() if code in (0, 1, 3) else {}
        crafted = CRAFTED.get(case.target.split(":", 1)[1]) if case.target.startswith("crafted:") else None
        problems = []
        for tree, paths in got.items():
            for path, value in paths.items():
                if crafted is not None and value[:2] == ("file", _sha(CRAFTED_BYTES)):
                    continue  # a sound entry of the crafted checkpoint, restored beside a refused one
                if not any(v.get(tree, {}).get(path) == value for v in self.versions.values()):
                    problems.append(f"restore wrote {tree}/{path} as {value[:2]}, which no checkpoint held")
        unseen = (case.target, case.damage) in UNSEEN
        if code == 0 and got != newest and not unseen:
            problems.append("restore exited 0 with trees that are not the newest checkpoint's: "
                            + "; ".join(differences(got, newest)))
        # A damaged byte that changes nothing restore verifies (a bit of a zstd frame header
        # that still decodes to the same bytes, each checked against its content id) leaves
        # the newest checkpoint whole: verify --full finds it by the pack's name (design
        # §11, invariant 3); a restore that wrote exactly the newest trees lost nothing.
        if code == 0 and case.newest_needs and not unseen and got != newest:
            problems.append("restore exited 0 though the newest checkpoint needs what is damaged")
        if code == 2:
            problems.append(f"restore refused the store as a configuration error: {restore.error}: "
                            f"{_last(restore.message)}")
        if crafted is not None and code != crafted.restore:
            problems.append(f"restore of the crafted checkpoint exited {code}, not {crafted.restore}")
        return problems

    def _judge_gc(self, a: Container, url: str) -> list[str]:
        """gc runs (grace 0, twice: mark and sweep) despite the damaged bookkeeping, and
        every manifest it leaves restores whole."""
        from .afterwards import failed, manifests_restore_whole

        problems = []
        for _ in range(2):
            out = run_forked(a.gc(keep_last=2), memory=MEMORY, timeout=TIMEOUT)
            problem = failed(out, "gc over damaged bookkeeping")
            if problem:
                return [problem]
        seqs = run_forked(a.seqs())
        if seqs.ok:
            problems += manifests_restore_whole(self.work, url, self.versions, seqs.value)
        return problems

    def _judge_inputs(self, url: str) -> list[str]:
        """Reading the damaged input journal (``journal input list``, then ``show`` of each
        input listed) ends in results or ``JournalError``s, and never shows a text that
        was not appended."""
        out = run_forked(_read_inputs(url), memory=MEMORY, timeout=TIMEOUT)
        if out.status != "ok":
            return [f"reading the inputs ended {out.status}: {out.error}: {_last(out.message)}"]
        wrong = [text for text in out.value if text not in self.texts]
        return [f"an input read back as {wrong[0][:60]!r}, which no append stored"] if wrong else []

    def _judge_writer(self, case: Case, store: Path) -> list[str]:
        """The writer whose history the store no longer matches refuses to checkpoint."""
        writer = self.work / "writer"
        shutil.copytree(self.template / "a", writer / "a", symlinks=True)
        out = run_forked(Container(writer / "a", str(store)).checkpoint(allow_deletions=True))
        want = UNSEEN[(case.target, case.damage)]
        if out.error != want:
            return [f"the writing container's checkpoint ended {out.status} {out.error}, not {want}"]
        return []


def _other_config() -> bytes:
    from journal.format.model import StoreInfo
    from journal.repository.repository import seal_config, utc_now

    return seal_config(StoreInfo(store_id=os.urandom(16).hex(), created=utc_now()))


def _input_target(key: str) -> str:
    return {"i": "input", "d": "delivery", "c": "claim"}[key.rsplit("/", 1)[-1][0]]


def _put_inputs(url: str) -> Callable[[], list[bytes]]:
    """Two sessions of three inputs, the first of each with a client id and delivered."""
    def run() -> list[bytes]:
        from journal.inputs.log import InputLog
        from journal.repository.repository import Repository
        from journal.store import open_store

        log = InputLog(Repository.open(open_store(url)))
        texts = []
        for session in ("s1", "s2"):
            for i in range(3):
                text = f"prompt {i} of session {session}\n".encode()
                got = log.append("codex", session, text, client_id=f"{session}-c{i}" if i == 0 else None)
                if i == 0:
                    log.mark_delivered(got.id)
                texts.append(text)
        return texts
    return run


def _read_inputs(url: str) -> Callable[[], list[bytes]]:
    def run() -> list[bytes]:
        from journal.errors import JournalError
        from journal.inputs.log import InputLog
        from journal.repository.repository import Repository
        from journal.store import open_store

        log = InputLog(Repository.open(open_store(url)))
        texts = []
        for info in list(log.list()):
            try:
                texts.append(log.show(info.id)[1])
            except JournalError:
                continue  # a damaged marker beside a sound input: show refuses it, by name
        return texts
    return run


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _put_lease(url: str) -> Callable[[], None]:
    """A lease a gc that died left behind, expired since."""
    def run() -> None:
        from journal.gc.lease import LEASE_KEY, LeaseRecord
        from journal.store import open_store

        record = LeaseRecord(holder="host gone pid 1", token="0" * 32, acquired_ns=1, expires_ns=2)
        open_store(url).put_if_absent(LEASE_KEY, msgspec.json.encode(record))
    return run


def _last(message: str) -> str:
    return message.strip().splitlines()[-1] if message and message.strip() else ""


def _exit_code(out) -> int:
    """What ``journal restore`` would exit with: 0, 3 (a fallback), 1 (incomplete, or a
    JournalError), 2 (a ConfigError); -1 for a crash or a kill."""
    if out.ok:
        return 1 if not out.value["complete"] else 3 if out.value["fallback"] else 0
    if out.status == "error":
        return 2 if out.error in ("ConfigError", "ExportNotEmpty") else 1
    return -1


def _files(root: Path, exclude: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == exclude or exclude in Path(dirpath).parents:
            dirnames[:] = []
            continue
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_size, st.st_mtime_ns)
    return out


def _gc_dry_run(url: str) -> Callable[[], int]:
    def run() -> int:
        from journal.gc.retention import Policy
        from journal.gc.run import gc
        from journal.repository.repository import Repository
        from journal.store import open_store

        plan, _ = gc(Repository.open(open_store(url)), Policy(keep_last=1), 0.0, dry_run=True)
        return plan.delete_count
    return run


def _reads(url: str) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """(pack key, offset) of every record some manifest reads, and of those the newest reads."""
    from journal.repository.repository import Repository
    from journal.store import open_store

    seqs = Repository.open(open_store(url)).manifest_seqs()
    every = [_needed(url, seq) for seq in seqs]
    return set().union(*every), every[-1]


def _needed(url: str, seq: int) -> set[tuple[str, int]]:
    """(pack key, offset) of every record the restore of checkpoint ``seq`` reads: index
    pages and their bases, every blob and chunk base of every entry, and every page map
    (and its base) and page group of every snapshot."""
    from journal.format.index import decode_page
    from journal.format.pagemap import load_snapshot
    from journal.repository.pack import pack_key
    from journal.repository.repository import Repository
    from journal.store import open_store

    repo = Repository.open(open_store(url))
    manifest, _ = repo.load_manifest(seq)
    out: set[tuple[str, int]] = set()

    def need(ref: BlobRef | None) -> None:
        if ref is not None:
            out.add((pack_key(ref.pack), ref.offset))

    def read_map(ref: BlobRef) -> bytes:
        payload, base = repo.read_based(ref, KIND_PAGEMAP)
        need(ref)
        need(base)
        return payload

    for tree in manifest.trees.values():
        stack = [tree.root] if tree.root else []
        while stack:
            ref = stack.pop()
            payload, base = repo.read_page(ref)
            need(ref)
            need(base)
            page = decode_page(payload, "page")
            stack += [c.ref if c.ref.pack else msgspec.structs.replace(c.ref, pack=ref.pack) for c in page.children]
            for e in page.entries:
                if e.kind == KIND_SQLITE:
                    snap = load_snapshot(e.refs, read_map)
                    for loc in list(snap.pages) + list(snap.base.values()):
                        need(loc.rec)
                    continue
                for r in e.refs:
                    need(r)
                for r in e.bases:
                    need(r)
    return out


# --- crafted checkpoints -------------------------------------------------------------

class Crafter:
    """A hostile writer: real records made by journal's own encoders, with hostile field
    values, put into ``store`` (pack spool files go to ``spool``). ``tests/conftest.py``'s
    ``Live`` crafts through it too."""

    def __init__(self, store, spool: str | Path):
        self.store = store
        self.spool = str(spool)

    def put_records(self, records: list[tuple[str, bytes, int]]) -> list[BlobRef]:
        """Store ``(id, record, payload size)`` records (``objects.encode_record``'s
        output) in a pack of their own; their references, in order."""
        writer = PackWriter(self.store, self.spool)
        refs = [writer.add_record(blob_id, record, size) for blob_id, record, size in records]
        writer.finish()
        return [writer.resolve(ref) for ref in refs]

    def chunk_entry(self, path: str, payload: bytes = CRAFTED_BYTES, **fields) -> Entry:
        """A file entry naming one real chunk, stored now; ``fields`` override the entry's."""
        (ref,) = self.put_records([encode_record(KIND_CHUNK, payload) + (len(payload),)])
        return Entry(path=path, **{"kind": KIND_FILE, "mode": 0o644, "mtime_ns": 1, "size": len(payload),
                                   "refs": (ref,), **fields})

    def put_pages(self, *pages: Page) -> list[BlobRef]:
        """Store index pages as they are, however they break the rules."""
        writer = PackWriter(self.store, self.spool)
        refs = [writer.add(KIND_PAGE, encode(page)) for page in pages]
        writer.finish()
        return [writer.resolve(ref) for ref in refs]

    def put_tree(self, entries: list[Entry]) -> BlobRef:
        """Store entries (sorted by path) as an index built by the project's own builder."""
        writer = PackWriter(self.store, self.spool)
        root, _ = build_index(entries, {}, lambda payload, _key: writer.add(KIND_PAGE, payload))
        writer.finish()
        return writer.resolve(root)

    def publish(self, trees: dict[str, TreeRoot | None], **fields) -> int:
        """Publish the next manifest: the newest one's trees with ``trees`` in place of
        theirs (None drops a tree), ``fields`` overriding any other field. Its sequence."""
        import time

        from journal.repository.repository import Repository, encode_manifest, utc_now

        repo = Repository.open(self.store)
        seq = repo.manifest_seqs()[-1] + 1
        parent, parent_id = repo.load_manifest(seq - 1)
        merged = {**parent.trees, **trees}
        manifest = Manifest(seq=seq, parent=seq - 1, parent_id=parent_id, created=utc_now(),
                            created_ns=time.time_ns(), host="elsewhere", pid=1, writer="f" * 32,
                            trees={name: tree for name, tree in merged.items() if tree is not None})
        repo.put_manifest(encode_manifest(msgspec.structs.replace(manifest, **fields))[1], seq)
        return seq


def _traversal(c: Crafter):
    entries = sorted([c.chunk_entry("../escape", CRAFTED_BYTES), c.chunk_entry("a.txt", CRAFTED_BYTES)],
                     key=lambda e: e.path)
    return c.put_tree(entries), 2, 12


def _absolute(c: Crafter):
    (root,) = c.put_pages(Page(level=0, entries=(c.chunk_entry("/etc/x"),)))
    return root, 1, 6


def _duplicate(c: Crafter):
    e = c.chunk_entry("a.txt")
    (root,) = c.put_pages(Page(level=0, entries=(e, e)))
    return root, 2, 12


def _duplicate_across_pages(c: Crafter):
    e = c.chunk_entry("a.txt")
    leaf1, leaf2 = c.put_pages(Page(level=0, entries=(e,)), Page(level=0, entries=(e,)))
    (root,) = c.put_pages(Page(level=1, children=(PageRef("a.txt", leaf1, 1, 6), PageRef("a.txt", leaf2, 1, 6))))
    return root, 2, 12


def _huge_size(c: Crafter):
    e = c.chunk_entry("a.txt")
    huge = msgspec.structs.replace(e, size=1 << 62, refs=(msgspec.structs.replace(e.refs[0], size=1 << 28),))
    (root,) = c.put_pages(Page(level=0, entries=(huge,)))
    return root, 1, 1 << 62


def _repeated_child(c: Crafter):
    e = c.chunk_entry("a.txt")
    (leaf,) = c.put_pages(Page(level=0, entries=(e,)))
    (mid,) = c.put_pages(Page(level=1, children=tuple(PageRef("a.txt", leaf, 1, 6) for _ in range(1000))))
    (root,) = c.put_pages(Page(level=2, children=tuple(PageRef("a.txt", mid, 1000, 6000) for _ in range(1000))))
    return root, 10**6, 6 * 10**6


def _cycle(c: Crafter):
    """An inner page whose child is named at the inner page's own place (the first record
    of its pack): the walk would come back to where it started. (A page cannot name its
    own id, which is the hash of its bytes; its place it can.)"""
    e = c.chunk_entry("a.txt")
    (leaf,) = c.put_pages(Page(level=0, entries=(e,)))
    (root,) = c.put_pages(Page(level=1, children=(PageRef("a.txt", msgspec.structs.replace(leaf, pack="", offset=0,
                                                                                        length=leaf.length), 1, 6),)))
    return root, 1, 6


def _bomb(c: Crafter):
    """A chunk whose frame inflates to 256 MiB behind a header that claims 1 MiB."""
    import hashlib

    import zstandard

    from journal.format.objects import MAGIC, RECORD_VERSION

    payload = bytes(1 << 20)
    stream = zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
    frame = b"".join(stream.compress(payload) for _ in range(256)) + stream.flush()
    record = HEADER.pack(MAGIC, RECORD_VERSION, KIND_CHUNK, 0, len(payload), len(frame),
                         hashlib.sha256(payload).digest()) + frame
    (ref,) = c.put_records([(hashlib.sha256(payload).hexdigest(), record, len(payload))])
    (root,) = c.put_pages(Page(level=0, entries=(Entry(path="bomb", kind=KIND_FILE, mode=0o644, size=len(payload),
                                                   refs=(ref,)),)))
    return root, 1, len(payload)


@dataclass(frozen=True)
class Crafted:
    """A crafted checkpoint of the ``side`` tree: how to make it, what verify reports, and
    how a restore ends (design §8, §12: a refused entry is lost alone, exit 1; a page or
    tree that breaks a rule makes the tree fall back, exit 3; a blob that does not verify
    falls back to an older copy, or, with none, is lost, exit 1)."""

    build: Callable[[Crafter], tuple[BlobRef | None, int, int]]
    finding: str
    restore: int

    def __call__(self, url: str, spool: Path) -> None:
        from journal.store import open_store

        root, files, nbytes = self.build(Crafter(open_store(url), spool))
        Crafter(open_store(url), spool).publish({"side": TreeRoot(root=root, files=files, bytes=nbytes)})


CRAFTED: dict[str, Crafted] = {
    "traversal path": Crafted(_traversal, "unsafe-path", 1),
    "absolute path": Crafted(_absolute, "unsafe-path", 1),
    "duplicate path": Crafted(_duplicate, "corrupt-page", 3),
    "duplicate path across pages": Crafted(_duplicate_across_pages, "corrupt-page", 3),
    "huge size": Crafted(_huge_size, "corrupt-page", 3),
    "one child repeated 10^6 times": Crafted(_repeated_child, "corrupt-page", 3),
    "page cycle": Crafted(_cycle, "corrupt-page", 3),
    "decompression bomb": Crafted(_bomb, "corrupt-object", 1),
}


__all__ = ["CRAFTED", "DAMAGES", "Crafter", "DamageSweep"]

"""The gc part: ``journal gc --dry-run``, ``journal gc`` (mark) and, past the grace,
``journal gc`` (sweep) over a store of ``--gc-objects`` keys (1,000,000; and a tenth of
that), built from real checkpoints plus synthetic garbage packs; then the store reads of
``journal restore`` for a transcript of ``--gc-appends`` appends, one per checkpoint, and
for a store of ``--gc-checkpoints`` checkpoints (the CLI, with every store GET recorded)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

from ..measure import KIB, MIB, RECORD_HEADER, figure, log, record_kind, rmtree, run_child, tree_stats
from ..report import fmt_bytes, fmt_s
from ..systems import LibJournal, Tools
from ..workload import BASE_TIME, Lines, dump_line, lognormal_size, stamp, text_for, write_file
from .base import Part

#: The peak RSS a `journal gc` over the full --gc-objects may reach.
GC_RSS_LIMIT_KIB = 200 * KIB
#: Data records (file contents); every other record, and every non-pack object, is metadata.
_DATA_KINDS = ("chunk", "segment", "dbpage")

# The real CLI, with LocalStore's get, head and list wrapped to record what they are
# asked (key and byte range); the record is written to $BENCH_STORE_LOG at exit.
COUNTING_CLI = r'''"""`journal ...` recording every store read (tools/bench/parts/gc.py)."""
import atexit, json, os, sys
from journal.store.local import LocalStore

_log = {"gets": [], "heads": [], "lists": []}
_get, _head, _list = LocalStore.get, LocalStore.head, LocalStore.list

def _counted_get(self, key, start=0, end=None):
    _log["gets"].append([key, start, end])
    return _get(self, key, start, end)

def _counted_head(self, key):
    _log["heads"].append(key)
    return _head(self, key)

def _counted_list(self, prefix=""):
    _log["lists"].append(prefix)
    return _list(self, prefix)

LocalStore.get, LocalStore.head, LocalStore.list = _counted_get, _counted_head, _counted_list

@atexit.register
def _dump():
    with open(os.environ["BENCH_STORE_LOG"], "w") as fh:
        json.dump(_log, fh)

from journal.cli.launch import main
sys.exit(main())
'''

_GC_OUTPUT = {
    "kept": re.compile(r"^keep ([\d,]+) checkpoint", re.M),
    "expired": re.compile(r"^expire ([\d,]+) checkpoint", re.M),
    "tombstoned": re.compile(r"^tombstone ([\d,]+) object", re.M),
    "tombstoned_bytes": re.compile(r"^tombstone [\d,]+ objects? \(([\d,]+) bytes?\)", re.M),
    "planned_deletes": re.compile(r"^delete ([\d,]+) object", re.M),
    "deleted": re.compile(r"^done: tombstone \S+, deleted ([\d,]+) object", re.M),
    "bytes_freed": re.compile(r"^done: .* deleted [\d,]+ objects?, ([\d,]+) bytes? freed", re.M),
    "tombstones_resolved": re.compile(r"^done: .* ([\d,]+) tombstones? swept", re.M),
}


def parse_gc_output(text: str) -> dict:
    """The counts `journal gc` prints (its text output: --json would print every item)."""
    out = {}
    for name, rx in _GC_OUTPUT.items():
        m = rx.search(text)
        out[name] = int(m.group(1).replace(",", "")) if m else None
    return out


def fs_type(path: str) -> str | None:
    try:
        return subprocess.run(["df", "--output=fstype", path], capture_output=True, text=True).stdout.split()[-1]
    except (OSError, IndexError):
        return None


def scratch_dir(args, work: str, files: int) -> str:
    """Where a many-object store is built: --gc-dir, else /dev/shm when it has room, else ``work``.

    On tmpfs, creating a file costs ~15 us instead of 50-250 us on the shared ext4 disk,
    and fsync is free: the store builds in seconds. The gc figures that matter here (CPU,
    peak RSS, objects) do not depend on it; its wall times are those of a fast disk.
    """
    if args.gc_dir:
        os.makedirs(args.gc_dir, exist_ok=True)
        return tempfile.mkdtemp(prefix="journal-bench-gc-", dir=args.gc_dir)
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        if os.access(shm, os.W_OK) and st.f_favail > 2 * files + 100_000 and st.f_bavail * st.f_frsize > 2 << 30:
            return tempfile.mkdtemp(prefix="journal-bench-gc-", dir=shm)
    except OSError:
        pass
    return tempfile.mkdtemp(prefix="gc-", dir=work)


def count_keys(store: str) -> dict[str, int]:
    """Store keys by top-level prefix (names starting with "." are not keys), and "total"."""
    counts: dict[str, int] = {}
    stack = [(store, None)]
    while stack:
        path, top = stack.pop()
        with os.scandir(path) as it:
            for d in it:
                if d.name.startswith("."):
                    continue
                if d.is_dir(follow_symlinks=False):
                    stack.append((d.path, top or d.name))
                else:
                    counts[top or d.name] = counts.get(top or d.name, 0) + 1
    counts["total"] = sum(counts.values())
    return counts


def build_gc_store(lib: LibJournal, n_objects: int, seed: int) -> dict:
    """A store of ~``n_objects`` keys: real checkpoints, then synthetic garbage packs.

    ``real`` checkpoints (n/1000, at least 10) of a Codex tree (an appended rollout and
    20 rotating notes) give real manifests, index pages and data packs; ``--keep-last
    real/10`` keeps a tenth of them. The rest of the keys are synthetic packs written
    straight into the local store's layout (``packs/<hh>/<sha256>``, sparse files of
    realistic sizes: gc only lists them, sizes included): 99% named in the ``packs`` field of
    the expired manifests (each expired manifest is re-encoded naming its share, as if
    that checkpoint had uploaded them), 1% named by no manifest (a crashed checkpoint's
    orphans).
    """
    rng = random.Random(f"{seed}:gc:{n_objects}")
    real = max(10, n_objects // 1000)
    keep = max(2, real // 10)
    t0 = time.perf_counter()
    real_history(lib, real, rng, text_for(seed))
    checkpoints_s = time.perf_counter() - t0
    real_keys = count_keys(lib.store_root)
    synthetic = max(0, n_objects - real_keys["total"])
    orphans = synthetic // 100
    named = synthetic - orphans
    expired = real - keep
    t1 = time.perf_counter()
    packs = SyntheticPacks(lib.store_root, rng, f"{seed}:{n_objects}")
    packs.name_in_manifests(lib, named, expired)
    for _ in range(orphans):
        packs.make()
    keys = count_keys(lib.store_root)
    return {"objects": keys["total"], "keys": keys, "real_checkpoints": real, "keep_last": keep,
            "expired_checkpoints": expired, "real_objects": real_keys["total"], "synthetic_packs": packs.made,
            "synthetic_named": named, "synthetic_orphans": orphans, "synthetic_bytes": packs.bytes,
            "manifest_bytes": sum(e.stat().st_size for e in os.scandir(os.path.join(lib.store_root, "manifests"))),
            "checkpoints_s": round(checkpoints_s, 1), "synthetic_s": round(time.perf_counter() - t1, 1)}


def real_history(lib: LibJournal, real: int, rng: random.Random, text) -> None:
    """``real`` checkpoints of a Codex tree: a rollout appended to and 20 rotating notes."""
    lines = Lines(text)
    rollout = os.path.join(lib.tree, "sessions/2026/12/02/rollout-gc.jsonl")
    os.makedirs(os.path.dirname(rollout), exist_ok=True)
    with open(rollout, "ab") as fh:
        for i in range(real):
            fh.write(dump_line(lines.codex(rng, stamp(BASE_TIME, i * 10.0), "gc")))
            fh.flush()
            write_file(os.path.join(lib.tree, f"notes/n{i % 20:02d}.md"), text.text(rng, rng.randint(200, 600)))
            lib.checkpoint()


class SyntheticPacks:
    """Garbage packs written straight into a local store's layout: sparse files of
    realistic sizes, named by the SHA-256 of a counter (gc only lists them)."""

    FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC

    def __init__(self, store_root: str, rng: random.Random, salt: str):
        self.store_root, self.rng, self.salt = store_root, rng, salt
        self.dir = os.path.join(store_root, "packs")
        self.made = self.bytes = 0
        for hh in range(256):
            os.makedirs(os.path.join(self.dir, f"{hh:02x}"), exist_ok=True)

    def make(self) -> str:
        pid = hashlib.sha256(f"{self.salt}:{self.made}".encode()).hexdigest()
        size = lognormal_size(self.rng, 48 * KIB, 1.2, 2 * KIB, 64 * MIB)
        fd = os.open(os.path.join(self.dir, pid[:2], pid), self.FLAGS, 0o644)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        self.made += 1
        self.bytes += size
        return pid

    def name_in_manifests(self, lib: LibJournal, named: int, expired: int) -> None:
        """``named`` new packs, shared out over manifests 1 to ``expired``: each is
        re-encoded naming its share in ``packs``, as if that checkpoint had uploaded them."""
        import msgspec
        from journal.repository.repository import Repository, encode_manifest, manifest_key

        repo = Repository.open(lib.store)
        tmp = os.path.join(self.store_root, ".tmp", "bench-manifest")
        for j, seq in enumerate(range(1, expired + 1)):
            share = named * (j + 1) // expired - named * j // expired
            ids = tuple(self.make() for _ in range(share))
            manifest, _ = repo.load_manifest(seq)
            _, record = encode_manifest(msgspec.structs.replace(manifest, packs=manifest.packs + ids))
            write_file(tmp, record)
            os.replace(tmp, os.path.join(self.store_root, *manifest_key(seq).split("/")))


def gc_scale_run(args, tools: Tools, work: str, n_objects: int) -> dict:
    """Build a store of ``n_objects`` keys; run `gc --dry-run`, `gc` (mark) and, past the grace, `gc` (sweep)."""
    root = scratch_dir(args, work, n_objects)
    try:
        lib = LibJournal(tools, root)
        t0 = time.perf_counter()
        store = build_gc_store(lib, n_objects, args.seed)
        store["build_s"] = round(time.perf_counter() - t0, 1)
        store["fs"] = fs_type(root)
        log(f"gc: built a store of {store['objects']:,} objects ({store['real_checkpoints']} real checkpoints, "
            f"{store['synthetic_packs']:,} synthetic packs) on {store['fs']} in {store['build_s']:.0f}s")
        policy = ["--keep-last", str(store["keep_last"])]
        out: dict = {"n_objects": n_objects, "store": store}

        def gc_run(name: str, extra: list[str]) -> dict:
            before = count_keys(lib.store_root)["total"]
            child = run_child(tools.journal + ["gc"] + policy + extra, env=lib.env)
            fig = figure(child, before, None, **parse_gc_output(child.out))
            fig["objects_after"] = count_keys(lib.store_root)["total"]
            log(f"gc {n_objects:,}: {name}: {before:,} objects -> {fig['objects_after']:,}, tombstoned "
                f"{fig['tombstoned']}, deleted {fig['deleted']}; {child.wall:.1f}s wall, {child.cpu:.1f}s CPU, "
                f"peak RSS {child.maxrss_kib / KIB:.0f} MiB")
            return fig

        out["dry_run"] = gc_run("gc --dry-run", ["--dry-run"])
        out["mark"] = gc_run("gc (mark)", [])
        marked = time.monotonic()
        # A checkpoint after the mark: the store moves past its mark_seq, so the orphans
        # may go too (docs/design.md section 16).
        with open(os.path.join(lib.tree, "notes/n00.md"), "a") as fh:
            fh.write("one more checkpoint after the mark\n")
        lib.checkpoint()
        grace = 0 if args.smoke else 1  # seconds; the smoke run does not wait
        time.sleep(max(0.0, grace + 0.05 - (time.monotonic() - marked)))
        out["grace"] = f"{grace}s"
        out["sweep"] = gc_run(f"gc --grace {grace}s (sweep)", ["--grace", f"{grace}s"])
        check = run_child(tools.journal + ["verify"], env=lib.env, check=False)
        out["verify_ok"] = check.rc == 0
        out["keys_after"] = count_keys(lib.store_root)
        return out
    finally:
        rmtree(root)


def classify_reads(store_root: str, gets: list) -> dict:
    """Store GETs by what they read: the record kind at the start of a pack range, or the object."""
    by_kind: dict[str, int] = {}
    objects: set[str] = set()
    meta_objects: set[str] = set()
    for key, start, _end in gets:
        objects.add(key)
        if key.startswith("packs/"):
            kind = "other"
            try:
                with open(os.path.join(store_root, *key.split("/")), "rb") as fh:
                    fh.seek(start)
                    kind = record_kind(fh.read(RECORD_HEADER.size)) or "other"
            except OSError:
                pass
        else:
            kind = key.split("/", 1)[0]           # manifests, config, ...
        by_kind[kind] = by_kind.get(kind, 0) + 1
        if kind not in _DATA_KINDS:
            meta_objects.add(key)
    return {"gets": len(gets), "objects": len(objects), "packs": sum(1 for k in objects if k.startswith("packs/")),
            "by_kind": dict(sorted(by_kind.items())),
            "metadata_gets": sum(n for k, n in by_kind.items() if k not in _DATA_KINDS),
            "metadata_objects": len(meta_objects)}


def counted_restore(lib: LibJournal, work: str, dest: str) -> dict:
    """`journal restore --to DEST` through the real CLI, every store read recorded."""
    script = os.path.join(work, "counting_journal.py")
    if not os.path.exists(script):
        write_file(script, COUNTING_CLI)
    record = os.path.join(work, "store-reads.json")
    child = run_child([sys.executable, script, "restore", "--to", dest, "--json"],
                      env=dict(lib.env, BENCH_STORE_LOG=record))
    with open(record) as fh:
        reads = json.load(fh)
    os.unlink(record)
    files, size = tree_stats(dest)
    fig = figure(child, files=files, restored_bytes=size, **classify_reads(lib.store_root, reads["gets"]))
    fig["heads"] = len(reads["heads"])
    fig["manifest_lists"] = sum(1 for p in reads["lists"] if p.startswith("manifests/") or "manifests/".startswith(p))
    return fig


def restore_bounds(args, tools: Tools, work: str) -> dict:
    """A transcript of --gc-appends appends (one per checkpoint), restored; then the same
    store carried on to --gc-checkpoints checkpoints (20 notes rewritten too), restored."""
    root = scratch_dir(args, work, 10 * args.gc_checkpoints)
    try:
        lib = LibJournal(tools, root)
        rng = random.Random(f"{args.seed}:restore-bounds")
        text = text_for(args.seed)
        lines = Lines(text)
        rel = "sessions/2026/12/02/rollout-long.jsonl"
        path = os.path.join(lib.tree, rel)
        os.makedirs(os.path.dirname(path))
        out: dict = {"fs": fs_type(root), "appends": args.gc_appends, "checkpoints": args.gc_checkpoints}
        with open(path, "ab") as fh:
            t0 = time.perf_counter()
            for i in range(args.gc_appends):
                fh.write(dump_line(lines.codex(rng, stamp(BASE_TIME, i * 5.0), "long")))
                fh.flush()
                lib.checkpoint()
            out["appends_build_s"] = round(time.perf_counter() - t0, 1)
            dest = os.path.join(root, "restore-appends")
            fig = counted_restore(lib, work, dest)
            with open(path, "rb") as live, open(os.path.join(dest, "codex", rel), "rb") as back:
                fig["same_bytes"] = live.read() == back.read()
            fig["transcript_bytes"] = os.path.getsize(path)
            out["transcript"] = fig
            rmtree(dest)
            log(f"restore bounds: a transcript of {args.gc_appends:,} appends ({fig['transcript_bytes'] / MIB:.1f} MiB, "
                f"built in {out['appends_build_s']:.0f}s) restores from {fig['objects']} objects, {fig['packs']} packs, "
                f"{fig['gets']} GETs ({fig['by_kind']})")
            t0 = time.perf_counter()
            for i in range(args.gc_appends, args.gc_checkpoints):
                fh.write(dump_line(lines.codex(rng, stamp(BASE_TIME, i * 5.0), "long")))
                fh.flush()
                if i % 10 == 0:
                    write_file(os.path.join(lib.tree, f"notes/n{i // 10 % 40:02d}.md"), text.text(rng, rng.randint(20, 200)))
                seq = lib.checkpoint()
            out["checkpoints_build_s"] = round(time.perf_counter() - t0, 1)
        out["newest_seq"] = seq if args.gc_checkpoints > args.gc_appends else args.gc_appends
        dest = os.path.join(root, "restore-checkpoints")
        fig = counted_restore(lib, work, dest)
        with open(path, "rb") as live, open(os.path.join(dest, "codex", rel), "rb") as back:
            fig["same_bytes"] = live.read() == back.read()
        out["history"] = fig
        out["store_objects"] = count_keys(lib.store_root)["total"]
        log(f"restore bounds: a store of {out['newest_seq']:,} checkpoints ({out['store_objects']:,} objects, built in "
            f"{out['checkpoints_build_s']:.0f}s more) restores with {fig['metadata_gets']} metadata GETs "
            f"({fig['by_kind']}), {fig['manifest_lists']} listing(s) of manifests/")
        return out
    finally:
        rmtree(root)


class GcPart(Part):
    name = "gc"

    def run(self, args, tools, work: str) -> dict:
        sizes = sorted({max(100, args.gc_objects // 10), args.gc_objects})
        out: dict = {"sizes": [gc_scale_run(args, tools, work, n) for n in sizes]}
        out["restore"] = restore_bounds(args, tools, work)
        return out

    def summarize(self, gcp: dict, spread: dict) -> dict:
        keys = ("n_objects", "store", "dry_run", "mark", "grace", "sweep", "verify_ok")
        return {"sizes": [{k: s[k] for k in keys} for s in gcp["sizes"]], "restore": gcp["restore"]}

    def targets(self, g: dict, ratios: dict, res: dict, verdicts) -> None:
        full = g["sizes"][-1]
        runs = ("dry_run", "mark", "sweep")
        peak = max(full[k]["maxrss_kib"] for k in runs)
        detail = (f"dry-run {full['dry_run']['maxrss_kib'] / KIB:.0f} MiB, mark {full['mark']['maxrss_kib'] / KIB:.0f} MiB, "
                  f"sweep {full['sweep']['maxrss_kib'] / KIB:.0f} MiB")
        if len(g["sizes"]) > 1:
            small = g["sizes"][0]
            speak = max(small[k]["maxrss_kib"] for k in runs)
            detail += (f"; {speak / KIB:.0f} MiB at {small['n_objects']:,} objects (x{peak / speak:.1f} for "
                       f"x{full['n_objects'] / small['n_objects']:.0f} the objects)")
        if not full["verify_ok"]:
            detail += "; `journal verify` FAILED after the sweep"
        verdicts.add(f"gc over {full['n_objects']:,} objects: peak RSS < {GC_RSS_LIMIT_KIB // KIB} MiB",
                     peak < GC_RSS_LIMIT_KIB and full["verify_ok"], detail)
        restore_targets(g["restore"], verdicts)

    def tables(self, g: dict, res: dict) -> list[str]:
        return gc_tables(g) + restore_tables(g["restore"])


def restore_targets(rb: dict, verdicts) -> None:
    t = rb["transcript"]
    verdicts.add(f"a transcript of {rb['appends']:,} appends restores from <= 32 objects",
                 t["objects"] <= 32 and t["same_bytes"],
                 f"{t['objects']} objects (config, manifest and {t['packs']} packs), {t['gets']} GETs: "
                 + ", ".join(f"{k} {v}" for k, v in t["by_kind"].items())
                 + ("" if t["same_bytes"] else "; the restored transcript DIFFERS"))
    h = rb["history"]
    verdicts.add(f"restore of a store with {rb['newest_seq']:,} checkpoints reads <= 64 metadata objects",
                 h["metadata_gets"] <= 64 and h["same_bytes"],
                 f"{h['metadata_gets']} metadata GETs ({h['metadata_objects']} objects: "
                 + ", ".join(f"{k} {v}" for k, v in h["by_kind"].items() if k not in _DATA_KINDS)
                 + f"), {h['manifest_lists']} listing of manifests/; {t['metadata_gets']} at {rb['appends']:,} "
                   "checkpoints")


def gc_tables(g: dict) -> list[str]:
    """The gc runs' table, and how each store was built (markdown)."""
    out = ["| gc run | store objects | tombstoned | deleted | objects after | wall | CPU | peak RSS |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for size in g["sizes"]:
        for label, key in (("gc --dry-run", "dry_run"), ("gc (mark: tombstones)", "mark"),
                           (f"gc --grace {size['grace']} (sweep)", "sweep")):
            f = size[key]
            dele = f"{f['planned_deletes']:,} (would)" if key == "dry_run" else f"{f['deleted']:,}"
            out.append(f"| {size['n_objects']:,} objects: {label} | {f['objects']:,} | {f['tombstoned']:,} | {dele} | "
                       f"{f['objects_after']:,} | {fmt_s(f['wall_s'])} | {fmt_s(f['cpu_s'])} | "
                       f"{f['maxrss_kib'] / KIB:.0f} MiB |")
    out.append("")
    for size in g["sizes"]:
        st = size["store"]
        out.append(f"{size['n_objects']:,}-object store: {st['real_checkpoints']:,} real checkpoints (`--keep-last "
                   f"{st['keep_last']}`; {st['real_objects']:,} objects), {st['synthetic_packs']:,} synthetic packs "
                   f"({st['synthetic_named']:,} named by the {st['expired_checkpoints']:,} expired manifests, "
                   f"{st['synthetic_orphans']:,} orphans; {fmt_bytes(st['synthetic_bytes'])} apparent, sparse), "
                   f"built in {st['build_s']:.0f} s on {st['fs']}; `journal verify` after the sweep: "
                   f"{'ok' if size['verify_ok'] else 'FAILED'}.")
    out.append("")
    return out


def restore_tables(rb: dict) -> list[str]:
    """The bounded restores' table (markdown)."""
    out = ["| bounded restore | checkpoints | objects read | packs read | GETs | metadata GETs | wall | CPU | peak RSS |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, key, n in ((f"a transcript of {rb['appends']:,} appends", "transcript", rb["appends"]),
                          (f"a store of {rb['newest_seq']:,} checkpoints", "history", rb["newest_seq"])):
        f = rb[key]
        out.append(f"| {label} | {n:,} | {f['objects']} | {f['packs']} | {f['gets']} | {f['metadata_gets']} | "
                   f"{fmt_s(f['wall_s'])} | {fmt_s(f['cpu_s'])} | {f['maxrss_kib'] / KIB:.0f} MiB |")
    out.append("")
    for label, key in (("transcript", "transcript"), ("store", "history")):
        f = rb[key]
        out.append(f"GETs of the {label} restore by what they read: "
                   + ", ".join(f"{k} {v}" for k, v in f["by_kind"].items()))
    out.append(f"(histories built in-process on {rb['fs']}: {rb['appends_build_s']:.0f} s for the first "
               f"{rb['appends']:,} checkpoints, {rb['checkpoints_build_s']:.0f} s for the rest)")
    out.append("")
    return out

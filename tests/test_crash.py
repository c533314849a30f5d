"""Failure boundaries with real processes, real SIGKILL and damaged stored bytes.

docs/design.md §12 (read and write ordering) and §13 (crash model): whatever moment a
writer or a checkpoint dies at, the previous manifest stays authoritative, no partial
object is visible under a key, the next checkpoint finishes the job, and a restore
never contains a torn transcript line or an unverified byte.

Every journal command runs as a subprocess of the installed CLI with a private
``HOME`` (no user config), ``AM_LOCAL`` and ``JOURNAL_STORE``. Kills come from
outside, timed by polling the spool, the store's ``.tmp/`` and ``packs/`` — except on
the hf-mount simulation, where an upload is invisible until close by design: there a
small wrapper (``TRIPWIRE``) sends the process a real SIGKILL at an exact buffered byte
count, and changes nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LEFT_TMP, CodexLive, describe, journal_script, sha256_file, wait_for
from tripwire import write_tripwire

from journal.repository.history import ManifestCache
from journal.local.state import load_state
from journal.repository.repository import pack_key
from journal.format.objects import HEADER, KIND_MANIFEST, KIND_PAGE, MAGIC
from journal.store.local import TMP_DIR, LocalStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real" / "codex-home" / "sessions" / "2026" / "02" / "23"
SESSIONS = "sessions/2026/02/23"
HELD_ROLLOUT = "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
SMALL_ROLLOUT = "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"
MiB = 1 << 20
KEY = re.compile(r"config|manifests/\d{12}|packs/([0-9a-f]{2})/([0-9a-f]{64})")


# --- a live AM_LOCAL, a store, and the installed CLI pointed at them -------------------

def crash_box(tmp_path: Path, store_kind: str = "local") -> CodexLive:
    """One container on ``tmp_path``: ``$AM_LOCAL`` with a Codex home, its state dir, and
    a store (``hfsim``: the hf-mount simulation); ``run`` expects exit 0 unless told."""
    store = tmp_path / "store" if store_kind == "local" else f"hfsim://{tmp_path / 'store'}"
    box = CodexLive(tmp_path, store, env={"PYTHONDONTWRITEBYTECODE": "1"}, expect=0, cmd=journal_script())
    (box.codex / SESSIONS).mkdir(parents=True)
    return box


def good_seqs(box: CodexLive) -> list[int]:
    """Sequences of the manifests that pass their checks, newest first."""
    return [e["seq"] for e in box.log() if e["error"] is None]


def restore_to(box: CodexLive, name: str, expect: int = 0) -> Path:
    out = box.root / name
    box.run("restore", "--to", str(out), expect=expect)
    return out / "codex"


def assert_keys_are_whole_objects(store_dir: Path) -> list[str]:
    """Every key is config, a manifest or a pack named by the hash of all its bytes."""
    keys = list(LocalStore(str(store_dir)).list(""))
    assert "config" in keys
    for key in keys:
        m = KEY.fullmatch(key)
        assert m, f"unexpected key {key!r} (a temp file visible as a key?)"
        if key.startswith("packs/"):
            assert m.group(2).startswith(m.group(1))
            assert sha256_file(store_dir / key) == m.group(2), f"{key} is not a whole pack"
    return keys


def tmp_files(store_dir: Path) -> list[str]:
    try:
        return sorted(os.listdir(store_dir / TMP_DIR))
    except FileNotFoundError:
        return []


def file_sizes(directory: Path) -> list[int]:
    """Sizes of the files in ``directory`` now; files that vanish meanwhile are skipped."""
    sizes = []
    for path in directory.glob("*"):
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:
            continue
    return sizes


def fixture_lines(name: str) -> list[bytes]:
    return (FIXTURES / name).read_bytes().splitlines(keepends=True)


# --- 1. a rollout held open by a writer that is then SIGKILLed -----------------------

WRITER = r'''
"""Codex's pattern: one rollout held open for the whole session, appended and flushed,
never fsynced or closed. Every 4th line goes out in two halves with a pause between
(a torn tail on disk). While the file ``hold`` exists the writer parks mid-line.
After each step it publishes {complete, bytes, torn, parked} to ``status``."""
import json, os, sys, time
src, dst, status, hold, initial = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
with open(src, "rb") as fh:
    lines = fh.read().splitlines(keepends=True)

def publish(**fields):
    with open(status + ".tmp", "w") as fh:
        json.dump(fields, fh)
    os.replace(status + ".tmp", status)

out = open(dst, "wb")
out.write(b"".join(lines[:initial]))
out.flush()
complete, nbytes = initial, sum(map(len, lines[:initial]))
publish(complete=complete, bytes=nbytes, torn=False, parked=False)
i = initial
while True:
    line = lines[i % len(lines)]
    i += 1
    if i % 4 == 0:
        half = len(line) // 2
        out.write(line[:half])
        out.flush()
        publish(complete=complete, bytes=nbytes, torn=True, parked=False)
        time.sleep(0.03)
        if os.path.exists(hold):
            publish(complete=complete, bytes=nbytes, torn=True, parked=True)
            while os.path.exists(hold):
                time.sleep(0.005)
        out.write(line[half:])
    else:
        out.write(line)
    out.flush()
    complete += 1
    nbytes += len(line)
    publish(complete=complete, bytes=nbytes, torn=False, parked=False)
    time.sleep(0.02)
'''


class HeldWriter:
    """The writer subprocess, and the test's handle on its status and parking."""

    def __init__(self, tmp_path: Path, source: Path, live: Path, initial: int):
        script = tmp_path / "writer.py"
        script.write_text(WRITER)
        self.status_path = tmp_path / "writer-status.json"
        self.hold = tmp_path / "writer-hold"
        self.live = live
        self.proc = subprocess.Popen([sys.executable, str(script), str(source), str(live),
                                      str(self.status_path), str(self.hold), str(initial)])
        wait_for(self.status_path.exists, 60, "the writer to start", step=0.005)

    def status(self) -> dict:
        return json.loads(self.status_path.read_text())

    def advance(self) -> None:
        """Wait until the writer completes another line."""
        seen = self.status()["complete"]
        wait_for(lambda: self.status()["complete"] > seen, 60, "the writer to complete another line", step=0.005)

    def park(self) -> dict:
        """Park the writer mid-line; returns its status there (the file ends in a torn line)."""
        self.hold.touch()
        return wait_for(lambda: (s := self.status())["parked"] and s, 60, "the writer to park mid-line", step=0.005)

    def unpark(self) -> None:
        self.hold.unlink()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(timeout=10) == -signal.SIGKILL


def complete_prefix(data: bytes) -> bytes:
    return data[: data.rfind(b"\n") + 1]


@pytest.mark.parametrize("store_kind", ["local", "hfsim"])
def test_rollout_of_a_sigkilled_writer_restores_complete_lines_of_the_last_checkpoint(tmp_path, store_kind):
    box = crash_box(tmp_path, store_kind)
    source = tmp_path / "source.jsonl"
    shutil.copyfile(FIXTURES / HELD_ROLLOUT, source)
    live = (box.codex / SESSIONS) / HELD_ROLLOUT
    writer = HeldWriter(tmp_path, source, live, initial=8)
    try:
        for _ in range(3):
            writer.advance()
            box.run("checkpoint")

        parked = writer.park()
        on_disk = live.read_bytes()
        assert len(on_disk) > parked["bytes"] and not on_disk.endswith(b"\n"), "parked with a torn tail"
        box.run("checkpoint")
        peek = restore_to(box, "peek") / SESSIONS / HELD_ROLLOUT
        assert peek.read_bytes() == on_disk[: parked["bytes"]], "a torn tail must not be checkpointed"
        writer.unpark()

        writer.advance()
        box.run("checkpoint")
        writer.advance()
        before = writer.status()
        box.run("checkpoint")  # the last one
        ceiling = len(complete_prefix(live.read_bytes()))
        writer.park()
        writer.kill()
    finally:
        if writer.proc.poll() is None:
            writer.proc.kill()
            writer.proc.wait()

    final = live.read_bytes()
    assert not final.endswith(b"\n"), "the writer died mid-line"
    restored = (restore_to(box, "out") / SESSIONS / HELD_ROLLOUT).read_bytes()
    assert restored.endswith(b"\n")
    assert final.startswith(restored), "the restored rollout is a prefix of the live file"
    assert before["bytes"] <= len(restored) <= ceiling
    lines = restored.splitlines()
    assert len(lines) >= before["complete"]
    for line in lines:
        json.loads(line)  # every restored line is a whole JSON record
    assert len(good_seqs(box)) >= 5
    box.run("verify", "--full")


# --- 2. and 3. a checkpoint SIGKILLed part way -----------------------------------------

def build_first_checkpoint(box: CodexLive) -> dict:
    """Checkpoint 1 of a small Codex home; returns its description."""
    lines = fixture_lines(SMALL_ROLLOUT)
    ((box.codex / SESSIONS) / SMALL_ROLLOUT).write_bytes(b"".join(lines[:200]))
    (box.codex / "version.json").write_bytes(b'{"latest_version":"0.104.0"}\n')
    box.run("checkpoint")
    assert good_seqs(box) == [1]
    return describe(box.codex)


def grow_tree(box: CodexLive, files: int, mib_each: int) -> dict:
    """Make checkpoint 2 large: random bulk files, more rollout lines, a rewritten file."""
    bulk = box.codex / "bulk"
    bulk.mkdir()
    for i in range(files):
        with open(bulk / f"part-{i}.bin", "wb") as fh:
            for _ in range(mib_each):
                fh.write(os.urandom(MiB))
    with open((box.codex / SESSIONS) / SMALL_ROLLOUT, "ab") as fh:
        fh.write(b"".join(fixture_lines(SMALL_ROLLOUT)[200:]))
    (box.codex / "version.json").write_bytes(b'{"latest_version":"0.105.0","dismissed":null}\n')
    return describe(box.codex)


class Probe:
    """What the store and state dir look like now, relative to the start of one attempt."""

    def __init__(self, box: CodexLive):
        self.box = box
        self.t0 = time.monotonic()
        self.packs0 = self.packs()
        self.uploading0 = self.uploading()   # left by the attempt killed before
        self.parts_seen: set[str] = set()
        self.state0 = os.stat(box.state_dir / "state.msgpack").st_ino

    def packs(self) -> set[str]:
        return set(Path(self.box.store_path, "packs").glob("*/*"))

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def spool_bytes(self) -> int:
        return sum(file_sizes(self.box.state_dir / "spool"))

    def uploading(self) -> set[str]:
        """Spool packs whose upload is under way: a local store links each into place,
        after making it private and durable (``LocalStore.put_file_if_absent``)."""
        out = set()
        for path in (self.box.state_dir / "spool").glob("*.pack"):
            try:
                if stat.S_IMODE(path.stat().st_mode) == 0o600:
                    out.add(path.name)
            except FileNotFoundError:
                continue
        return out

    def uploads_started(self) -> int:
        """How many pack uploads this attempt has begun so far."""
        self.parts_seen |= self.uploading() - self.uploading0
        return len(self.parts_seen)

    def new_packs(self) -> int:
        return len(self.packs() - self.packs0)

    def state_replaced(self) -> bool:
        try:
            return os.stat(self.box.state_dir / "state.msgpack").st_ino != self.state0
        except FileNotFoundError:
            return False


#: (moment, predicate on a Probe): each attempt is killed at the first poll that sees it.
KILL_MOMENTS = [
    ("50 ms after start (still importing)", lambda p: p.elapsed() >= 0.05),
    ("the first bytes are in the spool", lambda p: p.spool_bytes() > 0),
    ("the data pack is being spooled", lambda p: p.spool_bytes() >= 8 * MiB),
    # A local store uploads a pack by a hard link (fsync, link, fsync of the directory):
    # too quick to poll for, so these two kill the checkpoint just before its nth link.
    ("the first data pack is being uploaded", "link:1"),
    ("the first data pack was just published", lambda p: p.new_packs() >= 1),
    ("the second data pack is being uploaded", "link:2"),
    ("the state was just saved with the manifest pending", Probe.state_replaced),
]


def kill_when(box: CodexLive, predicate) -> tuple[bool, Probe]:
    """Start a checkpoint and SIGKILL it when ``predicate(probe)`` holds, or, for a
    ``"fn:N"`` string, just before its nth call of ``os.fn`` (``tests/tripwire.py``);
    (died killed?, probe)."""
    probe = Probe(box)
    if isinstance(predicate, str):
        proc = box.popen("checkpoint", cmd=[sys.executable, str(write_tripwire(box.root))],
                         env={"JOURNAL_TEST_KILL": predicate})
        predicate = lambda _probe: False   # it kills itself
    else:
        proc = box.popen("checkpoint")
    try:
        while proc.poll() is None and not predicate(probe):
            time.sleep(0.002)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = proc.communicate()
    assert code in (0, -signal.SIGKILL), f"checkpoint failed on its own ({code}):\n{out}\n{err}"
    return code == -signal.SIGKILL, probe


def test_checkpoint_sigkilled_at_any_moment_leaves_the_previous_manifest_authoritative(tmp_path):
    box = crash_box(tmp_path, "local")
    first = build_first_checkpoint(box)
    second = grow_tree(box, files=6, mib_each=24)   # two data packs (the first closes past 64 MiB)

    for n, (moment, predicate) in enumerate(KILL_MOMENTS):
        killed, probe = kill_when(box, predicate)
        assert_keys_are_whole_objects(box.store_path)
        assert all(name.endswith(".part") for name in tmp_files(box.store_path)), "only temp files in .tmp"
        if "being uploaded" in moment:
            assert probe.uploading() - probe.uploading0, "the kill landed mid-upload: a spool pack not yet removed"
        box.run("verify")
        seqs = good_seqs(box)
        if moment.startswith("the state was just saved"):
            state = load_state(str(box.state_dir), box.repo().store_id)
            assert seqs == [2, 1] or (state.pending_seq == 2 and seqs == [1]), (seqs, state.pending_seq)
            continue
        assert killed, f"the checkpoint finished before the kill moment '{moment}'"
        assert seqs == [1], f"killed when {moment}: a manifest other than 1 is visible"
        assert describe(restore_to(box, f"after-kill-{n}")) == first, f"killed when {moment}"

    box.run("checkpoint")
    assert good_seqs(box) == [2, 1]
    box.run("verify", "--full")
    assert describe(restore_to(box, "final")) == second


TRIPWIRE = r'''
"""Run the journal CLI, and SIGKILL this process once a file being written on the
hf-mount simulation (not yet closed) holds at least B bytes and is a WHAT: a
``data`` pack, the ``index`` pack (its first record a tree index page) or the
``manifest``, told by its first record's header. JOURNAL_TEST_KILL_AT="WHAT:B". The
two packs upload at once, so they are told apart by what they hold, not by the order
they are opened in. Nothing else is changed."""
import os, signal, sys
from journal.store import hfmount
from journal.format.objects import HEADER, KIND_MANIFEST, KIND_PAGE, MAGIC
what, after = os.environ["JOURNAL_TEST_KILL_AT"].split(":")
after = int(after)
real_pwrite = hfmount.HfMountFsOps.pwrite

def holds(buf):
    if len(buf) < HEADER.size:
        return None
    magic, _, kind = HEADER.unpack_from(bytes(buf[:HEADER.size]))[:3]
    if magic != MAGIC:
        return None
    return "manifest" if kind == KIND_MANIFEST else "index" if kind == KIND_PAGE else "data"

def pwrite(self, fd, data, offset):
    n = real_pwrite(self, fd, data, offset)
    buf = self._live(fd).buf
    if len(buf) >= after and holds(buf) == what:
        os.kill(os.getpid(), signal.SIGKILL)
    return n

hfmount.HfMountFsOps.pwrite = pwrite
from journal.cli.entry import main
main()
'''


def holds(data: bytes) -> str | None:
    """What a pack holds, told by its first record's header, as the tripwire tells it."""
    if len(data) < HEADER.size or data[:4] != MAGIC:
        return None
    kind = HEADER.unpack_from(data)[2]
    return "manifest" if kind == KIND_MANIFEST else "index" if kind == KIND_PAGE else "data"


@pytest.mark.parametrize(("moment", "kill_at"), [
    ("mid-upload of the data pack", "data:8388608"),
    ("mid-upload of the index pack", "index:1"),
    ("mid-upload of the manifest (staged while the packs upload)", "manifest:1"),
])
def test_hfmount_checkpoint_sigkilled_mid_upload_leaves_no_partial_object(tmp_path, moment, kill_at):
    box = crash_box(tmp_path, "hfsim")
    first = build_first_checkpoint(box)
    second = grow_tree(box, files=2, mib_each=5)    # one data pack (past 8 MiB), one index pack, one manifest
    keys_before = set(assert_keys_are_whole_objects(box.store_path))
    script = tmp_path / "tripwire.py"
    script.write_text(TRIPWIRE)

    proc = box.popen("checkpoint", cmd=[sys.executable, str(script)], env={"JOURNAL_TEST_KILL_AT": kill_at})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"not killed {moment}:\n{out}\n{err}"

    keys = set(assert_keys_are_whole_objects(box.store_path))
    new = keys - keys_before
    assert all(k.startswith("packs/") for k in new), f"killed {moment}: {sorted(new)}"
    # The data pack uploads while the index pack is built and uploaded, and the manifest
    # is staged (a temp file) while both upload (design §12 step 5), so a kill during one
    # of them may find the others closed: a closed temp file is whole and outside the key
    # space; an unclosed one never appears. Only the manifest's rename waits for both packs.
    left = tmp_files(box.store_path)
    kinds = [holds((box.store_path / TMP_DIR / name).read_bytes()) for name in left]
    being_written = kill_at.split(":")[0]
    assert being_written not in kinds and None not in kinds, f"killed {moment}: {left} holds what was being written"
    assert kinds.count("manifest") <= 1 and len(new) + len(kinds) - kinds.count("manifest") <= 2, \
        f"killed {moment}: {sorted(new)} {left}"
    if being_written != "manifest":
        assert len(new) + len(kinds) - kinds.count("manifest") <= 1, f"killed {moment}: at most the other pack is whole"
    box.run("verify")
    assert good_seqs(box) == [1]
    assert describe(restore_to(box, "after-kill")) == first

    state = load_state(str(box.state_dir), box.repo().store_id)
    assert state.pending_seq is None, "the state names a manifest pending only once every pack is stored (step 6)"
    result = json.loads(box.run("checkpoint", "--json").stdout)
    assert good_seqs(box) == [2, 1]
    box.run("verify", "--full")
    assert describe(restore_to(box, "final")) == second
    assert result["seq"] == 2, f"the checkpoint that committed manifest 2 reports seq {result['seq']}"


def test_restore_sigkilled_mid_file_leaves_no_partial_file_at_a_live_path(tmp_path):
    box = crash_box(tmp_path, "local")
    build_first_checkpoint(box)
    expected = grow_tree(box, files=4, mib_each=3)
    box.run("checkpoint")
    shutil.rmtree(box.codex)          # a fresh container: empty live tree, no local state
    box.codex.mkdir()
    shutil.rmtree(box.state_dir)

    # SIGKILL at the second rename: one file is in place, the others are staged or not yet
    # written (a timer would race a restore this fast; the tripwire kills at the call).
    script = write_tripwire(tmp_path)
    proc = box.popen("restore", cmd=[sys.executable, str(script)], env={"JOURNAL_TEST_KILL": "replace:2"})
    assert proc.wait(timeout=60) == -signal.SIGKILL, "the restore finished before the kill"

    partial = describe(box.codex, skip=(LEFT_TMP,))  # the killed restore's temp directory
    files = [p for p, item in partial.items() if item[0] != "dir"]
    assert files and len(files) < len([p for p, item in expected.items() if item[0] != "dir"])
    for path, item in partial.items():  # directory modes are applied last, so compare kinds
        same = item[0] == expected[path][0] if item[0] == "dir" else item == expected[path]
        assert same, f"{path} is at its live path but is not the checkpointed file"
    refused = box.run("checkpoint", expect=1)
    assert "run `journal restore` first" in refused.stderr, "no new lineage over a half-restored tree"

    box.run("restore")
    assert describe(box.codex) == expected, "the killed restore's temp directory is gone too"
    assert load_state(str(box.state_dir), box.repo().store_id).restore_complete
    assert "idle" in box.run("checkpoint").stdout
    assert good_seqs(box) == [2, 1]


# --- 4. damaged bytes in the store -----------------------------------------------------

def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def damaged_base(tmp_path_factory) -> dict:
    """A store with two checkpoints of a Codex home, and what each one holds.

    Checkpoint 2 appends to the rollout, rewrites version.json, and adds two files no
    older checkpoint has: notes/new.txt and a three-chunk bulk/big.bin.
    """
    tmp = tmp_path_factory.mktemp("damaged-base")
    box = crash_box(tmp, "local")
    lines = fixture_lines(SMALL_ROLLOUT)
    rollout = (box.codex / SESSIONS) / SMALL_ROLLOUT
    rollout.write_bytes(b"".join(lines[:150]))
    (box.codex / "version.json").write_bytes(b'{"latest_version":"0.104.0"}\n')
    (box.codex / "AGENTS.md").write_bytes(b"# notes\nno trailing newline")
    box.run("checkpoint")
    first = describe(box.codex)
    first_bytes = {"rollout": rollout.read_bytes(), "version": (box.codex / "version.json").read_bytes()}
    with open(rollout, "ab") as fh:
        fh.write(b"".join(lines[150:]))
    (box.codex / "version.json").write_bytes(b'{"latest_version":"0.105.0"}\n')
    (box.codex / "notes").mkdir()
    (box.codex / "notes" / "new.txt").write_bytes(b"written after checkpoint 1\n")
    (box.codex / "bulk").mkdir()
    (box.codex / "bulk" / "big.bin").write_bytes(os.urandom(2 * MiB + MiB // 2))
    box.run("checkpoint")
    return {"store": box.store_path, "first": first, "second": describe(box.codex), "first_bytes": first_bytes}


@pytest.fixture
def damaged(tmp_path, damaged_base) -> CodexLive:
    box = crash_box(tmp_path, "local")
    shutil.rmtree(box.local)
    box.local.mkdir()
    shutil.copytree(damaged_base["store"], box.store_path)
    return box


def entry_of(box: CodexLive, seq: int, path: str):
    entries, _ = ManifestCache(box.repo()).tree(seq, "codex")
    return next(e for e in entries if e.path == path)


def flip_blob(box: CodexLive, ref) -> str:
    """Flip one byte inside a blob's zstd frame; returns the pack key."""
    key = pack_key(ref.pack)
    flip(box.store_path / key, ref.offset + 56 + (ref.length - 56) // 2)
    return key


@pytest.mark.parametrize("offset", [0, 4, 5, 12, 20, 40, "frame", -1],
                         ids=["magic", "version", "kind", "raw_size", "stored_size", "sha256", "frame", "last"])
def test_restore_skips_a_damaged_newest_manifest_and_verify_reports_it(damaged, damaged_base, offset):
    manifest = damaged.store_path / "manifests" / "000000000002"
    flip(manifest, 56 + (manifest.stat().st_size - 56) // 2 if offset == "frame" else offset)

    assert describe(restore_to(damaged, "out", expect=3)) == damaged_base["first"]  # 3: from a fallback
    verify = damaged.run("verify", "--json", expect=1)
    findings = json.loads(verify.stdout)["findings"]
    assert [(f["kind"], f["key"]) for f in findings] == [("torn-manifest", "manifests/000000000002")]
    assert [(e["seq"], e["error"] is None) for e in damaged.log()] == [(2, False), (1, True)]


@pytest.mark.parametrize("keep", [0, 30, "half"], ids=["empty", "header-cut", "frame-cut"])
def test_restore_skips_a_truncated_newest_manifest_and_verify_reports_it(damaged, damaged_base, keep):
    manifest = damaged.store_path / "manifests" / "000000000002"
    data = manifest.read_bytes()
    manifest.write_bytes(data[: len(data) // 2 if keep == "half" else keep])

    assert describe(restore_to(damaged, "out", expect=3)) == damaged_base["first"]
    findings = json.loads(damaged.run("verify", "--json", expect=1).stdout)["findings"]
    assert [(f["kind"], f["key"]) for f in findings] == [("torn-manifest", "manifests/000000000002")]


@pytest.mark.parametrize("offset", [6, 7], ids=["flags-hi", "flags-lo"])
def test_verify_reports_a_manifest_whose_flags_bytes_were_flipped(damaged, offset):
    """docs/design.md §4: flags is 0 in format 1; a record saying otherwise is not what was written."""
    flip(damaged.store_path / "manifests" / "000000000002", offset)
    findings = json.loads(damaged.run("verify", "--json", expect=None).stdout)["findings"]
    assert [(f["kind"], f["key"]) for f in findings] == [("torn-manifest", "manifests/000000000002")]


def test_damaged_blobs_fall_back_to_the_newest_older_good_copy(damaged, damaged_base):
    rollout = f"{SESSIONS}/{SMALL_ROLLOUT}"
    keys = {flip_blob(damaged, entry_of(damaged, 2, "version.json").refs[0]),
            flip_blob(damaged, entry_of(damaged, 2, rollout).refs[-1])}

    full = json.loads(damaged.run("verify", "--full", "--json", expect=1).stdout)
    assert sorted(f["kind"] for f in full["findings"]) == ["corrupt-object", "corrupt-object"]
    assert {f["key"].split("@")[0] for f in full["findings"]} == keys
    damaged.run("verify")  # the quick audit does not read blobs

    proc = damaged.run("restore", "--to", str(damaged.root / "out"), expect=3)
    assert "restored from manifest 1" in proc.stderr and "FALLBACK" in proc.stdout
    out = damaged.root / "out" / "codex"
    assert (out / "version.json").read_bytes() == damaged_base["first_bytes"]["version"]
    assert (out / rollout).read_bytes() == damaged_base["first_bytes"]["rollout"]
    expected = dict(damaged_base["second"])
    for path in ("version.json", rollout):
        expected[path] = damaged_base["first"][path]
    assert describe(out) == expected


def test_damaged_blob_without_an_older_copy_is_lost_and_never_reaches_the_live_tree(damaged, damaged_base):
    big = entry_of(damaged, 2, "bulk/big.bin")
    assert len(big.refs) == 3
    flip_blob(damaged, big.refs[2])  # the last chunk: the first two verify and are written first
    flip_blob(damaged, entry_of(damaged, 2, "notes/new.txt").refs[0])
    codex = damaged.codex
    codex.mkdir()
    (codex / "bulk").mkdir()
    stale = b"an older local big.bin that restore may replace but never with unverified bytes"
    (codex / "bulk" / "big.bin").write_bytes(stale)
    os.utime(codex / "bulk" / "big.bin", ns=(1_000_000_000, 1_000_000_000))

    proc = damaged.run("restore", expect=1)
    assert "LOST bulk/big.bin" in proc.stdout and "LOST notes/new.txt" in proc.stdout
    assert "restore INCOMPLETE" in proc.stderr
    assert (codex / "bulk" / "big.bin").read_bytes() == stale
    assert not (codex / "notes" / "new.txt").exists()
    assert not list(codex.glob(LEFT_TMP))
    got = describe(codex)
    for path, item in damaged_base["second"].items():
        if path not in ("bulk/big.bin", "notes/new.txt"):
            assert got[path] == item, path
    assert not load_state(str(damaged.state_dir), damaged.repo().store_id).restore_complete
    damaged.run("verify", "--full", expect=1)


def test_truncated_data_pack_loses_only_its_cut_records_and_they_fall_back(damaged, damaged_base):
    entries, _ = ManifestCache(damaged.repo()).tree(2, "codex")
    rollout = f"{SESSIONS}/{SMALL_ROLLOUT}"
    data_pack = entry_of(damaged, 2, rollout).refs[-1].pack
    in_pack = [(r.offset, e.path) for e in entries for r in e.refs if r.pack == data_pack]
    cut_at, cut_path = max(in_pack)
    path = damaged.store_path / pack_key(data_pack)
    path.write_bytes(path.read_bytes()[: cut_at + 60])  # the pack's last record loses its tail
    assert cut_path in ("version.json", rollout), "the last record belongs to a file checkpoint 1 also holds"

    quick = json.loads(damaged.run("verify", "--json", expect=1).stdout)
    assert [f["kind"] for f in quick["findings"]] == ["short-pack"]  # found from the listing's size
    full = json.loads(damaged.run("verify", "--full", "--json", expect=1).stdout)
    assert [f["kind"] for f in full["findings"]] == ["short-pack"]
    restore_to(damaged, "out", expect=3)
    out = damaged.root / "out" / "codex"
    expected = dict(damaged_base["second"])
    expected[cut_path] = damaged_base["first"][cut_path]
    assert describe(out) == expected


def test_damaged_index_page_makes_restore_use_the_previous_manifest(damaged, damaged_base):
    manifest, _ = damaged.repo().load_manifest(2)
    root = manifest.trees["codex"].root
    flip_blob(damaged, root)

    findings = json.loads(damaged.run("verify", "--json", expect=1).stdout)["findings"]
    assert [(f["kind"], f["manifest"]) for f in findings] == [("corrupt-page", 2)]
    assert describe(restore_to(damaged, "out", expect=3)) == damaged_base["first"]

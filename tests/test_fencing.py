"""Writer fencing: several containers on one store never fork its history.

A container is a separate ``$AM_LOCAL`` with its own state directory, driven through
the CLI in its own processes. Every scenario runs on a local directory store and on S3
(moto's server). Faults are injected with ``tests/faults.py`` and, for S3, by stopping
the server in the middle of a checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import Live, container_env, copy_fixtures
from faults import FaultyStore

from journal.checkpoint.run import checkpoint
from journal.config import load_config
from journal.errors import JournalError, StoreError
from journal.checkpoint.errors import CheckpointErrors
from journal.repository.errors import ManifestConflict
from journal.repository.repository import Repository, manifest_key
from journal.restore.run import restore
from journal.store import open_store
from journal.store.cloud import CloudStore
from journal.store.local import LocalStore
from journal.verify import verify

pytest_plugins = ["tests.s3server"]

ROLLOUT = "codex-home/sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
TREES = ("codex-home", "agent-state/claude", "oc-home/.openclaw")
SESSION = "oc-home/.openclaw/agents/main/sessions/d703a1a9-1b7b-4fb1-b512-c9738b1fe617.jsonl"


@dataclass
class Shared:
    """The store every container of a test points at."""

    kind: str
    url: str
    env: dict[str, str] = field(default_factory=dict)

    def keys(self) -> list[str]:
        return list(open_store(self.url).list())

    def repo(self) -> Repository:
        return Repository.open(open_store(self.url))

    def seqs(self) -> list[int]:
        return self.repo().manifest_seqs()

    def manifest(self, seq: int):
        return self.repo().load_manifest(seq)[0]


@pytest.fixture(params=["local", "s3"])
def shared(request, tmp_path) -> Shared:
    if request.param == "local":
        return Shared("local", str(tmp_path / "store"))
    bucket = request.getfixturevalue("s3_bucket")
    return Shared("s3", bucket.url, dict(bucket.server.env))


def container(home: Path, store: Shared, fixtures: bool = True) -> Live:
    """One container on ``store``: ``$AM_LOCAL`` (real fixtures unless ``fixtures=False``),
    its state, the CLI (``run`` expects exit 0 unless told)."""
    return Live(home, store.url, env=store.env, fixtures=fixtures, expect=0)


def snapshot(box: Live) -> dict[str, dict[str, tuple]]:
    """Each harness tree's paths with bytes, modes, mtimes and link targets."""
    return {tree: Live.snapshot(box.local / tree) for tree in TREES}


def line(text: str) -> str:
    return '{"type":"event_msg","payload":{"type":"agent_message","message":"%s"}}\n' % text


def assert_linear(store: Shared) -> None:
    """Manifests 1..N, each built on the one before it."""
    repo = store.repo()
    seqs = repo.manifest_seqs()
    assert seqs == list(range(1, len(seqs) + 1))
    previous_id = None
    for seq in seqs:
        manifest, mid = repo.load_manifest(seq)
        assert manifest.parent == (seq - 1 or None), f"manifest {seq} names parent {manifest.parent}"
        assert manifest.parent_id == previous_id, f"manifest {seq} was built on another history"
        previous_id = mid


def referenced_packs(store: Shared) -> set[str]:
    repo = store.repo()
    return {p for seq in repo.manifest_seqs() for p in repo.load_manifest(seq)[0].packs}


def fresh_restore(tmp_path: Path, store: Shared, name: str) -> Live:
    """A new container restored from the store; the restore must be complete."""
    box = container(tmp_path / name, store, fixtures=False)
    assert "restore complete" in box.run("restore").stdout
    return box


# --- a. two writers at once ---------------------------------------------------------------------


def test_second_writer_to_commit_is_refused_naming_the_first_and_the_ways_out(shared, tmp_path):
    a = container(tmp_path / "a", shared)
    a.run("checkpoint")
    b = container(tmp_path / "b", shared, fixtures=False)
    b.run("restore")
    a.append(ROLLOUT, line("from a"))
    b.append(SESSION, '{"type":"message","id":"b1","message":{"role":"user","content":"from b"}}\n')
    b.write("codex-home/memories/b-notes.md", "written by b\n")

    first = a.run("checkpoint")
    refused = b.run("checkpoint", expect=1)

    theirs = shared.manifest(2)
    assert (theirs.host, theirs.pid) == (socket.gethostname(), first.pid)
    message = refused.stderr
    assert message.startswith("journal: error: ") and len(message.strip().splitlines()) == 1
    assert f"host {theirs.host}" in message and f"pid {first.pid}" in message and theirs.created in message
    assert "journal restore" in message, "names the way back: adopt the history"
    assert "store prefix" in message, "names the way out: another store prefix"
    assert "journal takeover" in message, "names the way to take the history over"
    assert shared.seqs() == [1, 2] and shared.manifest(2).writer == theirs.writer


def test_refused_writer_stops_publishing_until_it_restores_then_keeps_its_work_as_a_fork(shared, tmp_path):
    a = container(tmp_path / "a", shared)
    a.run("checkpoint")
    b = container(tmp_path / "b", shared, fixtures=False)
    b.run("restore")
    a.append(ROLLOUT, line("from a"))
    a.run("checkpoint")
    b.append(SESSION, '{"type":"message","id":"b1","message":{"role":"user","content":"from b"}}\n')
    b.write("codex-home/memories/b-notes.md", "written by b\n")
    b.run("checkpoint", expect=1)
    keys = shared.keys()

    for n in range(3):                           # for good: later changes change nothing
        b.write("codex-home/memories/b-notes.md", f"written by b, take {n}\n")
        again = b.run("checkpoint", expect=1)
        assert "checkpoint 2 was committed" in again.stderr
        assert shared.keys() == keys, "a refused writer published something"
    assert shared.seqs() == [1, 2]

    recovered = json.loads(b.run("restore", "--json").stdout)
    b.append(ROLLOUT, line("from b, after the restore"))
    committed = b.run("checkpoint")

    assert recovered["lineage"] == "stale" and recovered["fork"]["seq"] == 3
    assert "codex/memories/b-notes.md" in recovered["fork"]["work"]
    assert committed.stdout.startswith("checkpoint 4:")
    assert shared.manifest(3).is_fork and shared.manifest(4).parent == 2
    assert not (b.local / "codex-home/memories/b-notes.md").exists(), "the live trees are a's checkpoint"
    assert (b.local / ROLLOUT).read_text().endswith(line("from a") + line("from b, after the restore"))
    exported = tmp_path / "fork"
    b.run("restore", "--at", "3", "--to", str(exported))
    assert (exported / "codex/memories/b-notes.md").read_text() == "written by b, take 2\n", "b's work is kept"
    assert (exported / "openclaw" / SESSION.split("/", 2)[2]).read_text().endswith('"content":"from b"}}\n')
    c = fresh_restore(tmp_path, shared, "c")
    assert snapshot(c) == snapshot(b)


# --- b. a stale writer after a takeover ---------------------------------------------------------


def test_stale_writer_after_another_container_took_over_publishes_nothing(shared, tmp_path):
    a = container(tmp_path / "a", shared)
    for n in range(3):
        a.append(ROLLOUT, line(f"a {n}"))
        a.run("checkpoint")
    b = container(tmp_path / "b", shared, fixtures=False)
    b.run("restore")
    b.append(ROLLOUT, line("b took over"))
    b.run("checkpoint")
    taken = shared.manifest(4)
    packs = referenced_packs(shared)

    a.append(ROLLOUT, line("a, stale"))
    a.write("codex-home/memories/stale.md", "a's view\n")
    stale = a.run("checkpoint", expect=1)
    again = a.run("checkpoint", expect=1)

    for refused in (stale, again):
        assert "checkpoint 4 was committed" in refused.stderr
        assert f"pid {taken.pid}" in refused.stderr and taken.created in refused.stderr
    assert shared.seqs() == [1, 2, 3, 4] and shared.manifest(4) == taken
    assert_linear(shared)
    assert referenced_packs(shared) == packs, "a pack of the stale writer is named by a manifest"
    c = fresh_restore(tmp_path, shared, "c")
    assert (c.local / ROLLOUT).read_text().endswith(line("b took over"))
    assert not (c.local / "codex-home/memories/stale.md").exists()
    assert "a, stale" not in (c.local / ROLLOUT).read_text()


# --- c. a container that never restored ---------------------------------------------------------


def test_fresh_container_that_never_restored_is_refused_and_writes_nothing(shared, tmp_path, request):
    a = container(tmp_path / "a", shared)
    a.run("checkpoint")
    a.append(ROLLOUT, line("second"))
    a.run("checkpoint")
    b = container(tmp_path / "b", shared)              # its own copy of the trees, no state
    b.write("codex-home/memories/b.md", "b's own file\n")
    keys = shared.keys()
    bucket = request.getfixturevalue("s3_bucket") if shared.kind == "s3" else None
    since = bucket.mark() if bucket else 0

    refused = b.run("checkpoint", expect=1)

    assert "already holds checkpoint 2" in refused.stderr and "journal restore" in refused.stderr
    assert shared.keys() == keys
    if bucket:
        assert bucket.writes(since) == [], "a refused fresh container sent a write request"
    assert not (b.local / ".journal" / "state.msgpack").exists()


# --- d. a container restarting after a crash -----------------------------------------------------


KILLER = textwrap.dedent(r'''
    """Run the journal CLI; SIGKILL this process at the moment JOURNAL_TEST_KILL names."""
    import os, signal, sys
    from journal.repository import pack
    from journal.repository import repository
    moment = os.environ["JOURNAL_TEST_KILL"]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if moment == "after-data-pack":
        upload = pack.PackWriter._upload
        def _upload(self, path, pack_id, size):
            upload(self, path, pack_id, size)
            die()
        pack.PackWriter._upload = _upload
    elif moment == "before-manifest":
        def put_manifest(self, record, seq, staged=None):
            die()
        repository.Repository.put_manifest = put_manifest
    elif moment == "after-manifest":
        put = repository.Repository.put_manifest
        def put_manifest(self, record, seq, staged=None):
            put(self, record, seq, staged)
            die()
        repository.Repository.put_manifest = put_manifest
    sys.argv[0] = "journal"
    from journal.cli.entry import main
    main()
''')


def spooled(spool: Path) -> int:
    """The size of the largest pack being spooled (files come and go while we look)."""
    sizes = [0]
    for path in spool.glob("*.pack"):
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:
            pass
    return max(sizes)


def kill_mid_read(box: Live) -> int:
    """Start a checkpoint and SIGKILL it once its spooled data pack holds 2 MiB."""
    proc = box.popen("checkpoint")
    spool = box.local / ".journal" / "spool"
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if spooled(spool) >= 2 << 20:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    proc.communicate(timeout=60)
    return proc.returncode


@pytest.mark.parametrize("moment", ["mid-read", "after-data-pack", "before-manifest", "after-manifest", "clean"])
def test_container_restarting_after_a_crash_needs_no_manual_cleanup(shared, tmp_path, moment):
    a = container(tmp_path / "a", shared)
    a.run("checkpoint")
    big = os.urandom(6 << 20)
    a.write("codex-home/memories/notes.md", "notes\n")
    (a.local / "codex-home/memories/big.bin").write_bytes(big)
    a.append(ROLLOUT, line("before the crash"))

    if moment == "mid-read":
        code = kill_mid_read(a)
    elif moment == "clean":
        code = a.run("checkpoint").returncode
    else:
        proc = a.popen("checkpoint", cmd=[sys.executable, "-c", KILLER], env={"JOURNAL_TEST_KILL": moment})
        proc.communicate(timeout=60)
        code = proc.returncode
    assert code == (0 if moment == "clean" else -signal.SIGKILL), f"the checkpoint was not killed {moment}"
    want = snapshot(a)

    restarted = a.run("restore")                 # the restarted container's startup restore
    assert "restore complete" in restarted.stdout
    assert snapshot(a) == want, "restore changed a newer local file"
    a.append(ROLLOUT, line("after the restart"))
    a.run("checkpoint")

    seqs = shared.seqs()
    assert seqs == [1, 2, 3] if moment in ("after-manifest", "clean") else seqs == [1, 2]
    assert_linear(shared)
    c = fresh_restore(tmp_path, shared, "c")
    assert snapshot(c) == snapshot(a)
    a.run("verify", "--full")


# --- e. faults ------------------------------------------------------------------------------------


def root_env(root: Path, store_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a container laid out on ``root`` (``local``, ``home``)."""
    return container_env(root / "local", store_url, root / "home", **(extra or {}))


def write_db(path: Path, rows: range) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS message (id INTEGER PRIMARY KEY, body TEXT)")
    db.executemany("INSERT INTO message VALUES (?, ?)", [(i, f"message {i} " * 20) for i in rows])
    db.commit()
    db.close()


def db_rows(path: Path) -> list[tuple]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT id, body FROM message ORDER BY id").fetchall()
    finally:
        db.close()


def file_trees(local: Path) -> dict[str, dict[str, tuple]]:
    """The plain-file trees of a fault template (the database is compared by its rows)."""
    return {"codex-home": Live.snapshot(local / "codex-home")}


@pytest.fixture
def fault_template(tmp_path) -> Path:
    """A container and a local store after checkpoint 1, with changes of every kind waiting:
    appended JSONL lines, an edited file, a new file, a changed chunk of a big file and new
    database rows. Its page-map cache is gone (as after a restart), so the checkpoint
    reads the previous map back from the store."""
    root = tmp_path / "template"
    local = root / "local"
    codex = local / "codex-home"
    (codex / "sessions").mkdir(parents=True)
    (codex / "memories").mkdir()
    (local / "opencode-share").mkdir()
    rollout = codex / "sessions" / "rollout.jsonl"
    rollout.write_text("".join(line(f"first {i}") for i in range(200)))
    (codex / "memories" / "a.md").write_text("a\n")
    big = bytearray(os.urandom(5 << 19))
    (codex / "big.bin").write_bytes(big)
    write_db(local / "opencode-share" / "opencode.db", range(0, 300))
    env = root_env(root, str(root / "store"))
    assert checkpoint(load_config(env=env), LocalStore(str(root / "store"))).seq == 1

    with open(rollout, "a") as fh:
        fh.write("".join(line(f"second {i}") for i in range(50)))
    (codex / "memories" / "a.md").write_text("a, edited\n")
    (codex / "memories" / "b.md").write_text("b, new\n")
    big[(1 << 20) + 5] ^= 0xFF
    (codex / "big.bin").write_bytes(big)
    write_db(local / "opencode-share" / "opencode.db", range(300, 400))
    shutil.rmtree(local / ".journal" / "maps")
    return root


def clone(template: Path, dest: Path) -> tuple[dict[str, str], str]:
    shutil.copytree(template, dest, symlinks=True)
    return root_env(dest, str(dest / "store")), str(dest / "store")


def _nth(call: tuple[str, str], nth: int):
    """A ``fail_when`` that is true for the ``nth`` time ``call`` is made, and only then
    (``FaultyStore`` asks it under its lock)."""
    made = 0

    def pick(method: str, key: str) -> bool:
        nonlocal made
        if (method, key) != call:
            return False
        made += 1
        return made == nth
    return pick


def test_checkpoint_failing_at_any_store_call_leaves_the_previous_manifest_and_the_next_one_succeeds(
        fault_template, tmp_path):
    env, store_dir = clone(fault_template, tmp_path / "count")
    counting = FaultyStore(LocalStore(store_dir))
    assert checkpoint(load_config(env=env), counting).seq == 2
    calls = counting.calls
    assert ("put_if_absent", manifest_key(2)) == calls[-1]
    assert sum(1 for method, key in calls if method == "put_if_absent") == 3
    assert any(method == "get" and key.startswith("packs/") for method, key in calls), "no page map read back"

    # Each call is failed by what it is (its method, key and occurrence), not by its
    # position: the fence's two HEADs, and the two packs' PUTs, go out at once.
    for n in range(1, len(calls) + 1):
        env, store_dir = clone(fault_template, tmp_path / f"fail-{n}")
        cfg = load_config(env=env)
        faulty = FaultyStore(LocalStore(store_dir), fail_when=_nth(calls[n - 1], calls[:n].count(calls[n - 1])))
        with pytest.raises(JournalError) as err:
            checkpoint(cfg, faulty)
        assert faulty.failed == [calls[n - 1]], f"call {n}: that call was not made"
        assert "injected fault" in str(err.value), f"call {n}: {err.value!r}"

        repo = Repository.open(LocalStore(store_dir))
        committed = err.value.seq if isinstance(err.value, CheckpointErrors) else None
        assert repo.manifest_seqs() == ([1, 2] if committed == 2 else [1]), f"call {n} ({calls[n - 1]})"
        assert verify(repo).ok, f"call {n}: the store does not verify after the fault"
        temp = Path(store_dir, ".tmp")
        assert not temp.exists() or list(temp.iterdir()) == [], f"call {n}: temp files left in the store"

        again = checkpoint(cfg, LocalStore(store_dir))
        assert again.seq == (3 if committed == 2 else 2), f"call {n}: {again.seq}"
        assert verify(repo, full=True).ok
        out = tmp_path / f"restored-{n}"
        restored_env = root_env(out, store_dir)
        (out / "local").mkdir(parents=True)
        result = restore(load_config(env=restored_env), LocalStore(store_dir))
        assert result.complete, f"call {n}: {result}"
        live = Path(env["AM_LOCAL"])
        assert file_trees(out / "local") == file_trees(live), f"call {n} ({calls[n - 1]})"
        assert db_rows(out / "local" / "opencode-share" / "opencode.db") == \
            db_rows(live / "opencode-share" / "opencode.db")


def test_s3_outage_in_the_middle_of_a_checkpoint_fails_cleanly_and_the_next_one_succeeds(s3_server, tmp_path):
    from tests.s3server import MotoEndpoint

    server = MotoEndpoint().start()              # its own server: this test stops it
    try:
        bucket = server.new_bucket(timeout="10s", connect_timeout="1s")
        root = tmp_path / "a"
        env = root_env(root, bucket.url)
        copy_fixtures(root / "local")
        cfg = load_config(env=env)
        assert checkpoint(cfg, CloudStore(bucket.url)).seq == 1
        for n in range(3):                       # 66 MiB: a multipart data pack, a small one, the index
            (root / "local" / "codex-home" / f"big-{n}.bin").write_bytes(os.urandom(22 << 20))
        with open(root / "local" / ROLLOUT, "a") as fh:
            fh.write(line("during the outage"))

        stopped = threading.Event()

        def stop_after_first_pack(method: str, key: str) -> None:
            if method == "put_if_absent" and key.startswith("packs/") and not stopped.is_set():
                stopped.set()
                server.stop()

        outcome: dict[str, object] = {}

        def run() -> None:
            try:
                outcome["result"] = checkpoint(cfg, FaultyStore(CloudStore(bucket.url), after=stop_after_first_pack))
            except BaseException as err:  # noqa: BLE001 - the test inspects it
                outcome["error"] = err

        worker = threading.Thread(target=run)
        worker.start()
        worker.join(timeout=120)                 # obstore gives up within its 60 s retry budget (design §14)
        assert not worker.is_alive(), "the checkpoint hangs while the server is down"
        assert stopped.is_set(), "no pack was published before the outage"
        assert isinstance(outcome.get("error"), StoreError), outcome
        assert list((root / "local" / ".journal" / "spool").glob("*")) == []

        server.start()                           # same port, same (in-process) moto state
        store = CloudStore(bucket.url)
        repo = Repository.open(store)
        assert repo.manifest_seqs() == [1]
        for key in store.list("packs/"):
            assert hashlib.sha256(store.get(key)).hexdigest() == key.rsplit("/", 1)[-1], f"{key} is partial"
        assert verify(repo).ok

        assert checkpoint(cfg, CloudStore(bucket.url)).seq == 2
        assert verify(Repository.open(CloudStore(bucket.url))).ok   # restore below re-hashes every blob
        fresh = tmp_path / "fresh"
        (fresh / "local").mkdir(parents=True)
        result = restore(load_config(env=root_env(fresh, bucket.url)), CloudStore(bucket.url))
        assert result.complete
        for tree in TREES:
            assert Live.snapshot(fresh / "local" / tree) == Live.snapshot(root / "local" / tree), tree
    finally:
        server.stop()


def test_the_fence_asks_for_both_manifests_at_once_and_a_failed_ask_stops_the_checkpoint(tmp_path):
    """The two HEADs of the fence (``manifests/<seq>`` still there, ``manifests/<seq+1>``
    not yet) go out together: the second is asked while the first, made slow here as a
    bucket's round trip is, is still under way. A failure of either stops the
    checkpoint before anything more is uploaded."""
    live = Live(tmp_path / "home", tmp_path / "store")
    transcript = "codex-home/sessions/2026/12/05/rollout-a.jsonl"
    live.write(transcript, '{"n": 0}\n')
    checkpoint(live.cfg, live.store)
    live.append(transcript, '{"n": 1}\n')
    seen: list[bool] = []

    def slow_first_head(method: str, key: str) -> None:
        if (method, key) == ("head", manifest_key(1)):
            time.sleep(0.3)
            seen.append(("head", manifest_key(2)) in store.calls)

    store = FaultyStore(live.store, after=slow_first_head)
    assert checkpoint(live.cfg, store).seq == 2
    assert seen == [True], "the HEAD of manifests/<seq+1> waited for the one of manifests/<seq>"

    live.append(transcript, '{"n": 2}\n')
    refused = FaultyStore(live.store, fail_when=lambda method, key: (method, key) == ("head", manifest_key(3)))
    with pytest.raises(StoreError):
        checkpoint(live.cfg, refused)
    assert not [c for c in refused.calls if c[0] == "put_if_absent"], "nothing uploaded past a failed fence"
    assert checkpoint(live.cfg, live.store).seq == 3

    # Another writer's manifest 4 is there: refused before any pack is uploaded.
    live.store.put_if_absent(manifest_key(4), live.store.get(manifest_key(3)))
    live.append(transcript, '{"n": 3}\n')
    watched = FaultyStore(live.store)
    with pytest.raises(ManifestConflict):
        checkpoint(live.cfg, watched)
    assert not [c for c in watched.calls if c[0] == "put_if_absent"], "nothing uploaded past a taken sequence"

"""``journal supervise`` and ``journal status`` with real processes and real signals.

Every test runs the CLI as a subprocess (``python -m journal``) against a local
store, with a real child (CMD) that appends numbered, time-stamped JSON lines to a
transcript it holds open under ``$AM_LOCAL/codex-home/sessions/`` (the ``codex``
preset). Assertions are about behaviour and counts: exit statuses, which lines the
store holds after a restore into an empty directory, what ``status.json`` says, and
what ``/proc`` shows about children. Tests wait for events (a file, a status change,
a manifest), never for a stretch of time; timeouts only bound a failing test.

The harness (``Supervised``, /proc and store helpers) is ``tests/supervisebox.py``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from conftest import drop_dac_override, wait_for
from heldfile import HeldFile
from journal.repository.repository import pack_key
from journal.repository.repository import Repository
from journal.store import open_store
from supervisebox import (INTERVAL, assert_not_torn, assert_store_clean, boxes, children_of, complete_lines, finish,
                          flock_holders, manifest_seqs, parse_lines, proc_stat, restore_to, restored_session)

# The supervised child. It appends {"n", "t", "pad"} lines to the transcript, each
# written in two flushed halves (so a checkpoint can observe a torn last line), and
# never closes the file. Modes:
#   term-exit:<code>   on SIGTERM: finish the current line, exit <code>
#   term-die           SIGTERM kills it (default disposition)
#   term-ignore        SIGTERM is ignored (supervise must SIGKILL it after --grace)
#   term-big:<code>    on SIGTERM: finish the line, write a large non-JSONL file, exit <code>
#   count:<n>:<code>   write n lines, then exit <code> at once (no SIGTERM needed)
WRITER = r'''
import json, os, signal, sys, time

path, period, mode, rundir = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
stop = False

def on_term(signum, frame):
    global stop
    stop = True
    with open(os.path.join(rundir, "child-got-signal"), "a") as fh:
        fh.write(f"{signum}\n")

if mode.startswith(("term-exit", "term-big")):
    signal.signal(signal.SIGTERM, on_term)
elif mode == "term-ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(os.path.join(rundir, "child-pid"), "w") as fh:
    fh.write(str(os.getpid()))
limit = int(mode.split(":")[1]) if mode.startswith("count:") else None
fh = open(path, "a")
n = 0
while not stop and (limit is None or n < limit):
    n += 1
    line = json.dumps({"n": n, "t": time.time(), "pad": "x" * (40 + n % 60)})
    half = len(line) // 2
    fh.write(line[:half])
    fh.flush()
    time.sleep(0.002)
    fh.write(line[half:] + "\n")
    fh.flush()
    if n == 3:
        open(os.path.join(rundir, "child-ready"), "w").close()
    time.sleep(period)
if mode.startswith("term-big"):
    big = os.path.join(os.path.dirname(path), "..", "..", "..", "..", "big.bin")
    with open(big, "wb") as out:
        for i in range(24):
            out.write(os.urandom(1 << 20))
    os.rename(os.path.join(rundir, "child-ready"), os.path.join(rundir, "child-big-written"))
sys.exit(int(mode.rsplit(":", 1)[1]) if ":" in mode else 0)
'''


# ---------------------------------------------------------------- helpers


@pytest.fixture
def box(tmp_path):
    yield from boxes(tmp_path, WRITER)


def lines_written(b) -> int:
    """How many complete lines the child has written so far."""
    return len(parse_lines(complete_lines(b.session.read_bytes())))


# ---------------------------------------------------------------- 1. graceful stop


@pytest.mark.parametrize("mode, sig, expected", [
    ("term-exit:7", signal.SIGTERM, 7),
    ("term-die", signal.SIGTERM, 128 + signal.SIGTERM),
    ("term-die", signal.SIGHUP, 128 + signal.SIGHUP),
], ids=["child-exits-7", "child-dies-by-sigterm", "child-dies-by-sighup"])
def test_stop_signal_forwards_waits_takes_final_checkpoint_and_keeps_every_line(box, mode, sig, expected):
    b = box()
    sup = b.supervise(b.writer_cmd(mode), "--grace", "5")
    b.wait_ready(sup, checkpoints=2)
    child = b.child_pid()
    assert b.status()["child_pid"] == child
    # CMD runs in its own process group, not in supervise's.
    assert os.getpgid(child) == child != os.getpgid(sup.pid)
    written = lines_written(b)
    wait_for(lambda: lines_written(b) >= written + 5, 60, "lines written after the last checkpoint")

    sup.send_signal(sig)
    rc = finish(sup)

    assert rc == expected, b.output()
    assert proc_stat(child) is None, "the child was not reaped"
    if mode.startswith("term-exit"):
        assert (b.run_dir / "child-got-signal").read_text().split() == [str(int(signal.SIGTERM))]
    live = b.session.read_bytes()
    if mode.startswith("term-exit"):
        assert live.endswith(b"\n"), "the child should have finished its current line"
    restored = restored_session(restore_to(box))
    assert restored == complete_lines(live), (
        f"store holds {len(parse_lines(restored))} lines, the child wrote {len(parse_lines(complete_lines(live)))}")
    assert_not_torn(restored)
    assert_store_clean(b)
    st = b.status()
    assert st["stopped"] is not None and st["last_error"] is None
    assert b.status_report()["running"] is False


def test_sigterm_child_that_ignores_it_is_killed_after_grace(box):
    """Grace runs out: the child is killed, then the final checkpoint holds every line it completed."""
    b = box()
    sup = b.supervise(b.writer_cmd("term-ignore"), "--grace", "1")
    b.wait_ready(sup)
    child = b.child_pid()
    sup.send_signal(signal.SIGTERM)
    rc = finish(sup)
    assert rc == 128 + signal.SIGKILL, f"CMD died of the SIGKILL after --grace, not of SIGTERM:\n{b.output()}"
    assert proc_stat(child) is None, "the child outlived supervise"
    assert not (b.run_dir / "child-got-signal").exists()  # it ignored SIGTERM: SIGKILL ended it
    restored = restored_session(restore_to(box))
    assert restored == complete_lines(b.session.read_bytes()), "lines written within --grace are missing"
    assert len(assert_not_torn(restored)) >= 3
    assert_store_clean(b)


# ---------------------------------------------------------------- 2. ungraceful stop


def test_kill_9_loses_only_lines_written_after_the_last_committed_tick_began(box):
    """At most one interval plus one checkpoint is lost, counted in ticks: a line
    written before manifest ``s`` was seen is in manifest ``s + 2`` (whose tick began
    after ``s + 1`` committed), so it survives a kill -9 once ``s + 2`` is there."""
    b = box()
    sup = b.supervise(b.writer_cmd("term-exit:0"))
    b.wait_ready(sup, checkpoints=3)
    wait_for(lambda: lines_written(b) >= 15, 60, "15 lines")
    must_have = lines_written(b)
    seen = manifest_seqs(b.store_path)[-1]
    wait_for(lambda: manifest_seqs(b.store_path)[-1] >= seen + 2, 60, "two more ticks")
    child = b.child_pid()
    os.kill(sup.pid, signal.SIGKILL)
    os.kill(child, signal.SIGKILL)
    assert finish(sup) == -signal.SIGKILL
    wait_for(lambda: proc_stat(child) is None or proc_stat(child)[0] == "Z", 30, "the child to die")

    live = parse_lines(complete_lines(b.session.read_bytes()))
    restored = assert_not_torn(restored_session(restore_to(box)))
    assert restored == live[:len(restored)], "the restored transcript is not a prefix of the live one"
    assert len(restored) >= must_have, (
        f"lost lines written before manifest {seen}: the store ends at line {len(restored)} of {must_have}")
    assert b.status_report()["running"] is False

    # The same container recovers: a manual checkpoint finishes (or republishes) and the store is clean.
    b.run("checkpoint", expect=0)
    assert_store_clean(b)
    assert restored_session(restore_to(box, "restorer2")) == complete_lines(b.session.read_bytes())


# ---------------------------------------------------------------- 3. overlap


def test_timer_manual_checkpoints_and_a_held_lock_never_overlap(box):
    b = box()
    sup = b.supervise(b.writer_cmd("term-exit:0"))
    b.wait_ready(sup)

    manual: list[subprocess.CompletedProcess] = []
    done = threading.Event()

    def other_shell():
        while not done.is_set():
            manual.append(b.run("checkpoint"))

    def busy_manuals() -> int:
        return sum(p.returncode != 0 for p in list(manual))

    def last_success() -> float:
        return b.status().get("last_success") or 0.0

    shell = threading.Thread(target=other_shell)
    shell.start()
    try:
        first = last_success()
        wait_for(lambda: any(p.returncode == 0 for p in list(manual)) and last_success() > first,
                 60, "a manual and a timer checkpoint to commit side by side")
        fd = os.open(b.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            skipped_before, busy_before = b.status().get("skipped_ticks", 0), busy_manuals()
            seqs_before = manifest_seqs(b.store_path)
            wait_for(lambda: b.status().get("skipped_ticks", 0) >= skipped_before + 2
                     and busy_manuals() >= busy_before + 1, 60, "ticks and a manual checkpoint to find the lock held")
            assert manifest_seqs(b.store_path) == seqs_before, "a checkpoint committed while the test held the lock"
            assert sup.poll() is None
            held = last_success()
        finally:
            os.close(fd)
        wait_for(lambda: last_success() > held, 60, "a timer checkpoint once the lock is free")
    finally:
        done.set()
        shell.join(60)

    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()

    st = b.status()
    assert st["failed_ticks"] == 0 and st["last_error"] is None, st
    busy = [p for p in manual if p.returncode != 0]
    assert all(p.returncode == 1 and "another journal operation holds" in p.stderr for p in busy), \
        [p.stderr for p in busy if "another journal operation holds" not in p.stderr]
    assert len(manual) - len(busy) >= 1, "no manual checkpoint ever got the lock"
    assert_store_clean(b)
    restored = restored_session(restore_to(box))
    assert restored == b.session.read_bytes()


# ---------------------------------------------------------------- 4. failed restore


@pytest.mark.parametrize("where", ["same-container", "fresh-container", "fresh-container-no-tree"])
def test_incomplete_restore_never_starts_cmd(box, where):
    a = box("a")
    a.session.parent.mkdir(parents=True)
    a.session.write_bytes(b'{"n": 1}\n{"n": 2}\n')
    (a.codex / "config.toml").write_text("model = 'x'\n")
    a.run("checkpoint", expect=0)
    shutil.rmtree(a.store_path / "packs")
    (a.store_path / "packs").mkdir()

    b = a if where == "same-container" else box("b")
    shutil.rmtree(b.codex, ignore_errors=True)
    if where != "fresh-container-no-tree":
        b.codex.mkdir()                   # the live tree exists but is empty
    marker = b.root / "cmd-ran"
    sup = b.supervise([sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"])
    rc = finish(sup)
    assert rc != 0, b.output()
    assert not marker.exists(), "CMD ran although the restore was incomplete"
    st = b.status()
    assert st["child_pid"] is None and st["stopped"] is not None
    assert st["last_error"].startswith("restore:"), st
    assert "not starting" in b.output()
    assert b.status_report()["running"] is False


def test_a_fallback_restore_starts_cmd_and_says_so_in_json_status_and_the_next_manifest(box):
    """The newest checkpoint's index page of the tree is damaged: the startup restore
    takes the checkpoint before. CMD starts (availability), and the fallback is on
    record: the --json summary, status.json, `journal status`, the final checkpoint."""
    a = box("a")
    a.session.parent.mkdir(parents=True)
    a.session.write_bytes(b'{"n": 1}\n')
    a.run("checkpoint", expect=0)
    a.session.write_bytes(b'{"n": 1}\n{"n": 2}\n')
    a.run("checkpoint", expect=0)
    root = Repository.open(open_store(str(a.store_path))).load_manifest(2)[0].trees["codex"].root
    with open(a.store_path / pack_key(root.pack), "r+b") as fh:
        fh.seek(root.offset + root.length - 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))

    b = box("b")
    seen = b.root / "seen"
    sup = b.supervise([sys.executable, "-c", f"import shutil; shutil.copyfile({str(b.session)!r}, {str(seen)!r})"],
                      "--json")
    rc = finish(sup)

    assert rc == 0, b.output()
    assert seen.read_bytes() == b'{"n": 1}\n', "CMD did not start on the fallback"
    summary = json.loads((b.root / "supervise.out").read_text())
    assert summary["exit"] == 0 and summary["error"] is None
    for record in (summary["status"]["restore"], b.status()["restore"]):
        assert record["complete"] and record["fallback"] and record["seq"] == 2
        assert record["trees"]["codex"] == 1 and "checkpoint 2 is unusable" in record["notes"][0]
    assert "fell back" in (b.root / "supervise.err").read_text()
    assert "complete from a FALLBACK" in b.run("status", expect=0).stdout
    assert manifest_seqs(b.store_path) == [1, 2, 3]
    assert "codex" in Repository.open(open_store(str(b.store_path))).load_manifest(3)[0].restored


def test_supervise_json_prints_the_summary_and_why_cmd_never_started(box):
    b = box()
    b.session.parent.mkdir(parents=True)
    b.session.write_bytes(b'{"n": 1}\n')
    b.run("checkpoint", expect=0)
    shutil.rmtree(b.store_path / "packs")
    (b.store_path / "packs").mkdir()
    shutil.rmtree(b.codex)

    rc = finish(b.supervise(["true"], "--json"))

    summary = json.loads((b.root / "supervise.out").read_text())
    assert rc == 1 and summary["exit"] == 1 and summary["kind"] == "RestoreIncomplete"
    assert summary["error"].startswith("restore:") and summary["status"]["child_pid"] is None
    assert summary["status"]["restore"]["complete"] is False


# ---------------------------------------------------------------- 5. CMD exits on its own


def test_cmd_exit_status_is_kept_after_the_final_checkpoint(box):
    """A long interval: only the final checkpoint can have stored the lines."""
    b = box()
    sup = b.supervise(b.writer_cmd("count:40:3", period=0.01), interval=60)
    rc = finish(sup)
    assert rc == 3, b.output()
    live = b.session.read_bytes()
    assert len(parse_lines(live)) == 40
    assert manifest_seqs(b.store_path) == [1]
    assert restored_session(restore_to(box)) == live
    st = b.status()
    assert st["last"]["seq"] == 1 and st["stopped"] is not None and st["last_error"] is None
    assert_store_clean(b)


def test_first_boot_on_an_empty_local_root_checkpoints_trees_cmd_creates(box):
    """A fresh container: $AM_LOCAL is empty when supervise starts; the agent creates
    codex-home/ itself. Its transcript must reach the store (the README's container
    recipe has exactly this shape)."""
    b = box()
    assert not b.codex.exists()
    sup = b.supervise(b.writer_cmd("count:30:0", period=0.02, make_tree=False))
    rc = finish(sup)
    assert rc == 0, b.output()
    st = b.status()
    assert st["last_error"] is None, f"supervise never checkpointed the tree CMD created: {st['last_error']}"
    assert restored_session(restore_to(box)) == b.session.read_bytes()


def test_fresh_container_gets_the_stored_trees_before_cmd_starts(box):
    """Container A checkpoints; container B (empty $AM_LOCAL, same store) runs supervise:
    CMD must see A's transcript."""
    a = box("a")
    a.session.parent.mkdir(parents=True)
    a.session.write_bytes(b'{"n": 1}\n{"n": 2}\n')
    a.run("checkpoint", expect=0)

    b = box("b")
    seen = b.root / "seen"
    probe = f"import shutil; shutil.copyfile({str(b.session)!r}, {str(seen)!r})"
    rc = finish(b.supervise([sys.executable, "-c", probe]))
    assert rc == 0 and seen.read_bytes() == b'{"n": 1}\n{"n": 2}\n', \
        f"CMD did not find the stored transcript (rc {rc}):\n{b.output()}"


def test_cmd_that_cannot_start_is_one_error_line_and_recorded(box):
    b = box()
    b.codex.mkdir()
    rc = finish(b.supervise(["/nonexistent/agent-server", "--port", "1"]))
    out = b.output()
    assert rc != 0
    assert "Traceback" not in out, f"supervise crashed instead of reporting the error:\n{out}"
    assert "/nonexistent/agent-server" in out
    st = b.status()
    assert st["stopped"] is not None, f"status.json does not record the stop: {st}"
    assert st["last_error"] and "/nonexistent/agent-server" in st["last_error"], st


# ---------------------------------------------------------------- 6. zombie reaping


# Three orphans (sleep 60; the test kills them once supervise has adopted them) and
# one that exits at once; sh itself runs on, so only supervise can reap them.
ORPHANS = ("for i in 1 2 3; do (sleep 60 & echo $! >> {pids}) ; done; "
           "(sh -c 'exit 0' &) ; sleep 60")


def test_orphans_are_reparented_to_supervise_and_reaped(box):
    b = box()
    b.codex.mkdir()
    pids = b.run_dir / "pids"                     # the fixture kills whatever is left
    sup = b.supervise(["sh", "-c", ORPHANS.format(pids=pids)], "--grace", "0.5")
    found = wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 3 and pids.read_text().split(),
                     60, "the orphans to start")
    orphans = [int(p) for p in found]
    wait_for(lambda: all((proc_stat(p) or ("", 0, ""))[1] == sup.pid for p in orphans), 60,
             "the orphans to be re-parented to supervise (is it a child subreaper?)")
    for pid in orphans:   # each exits: supervise must reap it (its /proc entry disappears)
        os.kill(pid, signal.SIGTERM)
    wait_for(lambda: all(proc_stat(p) is None for p in orphans), 60, "supervise to reap the orphans")
    wait_for(lambda: not [c for c in children_of(sup.pid) if c[1] == "Z"], 60, "no zombie children of supervise")
    assert sup.poll() is None and proc_stat(b.status()["child_pid"])[0] != "Z"
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 128 + signal.SIGTERM, b.output()


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_supervise_as_pid_1_in_a_pid_namespace_reaps_orphans(box):
    if not _unshare_works():
        pytest.skip("unshare --pid --fork --mount-proc is not available here")
    b = box()
    b.codex.mkdir()
    pids = b.run_dir / "orphans"                  # pids of the namespace: never killed from here by number
    wrapper = b.supervise(["sh", "-c", ORPHANS.format(pids=pids)], "--grace", "0.5",
                          prefix=["unshare", "--pid", "--fork", "--mount-proc"])
    sup_pid = wait_for(lambda: [p for p, _, _ in children_of(wrapper.pid)], 60, "supervise to start")[0]
    wait_for(lambda: b.status().get("child_pid"), 60, "CMD to start")
    assert b.status()["pid"] == 1, "supervise is not PID 1 in its namespace"
    # The orphans (sleep) become children of PID 1 = supervise; once they exit, it must reap them.
    orphans = wait_for(lambda: len(found := [p for p, _, comm in children_of(sup_pid) if comm == "sleep"]) == 3
                       and found, 60, "the three orphans re-parented to PID 1")
    for pid in orphans:
        os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not [c for c in children_of(sup_pid) if c[2] == "sleep" or c[1] == "Z"], 60,
             "PID 1 to reap the orphans")
    assert wrapper.poll() is None
    os.kill(sup_pid, signal.SIGTERM)         # PID 1 only gets signals it handles: supervise must handle it
    rc = finish(wrapper)
    assert rc == 128 + signal.SIGTERM, b.output()


# ---------------------------------------------------------------- 7. journal status


def test_status_while_running_and_after_stop(box):
    b = box()
    sup = b.supervise(b.writer_cmd("term-exit:0"))
    b.wait_ready(sup, checkpoints=2)

    rep = b.status_report()
    assert rep["running"] is True and rep["pid"] == sup.pid, rep
    st = rep["status"]
    assert st["pid"] == sup.pid and st["child_pid"] == b.child_pid() and st["interval"] == INTERVAL
    assert st["last"]["seq"] is not None and st["last"]["seq"] >= 1
    assert st["last"]["seq"] in manifest_seqs(b.store_path)
    assert st["last"]["bytes_uploaded"] > 0 and st["last"]["objects_uploaded"] > 0
    assert rep["lag_seconds"] is not None and 0 <= rep["lag_seconds"] < 30
    assert st["stopped"] is None and st["last_error"] is None
    text = b.run("status", expect=0).stdout
    assert f"supervisor: running, pid {sup.pid}" in text
    assert re.search(r"^last checkpoint: \d+ at ", text, re.M) and "last error: none" in text

    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0
    rep = b.status_report()
    assert rep["running"] is False and rep["pid"] is None
    assert rep["status"]["stopped"] is not None
    assert "supervisor: not running" in b.run("status", expect=0).stdout


def read_metrics(path) -> dict[str, float]:
    """The samples of a Prometheus text-format file; every one must come after its HELP
    and TYPE lines, and a counter's name must end in _total."""
    samples, declared = {}, {}
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            declared[line.split()[2]] = None
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name in declared and kind in ("gauge", "counter"), line
            assert (kind == "counter") == name.endswith("_total"), line
            declared[name] = kind
        else:
            name, value = line.split(" ")
            assert declared.get(name), f"{name} has no HELP and TYPE before it"
            samples[name] = float(value)
    return samples


def test_metrics_file_is_rewritten_after_every_tick_in_prometheus_text_format(box):
    b = box()
    metrics = b.root / "metrics" / "journal.prom"
    metrics.parent.mkdir()
    sup = b.supervise(b.writer_cmd("term-exit:0"), "--metrics-file", str(metrics))
    b.wait_ready(sup)

    running = wait_for(lambda: (m := read_metrics(metrics)).get("journal_checkpoints_total", 0) >= 2 and m, 60,
                       "two checkpoints in the metrics file")

    assert running["journal_last_checkpoint_seq"] in manifest_seqs(b.store_path)
    assert running["journal_uploaded_bytes_total"] > 0 and running["journal_uploaded_objects_total"] >= 6
    assert running["journal_tick_errors_total"] == running["journal_ticks_skipped_total"] == 0
    assert running["journal_restore_complete"] == 1 and running["journal_tick_duration_seconds"] >= 0
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    final = read_metrics(metrics)
    log = json.loads(b.run("log", "--json", expect=0).stdout)
    # This supervisor made every checkpoint of the store: its counters are the store's.
    assert final["journal_checkpoints_total"] == len(log) and final["journal_last_checkpoint_seq"] == log[0]["seq"]
    assert final["journal_uploaded_bytes_total"] == sum(e["bytes_uploaded"] for e in log)
    assert final["journal_uploaded_objects_total"] == sum(e["objects_uploaded"] for e in log)
    assert os.listdir(metrics.parent) == ["journal.prom"]


def test_failed_ticks_are_counted_in_the_metrics_file(box):
    b = box()
    db = b.local / "opencode-share" / "opencode.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not a database " * 200)
    metrics = b.root / "journal.prom"
    sup = b.supervise(b.writer_cmd("term-exit:0"), "--metrics-file", str(metrics))

    seen = wait_for(lambda: (m := read_metrics(metrics)).get("journal_tick_errors_total", 0) >= 2 and m, 60,
                    "two failed ticks in the metrics file")

    assert seen["journal_last_error_timestamp_seconds"] > 0
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    assert read_metrics(metrics)["journal_tick_errors_total"] == b.status()["failed_ticks"]


def test_shrunk_transcript_warning_reaches_journal_status(box):
    """A transcript that shrinks is checkpointed as a rewrite, and the warning naming it
    and both sizes is in ``journal status`` until the next tick replaces it."""
    b = box()
    interval = 3.0   # a tick's warnings stay in the status for one interval
    with HeldFile(b.codex / "sessions/2026/03/01/held.jsonl") as held:
        held.append(b"".join(b'{"n": %d, "pad": "%s"}\n' % (n, b"x" * 60) for n in range(1, 31)))
        sup = b.supervise(b.writer_cmd("term-exit:0"), interval=interval)
        b.wait_ready(sup)
        size = held.path.stat().st_size
        keep = held.path.read_bytes().index(b'{"n": 11,')
        held.truncate(keep)
        want = f"transcript {held.path} shrank from {size} to {keep} bytes"

        def reported():
            warnings = b.status_report()["status"]["warnings"]
            return [w for w in warnings if want in w]

        assert wait_for(reported, 30, "the shrink warning in `journal status`")
        sup.send_signal(signal.SIGTERM)
        assert finish(sup) == 0
    assert want in b.output()


def test_second_supervisor_on_the_same_state_dir_is_refused_and_the_first_runs_on(box):
    b = box()
    sup = b.supervise(b.writer_cmd("term-exit:0"))
    b.wait_ready(sup)
    marker = b.root / "second-ran"
    second = b.supervise([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], tag="second")
    rc = finish(second)
    assert rc == 1, b.output("second")
    err = b.output("second").strip().splitlines()
    assert len(err) == 1 and "another supervisor runs on this state directory" in err[0], err
    assert "supervise.lock" in err[0] and "JOURNAL_STATE_DIR" in err[0]
    assert not marker.exists()                    # its CMD never started
    assert sup.poll() is None and b.status_report()["pid"] == sup.pid   # the first one's status is untouched
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0


def test_status_after_kill_9_is_not_running(box):
    b = box()
    sup = b.supervise(b.writer_cmd("term-exit:0"))
    b.wait_ready(sup)
    child = b.child_pid()
    os.kill(sup.pid, signal.SIGKILL)
    os.kill(child, signal.SIGKILL)
    finish(sup)
    rep = b.status_report()
    assert rep["running"] is False and rep["pid"] is None
    assert rep["status"]["stopped"] is None       # it never got to record a stop


def test_failing_checkpoint_is_recorded_and_does_not_touch_cmd(box):
    b = box()
    db = b.local / "opencode-share" / "opencode.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not a database " * 200)
    sup = b.supervise(b.writer_cmd("term-exit:9"))
    wait_for(lambda: b.status().get("failed_ticks", 0) >= 3, 60, "three failed ticks")
    child = b.child_pid()
    state = proc_stat(child)
    assert state is not None and state[0] != "Z", "CMD died after failing checkpoints"
    assert sup.poll() is None

    rep = b.status_report()
    assert rep["running"] is True
    st = rep["status"]
    assert st["last_error"] and "opencode.db" in st["last_error"], st
    assert st["last_error_time"] is not None and st["failed_ticks"] >= 3
    assert "last error: " in (text := b.run("status", expect=0).stdout) and "opencode.db" in text
    # The healthy tree is still committed on every tick despite the failure.
    assert len(manifest_seqs(b.store_path)) >= 2

    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 9, b.output()
    assert (b.run_dir / "child-got-signal").exists()
    assert restored_session(restore_to(box)) == b.session.read_bytes()


# ---------------------------------------------------------------- 8. second SIGTERM


@pytest.mark.parametrize("when", ["immediately", "during-final-checkpoint"])
def test_second_sigterm_does_not_cut_the_final_checkpoint(box, when):
    b = box()
    sup = b.supervise(b.writer_cmd("term-big:5"), "--grace", "10")
    b.wait_ready(sup)
    child = b.child_pid()
    sup.send_signal(signal.SIGTERM)
    if when == "immediately":  # the first one was forwarded; the child is still writing
        wait_for(lambda: (b.run_dir / "child-got-signal").exists(), 60, "the child to get the first SIGTERM")
    else:
        # The child writes 24 MiB, then exits; once supervise has reaped it, the only
        # checkpoint that can hold the state lock is the final one.
        lock = b.state_dir / "lock"
        wait_for(lambda: proc_stat(child) is None and sup.pid in flock_holders(lock), 60,
                 "the final checkpoint to start", step=0.002)
    assert sup.poll() is None, "supervise already finished; the second signal would test nothing"
    sup.send_signal(signal.SIGTERM)
    sup.send_signal(signal.SIGINT)
    rc = finish(sup, 60)
    assert rc == 5, b.output()
    assert (b.run_dir / "child-big-written").exists()

    assert_store_clean(b)
    dest = restore_to(box)
    assert restored_session(dest) == b.session.read_bytes()
    big = b.local / "codex-home" / "big.bin"
    assert hashlib.sha256((dest / "codex" / "big.bin").read_bytes()).digest() == \
        hashlib.sha256(big.read_bytes()).digest()
    st = b.status()
    assert st["last_error"] is None and st["last"]["seq"] == manifest_seqs(b.store_path)[-1]


def test_unreadable_directory_is_recorded_in_status_and_every_line_is_kept(box):
    """CMD makes a directory journal cannot read (mode 000, journal running as an
    unprivileged user): every checkpoint names it in status.json and goes on, and the
    final checkpoint keeps every line CMD wrote, and the directory's last checkpoint."""
    b = box()
    secret = b.codex / "secret"
    secret.mkdir(parents=True)
    (secret / "note.md").write_text("private\n")
    b.run("checkpoint", expect=0)
    hide = f"import os, subprocess, sys; os.chmod({str(secret)!r}, 0); sys.exit(subprocess.call(sys.argv[1:]))"
    cmd = [sys.executable, "-c", hide, *b.writer_cmd("count:40:3", period=0.01)]
    try:
        rc = finish(b.supervise(cmd, interval=60, preexec_fn=drop_dac_override))
    finally:
        secret.chmod(0o755)

    assert rc == 3, b.output()
    st = b.status()
    assert st["last_error"] is None and st["failed_ticks"] == 0, st
    assert any(f"cannot read {secret} (Permission denied)" in w for w in st["warnings"]), (st, b.output())
    assert manifest_seqs(b.store_path) == [1, 2]
    assert len(parse_lines(b.session.read_bytes())) == 40
    restored = restore_to(box)
    assert restored_session(restored) == b.session.read_bytes()
    assert (restored / "codex" / "secret" / "note.md").read_text() == "private\n"

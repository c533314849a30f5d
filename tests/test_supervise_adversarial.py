"""Adversarial tests of ``journal supervise`` / ``journal status`` (real processes, real signals).

Every test runs the real CLI as a subprocess against a local store, with a real CMD
(a small Python writer appending JSON lines to ``codex-home/sessions/...``); faults are
real too (a pty, a full tmpfs and a read-only remount in a private mount namespace,
a PID namespace, a file in place of a store directory). No mocks.

Eight of these tests came from a review that found each one failing; they now guard
the fixes (design section 15):

1. test_cmd_on_a_terminal_can_read_it -- when supervise is the foreground of a
   terminal it hands the terminal to CMD's process group (SIGTTOU ignored while it
   does) and takes it back before exiting; an interactive CMD is never stopped by
   SIGTTIN.
2. test_local_disk_full_is_a_failed_tick_not_a_dead_supervisor -- any exception in
   a timer checkpoint (ENOSPC from the local spool included) is a failed tick,
   recorded in status.json and retried; CMD is never touched by it.
3. test_sigterm_during_a_long_tick_checkpoint_reaches_cmd_at_once -- a stop signal
   is forwarded to CMD's group from the signal handler, so the --grace clock starts
   at once, not after the running tick.
4. test_grace_expired_final_checkpoint_holds_every_line_cmd_left -- when --grace
   runs out the group is SIGKILLed and reaped *before* the final checkpoint, so the
   final checkpoint holds every complete line CMD wrote.
5. test_cmds_process_group_does_not_outlive_supervise -- on a stop supervise waits
   out the grace for the whole process group, then SIGKILLs what is left of it,
   before the final checkpoint; no helper keeps writing after supervise exits.
6. test_sigterm_during_startup_restore_is_recorded_as_a_stop -- a signal during the
   startup restore is recorded in status.json ("stopped by signal N before CMD
   started").
7. test_status_after_kill_9_of_a_pid_1_supervisor_is_not_running -- "running" is a
   probe of the supervisor's lifetime flock (``<state_dir>/supervise.lock``), not a
   pid check, so a dead PID-1 supervisor (or a reused pid) is never reported as
   running, and a second supervisor on the same state dir is refused.
8. test_store_temp_dir_unusable_then_back_leaves_no_manifest_naming_missing_packs --
   the local store reports ``KeyExists`` only when the key exists; a pending manifest
   whose packs are missing is dropped and the checkpoint uploads everything again
   under the same sequence number, so no manifest ever names a missing pack.

The other tests guard behaviour that held from the start: a read-only store
(remount) is recorded and recovered from, an unstartable CMD exits 127 with one line,
SIGINT is forwarded, a line torn at exit is never stored, a 0.05 s interval with a
slow checkpoint neither overlaps nor commits idle manifests, a restart after kill -9
keeps local lines and replaces the stale status, and a corrupt pack at start keeps
CMD from starting and names the file.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import wait_for
from supervisebox import (INTERVAL, JOURNAL, SESSION, alive, assert_not_torn, boxes, children_of, cmd_children,
                          complete_lines, finish, flock_holders, kill_if_alive, manifest_seqs, parse_lines, proc_stat,
                          restore_to, restored_session, verify_clean)

# The supervised agent. It appends {"n", "t", "pad"} JSON lines to the transcript, each
# written with two os.write calls (so a torn last line is observable), holding the file
# open. Every pid it starts is appended to <rundir>/pids (the fixture kills them).
#   term-exit     on SIGTERM: finish the current line, copy the transcript to <rundir>, exit 0
#   term-torn     on SIGTERM: write half a line (no newline), copy the transcript, exit 0
#   term-ignore   SIGTERM is ignored
#   sigint        default Python SIGINT behaviour (KeyboardInterrupt); SIGTERM as term-exit
#   spawner       start a grandchild writer (term-ignore) in the same process group, then
#                 exit 0 at once on SIGTERM
# Triggers (files in <rundir>): "fill" -> write <local>/fill until ENOSPC ("filled"), then
# create one empty file per line (the tree keeps changing); "unfill" -> delete the
# fill ("unfilled"). Transcript write errors are tolerated.
WRITER = r'''
import json, os, signal, subprocess, sys, time

path, period, mode, rundir = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
local = os.environ.get("AM_LOCAL", "")
stop = False

def mark(name, text=""):
    with open(os.path.join(rundir, name), "a") as fh:
        fh.write(text)

def on_term(signum, frame):
    global stop
    stop = True
    mark("got-signal", f"{signum} {time.time()!r}\n")

mark("pids", f"{os.getpid()}\n")
if mode == "spawner":
    child = subprocess.Popen([sys.executable, sys.argv[0], path, str(period), "term-ignore", rundir])
    mark("grandchild-pid", str(child.pid))
    signal.signal(signal.SIGTERM, lambda s, f: (mark("got-signal", f"{s} {time.time()!r}\n"), os._exit(0)))
    while True:
        time.sleep(1)
if mode in ("term-exit", "term-torn", "sigint"):
    signal.signal(signal.SIGTERM, on_term)
elif mode == "term-ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(os.path.join(rundir, "child-pid"), "w") as fh:
    fh.write(str(os.getpid()))
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

def put(data):
    try:
        os.write(fd, data)
    except OSError:
        pass

n = 0
filled = unfilled = False
try:
    while not stop:
        n += 1
        line = json.dumps({"n": n, "t": time.time(), "pad": "x" * (40 + n % 60)}).encode()
        half = len(line) // 2
        put(line[:half])
        time.sleep(0.002)
        put(line[half:] + b"\n")
        if n == 3:
            open(os.path.join(rundir, "child-ready"), "w").close()
        if not filled and os.path.exists(os.path.join(rundir, "fill")):
            filled = True
            try:
                with open(os.path.join(local, "fill"), "wb") as out:
                    while True:
                        out.write(b"\0" * 65536)
                        out.flush()
            except OSError:
                pass
            mark("filled")
        if filled and not unfilled:
            try:  # a new empty file needs no data blocks: the tree changes even on a full disk
                open(os.path.join(os.path.dirname(path), f"empty-{n}"), "w").close()
            except OSError:
                pass
        if filled and not unfilled and os.path.exists(os.path.join(rundir, "unfill")):
            unfilled = True
            os.unlink(os.path.join(local, "fill"))
            mark("unfilled")
        time.sleep(period)
except KeyboardInterrupt:
    mark("got-signal", f"{int(signal.SIGINT)} {time.time()!r}\n")
    raise
finally:
    if mode == "term-torn" and stop:
        put(b'{"n": "torn')
    with open(path, "rb") as src, open(os.path.join(rundir, "final-transcript"), "wb") as dst:
        dst.write(src.read())
'''


# ---------------------------------------------------------------- helpers


@pytest.fixture
def box(tmp_path):
    yield from boxes(tmp_path, WRITER)


@pytest.fixture
def shm():
    """A scratch directory on tmpfs (big trees checkpoint fast there)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="journal-review-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _can(cmd: list[str]) -> bool:
    if shutil.which(cmd[0]) is None:
        return False
    try:
        return subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _mount_ns_ok() -> bool:
    probe = tempfile.mkdtemp()
    try:
        return _can(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {probe} && "
                                                  f"mount -o remount,ro,bind {probe}"])
    finally:
        os.rmdir(probe)


needs_mount_ns = pytest.mark.skipif(not _mount_ns_ok(), reason="needs unshare -m and mount (CAP_SYS_ADMIN)")


def _pty_supervise(b, cmd: list[str], *opts: str) -> tuple[int, int]:
    """supervise on a fresh session whose controlling terminal is a pty; (pid, master)."""
    args = JOURNAL + ["supervise", "--interval", "5", *opts, "--", *cmd]
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.chdir(b.root)
            os.execve(args[0], args, b.env)
        finally:
            os._exit(127)
    return pid, master


def _read_until(master: int, out: bytearray, want: bytes, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while want not in out and time.monotonic() < deadline:
        if select.select([master], [], [], 0.05)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return False
            if not chunk:
                return False
            out += chunk
    return want in out


def _kill_pty_session(pid: int, master: int) -> None:
    """Kill the pty's session leader and its descendants (two levels), reap, close."""
    for p, _, _ in children_of(pid):
        for q, _, _ in children_of(p):
            kill_if_alive(q, signal.SIGKILL)
        kill_if_alive(p, signal.SIGKILL)
    kill_if_alive(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    os.close(master)


# ---------------------------------------------------------------- 1. an interactive CMD on a terminal


def test_cmd_on_a_terminal_can_read_it(box):
    """``docker run -it`` / a shell: supervise's stdio is a terminal and CMD (an agent
    TUI, a REPL) reads it. CMD must not be stopped by SIGTTIN for reading its own
    terminal, and the supervisor must notice if it is."""
    b = box()
    b.codex.mkdir()
    probe = ("import sys; print('ready', flush=True); "
             "print('got', sys.stdin.readline().strip(), flush=True)")
    pid, master = _pty_supervise(b, [sys.executable, "-c", probe], "--grace", "0.3")
    out = bytearray()
    try:
        assert _read_until(master, out, b"ready", 60), bytes(out)
        os.write(master, b"hello\n")            # the terminal holds it until CMD reads
        got = _read_until(master, out, b"got hello", 60)
        cmd_pids = [p for p, _, _ in cmd_children(pid)]
        states = {p: proc_stat(p) for p in cmd_pids}
        assert got, (
            f"CMD never read its terminal; it is {[(p, s[0]) for p, s in states.items() if s]} "
            f"(T = stopped by SIGTTIN: CMD runs in a background process group of the terminal); output {out!r}")
    finally:
        _kill_pty_session(pid, master)


# ---------------------------------------------------------------- 2. local disk full


@needs_mount_ns
def test_local_disk_full_is_a_failed_tick_not_a_dead_supervisor(box):
    """$AM_LOCAL (and the state dir's spool) on a small filesystem that fills up: the
    tick fails, is recorded, CMD keeps running, and checkpoints resume once space is
    back (docs/design.md section 15 step 4: a failing checkpoint never touches CMD)."""
    b = box()
    cmd = b.writer_cmd("term-exit", period=0.02)
    shutil.rmtree(b.codex)  # recreated inside the tmpfs
    script = (f'mount -t tmpfs -o size=6m tmpfs "$AM_LOCAL" && mkdir -p "$(dirname {b.session})" '
              f'&& exec "$@"')
    sup = b.supervise(cmd, prefix=["unshare", "-m", "sh", "-c", script, "sh"])
    # Supervise execs in place, so sup.pid is it; its view of $AM_LOCAL is the tmpfs.
    status_file = Path(f"/proc/{sup.pid}/root") / str(b.status_file).lstrip("/")
    b.wait_ready(sup, checkpoints=1, status_file=status_file)
    (b.run_dir / "fill").touch()
    wait_for(lambda: (b.run_dir / "filled").exists(), 60, "the disk to fill")
    before = manifest_seqs(b.store_path)
    # A few ticks fail on the full disk (status.json cannot be replaced then: count the warnings).
    wait_for(lambda: sup.poll() is not None or b.output().count("checkpoint failed") >= 2, 60,
             "two ticks to fail on the full disk")
    child = b.child_pid()
    assert sup.poll() is None, (
        f"supervise died (exit {sup.returncode}) when the local disk filled; CMD (pid {child}, alive: "
        f"{alive(child)}) is left unsupervised and no final checkpoint will ever run:\n{b.output()}")
    assert alive(child)

    (b.run_dir / "unfill").touch()
    wait_for(lambda: (b.run_dir / "unfilled").exists(), 60, "the disk to be freed")
    wait_for(lambda: len(manifest_seqs(b.store_path)) > len(before), 60, "a checkpoint after the disk was freed")
    # status.json itself cannot be replaced while the disk is full; it is after the commit
    # above, once that tick's records are written: wait for it.
    st = wait_for(lambda: (got := b.status(status_file)).get("failed_ticks", 0) >= 1 and got, 60,
                  "the failed ticks in status.json")
    assert "space" in (st.get("last_error") or ""), st
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    final = (b.run_dir / "final-transcript").read_bytes()
    assert restored_session(restore_to(box)) == final


# ---------------------------------------------------------------- 3. SIGTERM while a tick checkpoint runs


def test_sigterm_during_a_long_tick_checkpoint_reaches_cmd_at_once(box, shm):
    """A stop request arriving while a timer checkpoint of a big tree runs must reach
    CMD at once: CMD's flush and --grace must not queue behind the checkpoint (the
    container runtime's stop timeout is running: docker's default is 10 s)."""
    b = box("box", shm)
    cmd = b.writer_cmd("term-exit")
    with open(b.codex / "big.bin", "wb") as fh:       # the first tick uploads 320 MB (~2-3 s)
        for _ in range(320):
            fh.write(os.urandom(1 << 20))
    sup = b.supervise(cmd, "--grace", "5", interval=0.5)
    wait_for(lambda: b.status().get("child_pid") and (b.run_dir / "child-ready").exists(), 60, "CMD to start")
    lock = b.state_dir / "lock"
    wait_for(lambda: sup.pid in flock_holders(lock), 60, "the first tick checkpoint to start", step=0.005)
    assert not manifest_seqs(b.store_path), "the tick finished already; nothing to test"
    sup.send_signal(signal.SIGTERM)
    got = wait_for(lambda: (b.run_dir / "got-signal").exists() and (b.run_dir / "got-signal").read_text(),
                   60, "CMD to get SIGTERM")
    assert finish(sup, 120) == 0, b.output()
    # The running tick committed manifest 1 (the final checkpoint, 2); CMD got the signal before that commit.
    committed = os.stat(b.store_path / "manifests" / f"{1:012d}").st_mtime
    assert float(got.split()[1]) < committed, ("CMD got SIGTERM only after the running tick checkpoint "
                                               "committed: the signal waited for it")


# ---------------------------------------------------------------- 4. --grace runs out


def test_grace_expired_final_checkpoint_holds_every_line_cmd_left(box):
    """CMD ignores SIGTERM; after --grace supervise kills it. Once supervise has exited,
    CMD is dead and its transcript can no longer change: the final checkpoint should
    hold every complete line of it (the checkpoint is "final" only if CMD is stopped
    first)."""
    b = box()
    sup = b.supervise(b.writer_cmd("term-ignore", period=0.003), "--grace", "0.5")
    b.wait_ready(sup)
    child = b.child_pid()
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 128 + signal.SIGKILL, b.output()   # it died of the SIGKILL, not of the SIGTERM
    assert not alive(child)
    live = complete_lines(b.session.read_bytes())
    restored = assert_not_torn(restored_session(restore_to(box)))
    written = parse_lines(live)
    assert len(restored) == len(written), (
        f"the final checkpoint ends at line {restored[-1]['n']}, but the killed CMD left {len(written)} complete "
        f"lines: {len(written) - len(restored)} lines written while the final checkpoint ran are lost")


# ---------------------------------------------------------------- 5. grandchildren


def test_cmds_process_group_does_not_outlive_supervise(box):
    """CMD starts a helper (same process group) that holds the transcript open and
    ignores SIGTERM; CMD itself exits at once on SIGTERM. After supervise exits, no
    process of CMD's group may still be writing the transcript behind the final
    checkpoint."""
    b = box()
    sup = b.supervise(b.writer_cmd("spawner", period=0.02), "--grace", "0.5")
    wait_for(lambda: (b.run_dir / "grandchild-pid").exists() and (b.run_dir / "child-ready").exists(), 60,
             "the grandchild writer to start")
    wait_for(lambda: manifest_seqs(b.store_path), 60, "a first checkpoint")
    grandchild = int((b.run_dir / "grandchild-pid").read_text())
    cmd_pid = b.status()["child_pid"]
    assert proc_stat(grandchild)[3] == cmd_pid, "the helper is not in CMD's process group"
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    wait_for(lambda: not alive(grandchild), 60,
             "the helper to die: a process of CMD's group survived supervise and still appends to the transcript "
             "(lines after the final checkpoint are never stored)")


# ---------------------------------------------------------------- 6. a stop signal during the startup restore


def test_sigterm_during_startup_restore_is_recorded_as_a_stop(box, shm):
    a = box("a", shm)
    a.session.parent.mkdir(parents=True)
    a.session.write_bytes(b'{"n": 1}\n')
    with open(a.codex / "big.bin", "wb") as fh:
        for _ in range(120):
            fh.write(os.urandom(1 << 20))
    a.run("checkpoint", expect=0)

    b = box("b", shm)
    marker = b.root / "cmd-ran"
    sup = b.supervise([sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"])
    wait_for(lambda: b.status().get("pid") == sup.pid, 60, "supervise to start its restore", step=0.005)
    sup.send_signal(signal.SIGTERM)
    rc = finish(sup)
    assert rc == 128 + signal.SIGTERM, b.output()
    assert not marker.exists(), "CMD started after a stop request"
    st = b.status()
    assert st.get("stopped") is not None, (
        f"a graceful stop during the restore left status.json looking like a crash (stopped is null): {st}")


# ---------------------------------------------------------------- 7. status after kill -9 of PID 1


def test_status_after_kill_9_of_a_pid_1_supervisor_is_not_running(box):
    """As a container's PID 1 supervise records pid 1. After it is killed, a reader in
    another PID namespace (a debug container on the same volume, the next container
    before its supervisor starts) sees *its own* pid 1 alive."""
    if not _can(["unshare", "--pid", "--fork", "--mount-proc", "true"]):
        pytest.skip("unshare --pid --fork --mount-proc is not available here")
    b = box()
    wrapper = b.supervise(b.writer_cmd("term-exit"), prefix=["unshare", "--pid", "--fork", "--mount-proc"])
    sup_pid = wait_for(lambda: [p for p, _, _ in children_of(wrapper.pid)], 60, "supervise to start")[0]
    b.wait_ready(wrapper)
    assert b.status()["pid"] == 1
    os.kill(sup_pid, signal.SIGKILL)          # the namespace (CMD with it) dies
    finish(wrapper)
    rep = b.status_report()
    assert rep["running"] is False, f"journal status says a killed supervisor is running: {rep}"


# ---------------------------------------------------------------- 8. the store goes away and comes back


@needs_mount_ns
def test_read_only_store_is_recorded_and_recovers(box):
    """The store's filesystem is remounted read-only mid-run (as after I/O errors), then
    read-write again: CMD keeps running, status records the error, checkpoints resume,
    and the store verifies clean."""
    b = box()
    b.store_path.mkdir()
    cmd = b.writer_cmd("term-exit", period=0.02)
    script = f'mount --bind {b.store_path} {b.store_path} && exec "$@"'
    sup = b.supervise(cmd, prefix=["unshare", "-m", "sh", "-c", script, "sh"])
    b.wait_ready(sup, checkpoints=2)
    ns = ["nsenter", "-t", str(sup.pid), "-m"]
    subprocess.run(ns + ["mount", "-o", "remount,ro,bind", str(b.store_path)], check=True)
    wait_for(lambda: b.status().get("failed_ticks", 0) >= 2, 60, "two failed ticks")
    seqs = manifest_seqs(b.store_path)
    st = b.status_report()
    assert st["running"] is True and alive(b.child_pid())
    assert "read-only" in (st["status"]["last_error"] or "").lower(), st
    subprocess.run(ns + ["mount", "-o", "remount,rw,bind", str(b.store_path)], check=True)
    wait_for(lambda: len(manifest_seqs(b.store_path)) > len(seqs), 60, "a checkpoint after the store came back")
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    assert restored_session(restore_to(box)) == b.session.read_bytes()
    verify_clean(b)


def test_store_temp_dir_unusable_then_back_leaves_no_manifest_naming_missing_packs(box):
    """The store's temp directory becomes unusable for a few ticks (here: a file stands
    where ``<store>/.tmp`` belongs), then is fixed. Every put failed meanwhile, so no
    manifest may name a pack that was never stored."""
    b = box()
    sup = b.supervise(b.writer_cmd("term-exit", period=0.02))
    b.wait_ready(sup, checkpoints=2)
    tmp = b.store_path / ".tmp"
    aside = b.root / "tmp-aside"
    if tmp.exists():
        tmp.rename(aside)
    else:
        aside.mkdir()
    tmp.write_text("not a directory")
    wait_for(lambda: b.status().get("failed_ticks", 0) >= 2, 60, "two failed ticks")
    err = b.status()["last_error"]
    tmp.unlink()
    aside.rename(tmp)
    seqs = manifest_seqs(b.store_path)
    wait_for(lambda: len(manifest_seqs(b.store_path)) > len(seqs) + 1, 60, "checkpoints after the store came back")
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    assert restored_session(restore_to(box)) == b.session.read_bytes()
    proc = b.run("verify", "--full")
    assert proc.returncode == 0, (f"after the outage (recorded error: {err!r}) the store holds a manifest "
                                  f"naming packs that were never written:\n{proc.stdout}{proc.stderr}")


# ---------------------------------------------------------------- 9. CMD cannot start; SIGINT; torn last line


@pytest.mark.parametrize("cmd", ["/nonexistent/agent", "/etc/hostname"], ids=["missing", "not-executable"])
def test_cmd_that_cannot_start_exits_127_with_one_line(box, cmd):
    b = box()
    b.codex.mkdir()
    rc = finish(b.supervise([cmd, "--port", "1"]))
    out = b.output()
    assert rc == 127, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and cmd in lines[0] and "Traceback" not in out, out
    rep = b.status_report()
    assert rep["running"] is False and cmd in rep["status"]["last_error"]


def test_sigint_is_forwarded_and_final_checkpoint_taken(box):
    b = box()
    sup = b.supervise(b.writer_cmd("sigint"), "--grace", "5")
    b.wait_ready(sup)
    child = b.child_pid()
    sup.send_signal(signal.SIGINT)
    rc = finish(sup)
    assert rc == 128 + signal.SIGINT, b.output()
    assert (b.run_dir / "got-signal").read_text().split()[0] == str(int(signal.SIGINT))
    assert not alive(child)
    live = b.session.read_bytes()
    assert restored_session(restore_to(box)) == complete_lines(live)


def test_line_torn_at_exit_is_not_stored_and_every_complete_line_is(box):
    b = box()
    sup = b.supervise(b.writer_cmd("term-torn", period=0.005), "--grace", "5")
    b.wait_ready(sup, checkpoints=2)
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    live = b.session.read_bytes()
    assert not live.endswith(b"\n")
    restored = restored_session(restore_to(box))
    assert restored == complete_lines(live)
    assert_not_torn(restored)


# ---------------------------------------------------------------- 10. interval edge cases


def test_tiny_interval_with_a_slow_checkpoint_neither_overlaps_nor_piles_up(box, shm):
    """--interval 0.05 while one checkpoint takes much longer (CMD writes 60 MB): ticks
    never overlap (one lock holder at a time, none skipped for our own tick), idle ticks
    commit nothing, and CMD is untouched."""
    b = box("box", shm)
    cmd = b.writer_cmd("term-exit", period=0.02)
    sup = b.supervise(cmd, interval=0.05)
    b.wait_ready(sup)
    lock = b.state_dir / "lock"
    before = len(manifest_seqs(b.store_path))
    with open(b.codex / "big.bin", "wb") as fh:
        for _ in range(60):
            fh.write(os.urandom(1 << 20))
    holders_seen = []

    def ticks_after_the_big_one() -> bool:   # the slow tick, then two more, watching the lock throughout
        holders_seen.append(flock_holders(lock))
        return len(manifest_seqs(b.store_path)) >= before + 3

    wait_for(ticks_after_the_big_one, 120, "the slow checkpoint and two ticks after it", step=0.005)
    assert all(len(h) <= 1 for h in holders_seen)
    st = b.status()
    assert st["skipped_ticks"] == 0 and st["failed_ticks"] == 0, st
    assert sup.poll() is None and alive(b.child_pid())

    def last_success() -> float:
        return b.status().get("last_success") or 0.0

    # CMD stops writing: idle ticks commit nothing more.
    os.kill(b.child_pid(), signal.SIGSTOP)
    try:
        wait_for(lambda: (b.status().get("last") or {}).get("idle"), 60, "an idle tick")
        settled = manifest_seqs(b.store_path)
        for _ in range(3):
            seen = last_success()
            wait_for(lambda: last_success() > seen, 60, "another idle tick")
        assert manifest_seqs(b.store_path) == settled, "idle ticks committed manifests"
        assert b.status()["last"]["idle"] is True
    finally:
        os.kill(b.child_pid(), signal.SIGCONT)
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    assert restored_session(restore_to(box, base=shm)) == b.session.read_bytes()


# ---------------------------------------------------------------- 11. restart after kill -9


def test_restart_after_kill_9_keeps_local_lines_and_replaces_stale_status(box):
    b = box()
    sup = b.supervise(b.writer_cmd("term-exit", period=0.01))
    b.wait_ready(sup, checkpoints=2)
    wait_for(lambda: len(parse_lines(complete_lines(b.session.read_bytes()))) > 30, 60, "lines")
    child = b.child_pid()
    os.kill(sup.pid, signal.SIGKILL)
    os.kill(child, signal.SIGKILL)
    finish(sup)
    wait_for(lambda: not alive(child), 60, "the child to die")
    # Lines written since the last checkpoint are only on local disk; the torn tail too.
    data = b.session.read_bytes()
    b.session.write_bytes(complete_lines(data))     # the agent repairs its torn tail on start
    before = complete_lines(data)
    (b.run_dir / "child-ready").unlink()
    sup2 = b.supervise(b.writer_cmd("term-exit", period=0.01), tag="second")
    st = b.wait_ready(sup2)
    assert st["pid"] == sup2.pid and st["stopped"] is None
    assert b.session.read_bytes().startswith(before), "the startup restore rolled back local lines"
    rep = b.status_report()
    assert rep["running"] is True and rep["pid"] == sup2.pid
    sup2.send_signal(signal.SIGTERM)
    assert finish(sup2) == 0, b.output("second")
    restored = restored_session(restore_to(box))
    assert restored == b.session.read_bytes()
    assert restored.startswith(before)


# ---------------------------------------------------------------- 12. a corrupt pack at start


def test_corrupt_pack_at_start_never_starts_cmd_and_names_the_file(box):
    from journal.repository.history import ManifestCache
    from journal.format.objects import HEADER
    from journal.repository.repository import pack_key
    from journal.repository.repository import Repository
    from journal.store import open_store

    a = box("a")
    a.session.parent.mkdir(parents=True)
    a.session.write_bytes(b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, os.urandom(60).hex().encode())
                                   for i in range(200)))
    a.run("checkpoint", expect=0)
    # Flip one byte inside the compressed payload of the transcript's blob.
    repo = Repository.open(open_store(str(a.store_path)))
    entries, _ = ManifestCache(repo).tree(repo.manifest_seqs()[-1], "codex")
    ref = next(e for e in entries if e.path == SESSION).refs[0]
    pack = a.store_path / pack_key(ref.pack)
    data = bytearray(pack.read_bytes())
    data[ref.offset + HEADER.size + (ref.length - HEADER.size) // 2] ^= 0xFF
    pack.write_bytes(bytes(data))

    b = box("b")
    marker = b.root / "cmd-ran"
    rc = finish(b.supervise([sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]))
    out = b.output()
    assert rc != 0 and not marker.exists(), out
    assert "Traceback" not in out, out
    assert "not starting" in out and SESSION in out, out
    st = b.status()
    assert st["child_pid"] is None and st["last_error"].startswith("restore:") and SESSION in st["last_error"], st
    assert b.status_report()["running"] is False


# ---------------------------------------------------------------- 13. found by a second review


def test_ctrl_z_on_cmds_terminal_never_strands_it_and_a_stop_stays_graceful(box):
    """Ctrl-Z on the terminal CMD holds stops CMD's group. With no shell to resume the
    job (an orphaned process group, as here, or PID 1 of a container) supervise resumes
    CMD; a stop signal then reaches CMD's handler (it is forwarded with SIGCONT)."""
    b = box()
    b.codex.mkdir()
    marker = b.root / "graceful"
    probe = ("import signal, sys, time\n"
             f"signal.signal(signal.SIGTERM, lambda *a: (open({str(marker)!r}, 'w').close(), sys.exit(0)))\n"
             "signal.signal(signal.SIGCONT, lambda *a: print('continued', flush=True))\n"
             "print('ready', flush=True)\n"
             "while True: time.sleep(0.05)\n")
    pid, master = _pty_supervise(b, [sys.executable, "-c", probe], "--grace", "3")
    out = bytearray()
    try:
        assert _read_until(master, out, b"ready", 60), bytes(out)
        cmd_pid = wait_for(lambda: [p for p, _, _ in cmd_children(pid)], 60, "CMD")[0]
        del out[:]
        os.write(master, b"\x1a")                  # Ctrl-Z
        assert _read_until(master, out, b"continued", 60), f"CMD was never resumed after Ctrl-Z: {bytes(out)!r}"
        wait_for(lambda: (proc_stat(cmd_pid) or ("",))[0] != "T", 60, "CMD to be resumed after Ctrl-Z")
        assert (proc_stat(pid) or ("",))[0] != "T"
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, bytes(out)
        assert marker.exists(), "CMD's SIGTERM handler never ran"
    finally:
        _kill_pty_session(pid, master)


def test_a_stopped_cmd_gets_the_stop_signal(box):
    """CMD stopped by SIGSTOP (a debugger, a freezer): the forwarded SIGTERM comes with
    a SIGCONT, so CMD exits through its handler within the grace, not by SIGKILL."""
    b = box()
    sup = b.supervise(b.writer_cmd("term-exit"), "--grace", "3")
    b.wait_ready(sup)
    child = b.child_pid()
    os.kill(child, signal.SIGSTOP)
    wait_for(lambda: (proc_stat(child) or ("",))[0] == "T", 60, "CMD to stop")
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    assert (b.run_dir / "got-signal").exists(), "CMD never handled the SIGTERM"
    assert restored_session(restore_to(box)) == complete_lines((b.run_dir / "final-transcript").read_bytes())


@pytest.mark.long(short=8, full=30)
def test_status_probes_never_make_a_supervisor_refuse_to_start(box, long_size):
    """`journal status` (a health check in a loop) probes supervise.lock; a supervisor
    starting at that instant must not take the probe for another supervisor (30
    starts; 8 in a plain run)."""
    b = box()
    b.codex.mkdir()
    assert finish(b.supervise(["true"], tag="first")) == 0   # the lock file exists from now on
    probes = [subprocess.Popen([sys.executable, "-c",
                                "import sys\nfrom journal.local.state import lock_held\n"
                                "while True: lock_held(sys.argv[1], 'supervise.lock')\n", str(b.state_dir)])
              for _ in range(2)]
    try:
        refused = []
        for i in range(long_size):
            rc = finish(b.supervise(["true"], tag=f"run{i}"))
            if rc != 0:
                refused.append((i, rc, b.output(f"run{i}")))
        assert not refused, refused
    finally:
        for probe in probes:
            probe.kill()
            probe.wait()


def test_a_closed_stderr_and_a_failing_tick_never_kill_supervise(box):
    """`journal supervise ... 2>&1 | tee log`, and tee dies: the next failed tick's
    warning hits a closed pipe. supervise records the tick and keeps CMD supervised."""
    b = box()
    read, write = os.pipe()
    sup = subprocess.Popen(JOURNAL + ["supervise", "--interval", str(INTERVAL), "--", *b.writer_cmd("term-exit")],
                           env=b.env, cwd=b.root, stdout=write, stderr=write, start_new_session=True)
    os.close(write)
    b.procs.append(sup)
    try:
        b.wait_ready(sup)
    finally:
        os.close(read)                             # the log reader dies
    tmp = b.store_path / ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.write_text("not a directory")              # every tick fails from now on
    wait_for(lambda: b.status().get("failed_ticks", 0) >= 2, 60, "failed ticks to be recorded")
    assert sup.poll() is None, "supervise died"
    assert alive(b.child_pid())
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0
    assert not alive(b.child_pid())
    assert b.status()["stopped"] is not None


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ctrl_z_in_a_job_control_shell_stops_the_job_and_fg_gives_cmd_its_terminal_back(box):
    """In an interactive shell, Ctrl-Z stops the whole job (supervise stops with CMD),
    the shell gets its prompt back, and `fg` resumes CMD holding the terminal again."""
    b = box()
    b.codex.mkdir()
    probe = ("import sys\n"
             "print('ready', flush=True)\n"
             "for line in sys.stdin:\n"
             "    print('got', line.strip(), flush=True)\n")
    script = b.root / "cmd.py"
    script.write_text(probe)
    line = " ".join(JOURNAL + ["supervise", "--interval", "5", "--", sys.executable, str(script)])
    env = dict(b.env, PS1="PROMPT> ", TERM="dumb")
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.chdir(b.root)
            os.execve(shutil.which("bash"), ["bash", "--norc", "--noprofile", "-i"], env)
        finally:
            os._exit(127)
    out = bytearray()
    try:
        assert _read_until(master, out, b"PROMPT> ", 60), bytes(out)
        os.write(master, line.encode() + b"\n")
        assert _read_until(master, out, b"ready", 60), bytes(out)
        sup = wait_for(lambda: [p for p, _, c in children_of(pid) if c.startswith("python")], 60, "supervise")[0]
        cmd = wait_for(lambda: [p for p, _, _ in cmd_children(sup)], 60, "CMD")[0]
        del out[:]
        os.write(master, b"\x1a")                  # Ctrl-Z
        assert _read_until(master, out, b"PROMPT> ", 60), f"the shell never got its prompt back: {bytes(out)!r}"
        wait_for(lambda: (proc_stat(sup) or ("",))[0] == "T" and (proc_stat(cmd) or ("",))[0] == "T", 60,
                 "supervise and CMD both stopped")
        del out[:]
        os.write(master, b"fg\n")
        # bash names the job it resumes, and reads nothing more until the job stops or ends
        assert _read_until(master, out, b"--interval 5", 60), f"fg did not resume the job: {bytes(out)!r}"
        os.write(master, b"hello\n")
        assert _read_until(master, out, b"got hello", 60), f"CMD did not get its terminal back: {bytes(out)!r}"
        os.kill(sup, signal.SIGTERM)
        wait_for(lambda: proc_stat(sup) is None or proc_stat(sup)[0] == "Z", 60, "supervise to exit")
    finally:
        _kill_pty_session(pid, master)


def test_a_raw_mode_cmd_killed_at_the_grace_deadline_leaves_the_terminal_as_it_was(box):
    """A TUI puts its terminal in raw mode and ignores SIGTERM; supervise SIGKILLs it
    when --grace runs out. The terminal's modes must be put back (echo, line editing),
    as a shell does after a job dies of a signal."""
    import termios
    b = box()
    b.codex.mkdir()
    probe = ("import signal, sys, time, tty\n"
             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
             "tty.setraw(0)\n"
             "print('now-in-raw-mode', flush=True)\n"   # a word supervise's own log never says
             "while True: time.sleep(0.05)\n")
    pid, master = _pty_supervise(b, [sys.executable, "-c", probe], "--grace", "0.3")
    out = bytearray()
    slave = None
    try:
        assert _read_until(master, out, b"now-in-raw-mode", 60), bytes(out)
        slave = os.open(os.readlink(f"/proc/{pid}/fd/0"), os.O_RDWR | os.O_NOCTTY)
        lflag = termios.tcgetattr(slave)[3]
        assert not lflag & termios.ECHO and not lflag & termios.ICANON   # CMD made it raw
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGKILL   # killed at the grace deadline
        lflag = termios.tcgetattr(slave)[3]
        assert lflag & termios.ECHO and lflag & termios.ICANON, "the terminal was left in raw mode"
    finally:
        if slave is not None:
            os.close(slave)
        _kill_pty_session(pid, master)

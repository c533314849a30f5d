"""``journal supervise`` as a container runs it: a store that must be named, a log that
says what happens, ``journal status`` judged live after a SIGKILL, an input server
started again at once, and the exit status of a CMD killed after the grace.

Real processes and signals (the CLI as a subprocess, ``tests/supervisebox.py``);
tests wait for events (a status change, a line, a socket), never for a stretch of time.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import socket
import sys

import pytest

from conftest import one_line_error, run_journal, wait_for
from supervisebox import boxes, children_of, finish, is_input_server, manifest_seqs

# The supervised agent: appends a JSON line to the transcript every PERIOD seconds and
# exits 0 on SIGTERM; writes its pid to RUNDIR/child-pid, touches RUNDIR/child-ready
# after its third line. ``writer.py SESSION PERIOD MODE RUNDIR`` (MODE is unused).
WRITER = r'''
import json, os, signal, sys, time

path, period, rundir = sys.argv[1], float(sys.argv[2]), sys.argv[4]
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
with open(os.path.join(rundir, "child-pid"), "w") as fh:
    fh.write(str(os.getpid()))
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "a") as fh:
    n = 0
    while True:
        n += 1
        fh.write(json.dumps({"n": n}) + "\n")
        fh.flush()
        if n == 3:
            open(os.path.join(rundir, "child-ready"), "w").close()
        time.sleep(period)
'''


@pytest.fixture
def box(tmp_path):
    yield from boxes(tmp_path, WRITER)


def stderr_lines(b) -> list[str]:
    return [line for line in (b.root / "supervise.err").read_text().splitlines() if line.strip()]


def without_store(b) -> dict[str, str]:
    """The box's environment with no store named (``HOME`` is the box's own)."""
    return {k: v for k, v in b.env.items() if k not in ("JOURNAL_STORE", "XDG_DATA_HOME")}


# ---------------------------------------------------------------- no durable store named


def test_supervise_refuses_the_implicit_default_store_and_says_how_to_name_one(box):
    b = box()
    b.codex.mkdir()
    marker = b.root / "cmd-ran"
    default = b.home / ".local" / "share" / "journal" / "store"

    proc = run_journal("supervise", "--interval", "0.2", "--", sys.executable, "-c",
                       f"open({str(marker)!r}, 'w').close()", env=without_store(b))

    line = one_line_error(proc)
    assert proc.returncode == 2, proc.stderr
    assert str(default) in line and all(way in line for way in ("--store", "JOURNAL_STORE", "config")), line
    assert not marker.exists() and not default.exists()


def test_each_command_that_writes_to_the_default_store_says_so_in_one_line(box):
    b = box()
    b.session.parent.mkdir(parents=True)
    b.session.write_text('{"n": 1}\n')
    env = without_store(b)

    def warned(*args: str, stdin: str | None = None) -> list[str]:
        proc = run_journal(*args, env=env, stdin=stdin)
        assert proc.returncode == 0, proc.stderr
        return [line for line in proc.stderr.splitlines() if "default store" in line]

    for args in (("init",), ("checkpoint",), ("input", "append", "--harness", "codex", "--session", "S", "-"),
                 ("gc", "--keep-last", "1")):
        lines = warned(*args, stdin="hello" if args[0] == "input" else None)
        assert len(lines) == 1 and lines[0].startswith("warning: ") and "JOURNAL_STORE" in lines[0], (args, lines)
    assert warned("log") == [] and warned("verify") == []   # reading writes nothing
    named = box("named")
    named.codex.mkdir()
    assert "default store" not in named.run("init", expect=0).stderr + named.run("checkpoint", expect=0).stderr


# ---------------------------------------------------------------- what supervise says


def test_supervise_logs_its_start_each_error_each_recovery_and_its_final_checkpoint(box):
    b = box()
    b.session.parent.mkdir(parents=True)
    b.session.write_text('{"n": 0}\n')
    b.run("checkpoint", expect=0)                  # checkpoint 1: the startup restore brings it back
    sup = b.supervise(b.writer_cmd("run"), interval=0.2)
    b.wait_ready(sup, checkpoints=2)
    aside = b.store_path.with_name("store-aside")
    os.rename(b.store_path, aside)                 # the bucket is unmounted for a while
    wait_for(lambda: b.status().get("failed_ticks", 0) >= 2, 60, "two failed ticks")
    os.rename(aside, b.store_path)
    wait_for(lambda: any("recovered" in line for line in stderr_lines(b)), 60, "the recovery line")
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()

    lines = stderr_lines(b)
    start, *middle, final = lines
    assert start.startswith(f"supervise: started {sys.executable} (pid ") and f"store {b.store_path};" in start
    assert "restored checkpoint 1 into codex in " in start, start
    errors = [line for line in middle if line.startswith("error: supervise: checkpoint failed: ")]
    recovered = [line for line in middle if line.startswith("supervise: recovered: checkpoints work again")]
    assert len(errors) == b.status()["failed_ticks"] and len(recovered) == 1, lines
    assert str(b.store_path) in errors[0] and f"after {len(errors)} failures in a row" in recovered[0]
    assert middle == errors + recovered, "nothing else at the default verbosity (no line per checkpoint)"
    assert final.startswith("supervise: final checkpoint") and final.endswith("stopped by SIGTERM, CMD exited 0; "
                                                                               "exit 0"), final


def test_verbose_json_log_is_one_object_per_line_with_a_line_per_committed_checkpoint(box):
    b = box()
    sup = b.supervise(b.writer_cmd("run"), "-v", "--log-format", "json", interval=0.2)
    b.wait_ready(sup, checkpoints=3)
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()

    events = [json.loads(line) for line in stderr_lines(b)]
    assert all(set(e) == {"time", "level", "event", "message", "fields"} for e in events), events
    assert all(_dt.datetime.fromisoformat(e["time"]).tzinfo is not None for e in events)
    names = [e["event"] for e in events]
    assert names[0] == "start" and names[-1] == "final" and set(names[1:-1]) == {"checkpoint"}, names
    start, final = events[0], events[-1]
    assert start["level"] == "info" and start["fields"]["store"] == str(b.store_path)
    assert start["fields"]["restore"]["seq"] is None and "fresh start" in start["message"]
    final_committed = final["fields"]["checkpoint"]["seq"] is not None
    assert len(names) - 2 + final_committed == b.status()["checkpoints"], names
    assert [e["fields"]["checkpoint"]["seq"] for e in events[1:-1]] == list(range(1, len(names) - 1))
    assert all(e["level"] == "debug" and e["message"].startswith(f"supervise: checkpoint {e['fields']['checkpoint']['seq']}: ")
               for e in events[1:-1])
    assert final["fields"]["exit"] == 0 and final["fields"]["signal"] == signal.SIGTERM


def test_quiet_log_says_errors_only(box):
    b = box()
    b.codex.mkdir()
    assert finish(b.supervise(["true"], "-q", tag="clean")) == 0
    assert (b.root / "clean.err").read_text() == ""
    assert finish(b.supervise(["/nonexistent/agent"], "-q", tag="broken")) == 127
    lines = (b.root / "broken.err").read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: supervise: cannot start /nonexistent/agent: "), lines


# ---------------------------------------------------------------- status after kill -9


def test_status_after_the_supervisor_is_killed_with_sigkill_says_what_is_stale(box):
    b = box()
    sup = b.supervise(b.writer_cmd("run"), interval=0.2)
    b.wait_ready(sup)
    wait_for(lambda: b.status().get("input_socket") and b.status().get("input_error", 1) is None, 60,
             "the input socket to be served")
    os.kill(sup.pid, signal.SIGKILL)
    finish(sup)
    wait_for(lambda: not os.path.lexists(b.input_socket), 60, "the input server to follow its supervisor")

    text = b.run("status", expect=0).stdout
    assert "(served)" not in text and "supervisor: NOT RUNNING" in text, text
    assert f"input socket: {b.input_socket} NOT SERVED: " in text and "the socket file is gone" in text, text
    report = b.status_report()["supervisor"]
    assert report["state"] == "died" and report["pid"] is None and report["input_served"] is False, report
    stale = " | ".join(report["stale"])
    assert f"pid {sup.pid}: not running" in stale and "supervise.lock: held by no process" in stale, stale
    assert "timer" in stale and f"input socket {b.input_socket}: recorded as served" in stale, stale
    assert all(f"stale: {item}" in text for item in report["stale"]), text


def test_status_of_a_running_supervisor_checks_its_socket_answers(box):
    b = box()
    sup = b.supervise(b.writer_cmd("run"), interval=0.2)
    b.wait_ready(sup)
    report = wait_for(lambda: (r := b.status_report()["supervisor"])["input_served"] and r, 60, "a served socket")
    assert report["state"] == "running" and report["pid"] == sup.pid and report["stale"] == []
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0
    after = b.status_report()["supervisor"]
    assert after["state"] == "stopped" and after["input_served"] is False and after["stale"] == []


# ---------------------------------------------------------------- a killed input server


def server_of(pid: int) -> int | None:
    return next((child for child, _, _ in children_of(pid) if is_input_server(child)), None)


def appended(path: str) -> bool:
    """Whether the socket at ``path`` stores a prompt now."""
    try:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(30)
            conn.connect(path)
            conn.sendall(b'{"op":"append","harness":"codex","session":"S","text":"after the restart"}\n')
            return json.loads(conn.makefile("rb").readline()).get("ok") is True
    except OSError:
        return False


def test_a_killed_input_server_is_started_again_at_once_not_an_interval_later(box):
    """With a 60 s interval, the server comes back long before the next tick could
    have started it (the deadline below only bounds a failing test)."""
    b = box()
    b.codex.mkdir()
    sup = b.supervise(b.writer_cmd("run"), interval=60)
    first = wait_for(lambda: b.status().get("child_pid") and b.status().get("input_error", 1) is None
                     and server_of(sup.pid), 60, "the input server")
    os.kill(first, signal.SIGKILL)
    again = wait_for(lambda: (pid := server_of(sup.pid)) not in (None, first) and b.status().get("input_error", 1)
                     is None and pid, 30, "a new input server, without waiting for the 60 s interval")
    assert appended(b.input_socket)
    sup.send_signal(signal.SIGTERM)
    assert finish(sup) == 0, b.output()
    lines = stderr_lines(b)
    assert any("not serving inputs: the input server died of signal 9; retried at once" in ln for ln in lines), lines
    assert any(f"recovered: the input server serves {b.input_socket} again" in ln for ln in lines), lines
    assert again != first


def test_input_server_restarts_back_off_only_on_failures_in_a_row():
    from journal.supervise.inputs import BACKOFF_MAX, restart_delay

    delays = [restart_delay(n) for n in range(1, 12)]
    assert delays[0] == 0, "the first failure is restarted at once"
    assert delays[1:8] == [1, 2, 4, 8, 16, 32, 60] and set(delays[7:]) == {BACKOFF_MAX}

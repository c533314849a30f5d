"""A container for the real CLIs: ``Box``, and the lost-container scenario every CLI runs.

A ``Box`` is ``base/<name>``: ``local`` (``$AM_LOCAL``), ``home`` (``HOME``), ``work``
(the project the agent works in, its cwd), a config naming the one preset under test,
and a store shared by every box of a test (as containers sharing one bucket). The CLI
runs under ``journal supervise`` (a real process group, real signals); a lost container
is its directory removed after the supervisor ended, cleanly or by SIGKILL.

Each CLI's module supplies an ``Agent``: how to point the CLI at its tree and the mock
server, and its first and resumed turn. ``lost_and_resumed`` is the scenario.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .clis import Installed
from .mockmodel import MockModel

#: The journal the boxes run: this checkout, or ``$JOURNAL_E2E_SRC`` (another checkout's root).
REPO = Path(os.environ.get("JOURNAL_E2E_SRC") or Path(__file__).resolve().parents[2])
JOURNAL = [sys.executable, "-m", "journal"]
INTERVAL = "0.5"
#: Variables of this process that must not reach a box: journal's own and the harnesses'.
STRAY = ("JOURNAL_", "AM_LOCAL", "AGENT_STATE_", "CODEX_", "CLAUDE_", "ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_",
         "OPENCODE_", "HERMES_", "XDG_", "FX_", "OPENCLAW_")


class Agent:
    """One CLI, as a test drives it. A subclass sets ``name`` (the e2e CLI), ``preset``
    (journal's preset) and implements ``setup``, ``first`` and ``resume``."""

    name: str = ""
    preset: str = ""

    def __init__(self, cli: Installed, mock: MockModel):
        self.cli = cli
        self.mock = mock

    def setup(self, box: Box) -> None:
        """Write the CLI's config into ``box`` and set ``box.env`` (called for every box,
        the restored one included, before anything runs there)."""
        raise NotImplementedError

    def first(self, box: Box, prompt: str) -> list[str]:
        """The command of a first turn."""
        raise NotImplementedError

    def resume(self, box: Box, prompt: str) -> list[str]:
        """The command of a turn that resumes the last session."""
        raise NotImplementedError

    def tree(self, box: Box) -> Path:
        """The live tree journal checkpoints for this CLI."""
        return box.local / box.preset_live(self.preset)


@dataclass
class Box:
    base: Path
    name: str
    store: Path
    preset: str
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = self.base / self.name
        for part in (self.local, self.home, self.work):
            part.mkdir(parents=True, exist_ok=True)
        config = self.home / ".config" / "journal" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'presets = ["{self.preset}"]\n')
        self.socket_dir = tempfile.mkdtemp(prefix="je2e-")      # a Unix socket's path is short
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith(STRAY)},
                    "JOURNAL_INPUT_SOCKET": os.path.join(self.socket_dir, "input.sock"),
                    "HOME": str(self.home), "AM_LOCAL": str(self.local), "JOURNAL_STORE": str(self.store),
                    "JOURNAL_CONFIG": str(config), "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
                    "NO_COLOR": "1", "TERM": "dumb",
                    "PWD": str(self.work),      # as a shell sets it: opencode takes its directory from $PWD
                    **self.env}

    @property
    def local(self) -> Path:
        return self.root / "local"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def preset_live(self, preset: str) -> str:
        from journal.presets import PRESETS
        return PRESETS[preset].live

    def path_with(self, *dirs: str) -> None:
        self.env["PATH"] = os.pathsep.join([*dirs, self.env.get("PATH", os.defpath)])

    def journal(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run([*JOURNAL, *args], env=self.env, cwd=self.work, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"journal {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def run(self, cmd: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
        """``cmd`` in this box, not supervised (a CLI's own setup step)."""
        return subprocess.run(cmd, env=self.env, cwd=self.work, capture_output=True, text=True, timeout=timeout)

    def supervise(self, cmd: list[str]) -> subprocess.Popen:
        """``journal supervise -- cmd`` in a new session (the container's process tree)."""
        return subprocess.Popen([*JOURNAL, "supervise", "--interval", INTERVAL, "--", *cmd], env=self.env,
                                cwd=self.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def turn(self, cmd: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
        """One whole supervised turn: the CLI ends, the supervisor takes its final checkpoint."""
        proc = self.supervise(cmd)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc)
            out, err = proc.communicate()
            raise AssertionError(f"supervised turn did not end in {timeout} s:\n{out}\n{err}") from None
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if done.returncode != 0:
            raise AssertionError(f"supervised turn exited {done.returncode}:\n{out}\n{err}")
        return done

    def checkpoints(self) -> int:
        """How many checkpoints the store holds (``journal log --json``)."""
        return len(json.loads(self.journal("log", "--json").stdout)["checkpoints"])

    def lose(self) -> None:
        """The container is gone: its disk with it."""
        shutil.rmtree(self.root)
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL to every process of ``proc``'s session (the supervisor, the CLI, its children)."""
    sid = os.getsid(proc.pid)
    for pid in _session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid:
            pids.append(int(entry))
    return pids


def wait_until(what: str, done: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting {timeout} s for {what}")
        time.sleep(0.1)


def torn_lines(tree: Path) -> list[str]:
    """Every line of every ``*.jsonl`` under ``tree`` that is not one whole JSON value."""
    bad = []
    for path in sorted(tree.rglob("*.jsonl")):
        data = path.read_bytes()
        for n, line in enumerate(data.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError:
                bad.append(f"{path.relative_to(tree)}:{n}: {line[:80]!r}")
        if data and not data.endswith(b"\n"):
            bad.append(f"{path.relative_to(tree)}: no newline at the end")
    return bad


def quick_check(path: Path) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("PRAGMA quick_check").fetchone()[0]


def databases(tree: Path) -> list[Path]:
    """The SQLite databases under ``tree`` (by their header)."""
    found = []
    for path in sorted(tree.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as f:
                if f.read(16) == b"SQLite format 3\x00":
                    found.append(path)
    return found


# -- the scenario ---------------------------------------------------------------------

@dataclass
class Outcome:
    """What ``lost_and_resumed`` saw, for the test's own assertions."""

    restored: Box                       # the new container, after its resumed turn
    first_markers: list[str]            # the replies of the first turn
    resumed: list                       # the resumed turn's model requests (mockmodel.Request)
    after_restore: Path | None = None   # a copy of the tree as ``journal restore`` left it
    killed_prompt: str | None = None    # the prompt of the turn killed mid-stream
    queued: str | None = None           # a prompt queued through the input journal while it streamed


def lost_and_resumed(agent: Agent, base: Path, how: str) -> Outcome:
    """The CLI's first turn under ``journal supervise`` in container ``a``; the
    container lost (``how``: "clean", the supervisor ended with the turn and took its
    final checkpoint; or "kill9", a second turn killed with its supervisor by SIGKILL
    while the model's reply streams, after a tick has seen its prompt); ``journal
    restore`` into a new, empty container at the same paths; a resumed turn there."""
    mock, store = agent.mock, base / "store"
    a = Box(base, "a", store, agent.preset)
    agent.setup(a)
    tag = os.urandom(3).hex()
    first = f"Remember the word first-{tag}."
    a.turn(agent.first(a, first))
    first_markers = [r.marker for r in mock.carrying(first) if r.marker]
    assert first_markers, f"no model request carried the first prompt; saw {mock.requests}"
    outcome = Outcome(restored=a, first_markers=first_markers, resumed=[])
    if how == "kill9":
        outcome.killed_prompt = f"Second turn second-{tag}."
        outcome.queued = f"Queued third-{tag}."
        mock.stall()
        metrics = a.root / "metrics.prom"
        proc = subprocess.Popen([*JOURNAL, "supervise", "--interval", INTERVAL, "--metrics-file", str(metrics), "--",
                                 *agent.resume(a, outcome.killed_prompt)], env=a.env, cwd=a.work,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            wait_until("the model's reply to stall mid-stream", mock.stalled.is_set)
            append_input(a, agent.name, outcome.queued)
            seen = time.time() + 1.0           # the prompt is on disk within about a second of the request
            wait_until("a checkpoint tick after the prompt reached the disk", lambda: _last_success(metrics) > seen)
        finally:
            kill_session(proc)
            mock.release()
    a.lose()
    b = Box(base, "a", store, agent.preset)          # the new container: the same paths, empty
    agent.setup(b)
    b.journal("restore")
    outcome.after_restore = base / "after-restore"
    shutil.copytree(agent.tree(b), outcome.after_restore, symlinks=True)
    before = len(mock.requests)
    resumed = f"Third turn resumed-{tag}."
    b.turn(agent.resume(b, resumed))
    outcome.restored = b
    outcome.resumed = [r for r in mock.requests[before:] if resumed in r.raw]
    return outcome


def append_input(box: Box, harness: str, text: str) -> dict:
    """Queue ``text`` through the supervisor's input socket, as the Agent Manager does."""
    import socket
    path = box.env["JOURNAL_INPUT_SOCKET"]
    wait_until("the input socket", lambda: os.path.exists(path))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(60)
        sock.connect(path)
        sock.sendall(json.dumps({"op": "append", "harness": harness, "session": "e2e", "text": text}).encode() + b"\n")
        reply = sock.makefile("rb").readline()
    answer = json.loads(reply)
    assert answer.get("ok"), answer
    return answer


def queued_texts(box: Box) -> list[str]:
    """The texts of every input the store's input journal holds (``journal input``)."""
    listed = json.loads(box.journal("input", "list", "--json").stdout)
    return [box.journal("input", "show", item["id"]).stdout for item in listed]


def assert_resumed(seen: Outcome) -> None:
    """What every CLI's resumed turn shows after ``lost_and_resumed``: a model request
    holding the first turn's reply; after a kill -9 mid-stream, the killed turn's prompt
    too, and the input queued meanwhile in the input journal. ``journal show`` of the
    resumed session, from the store, prints the resumed turn's reply and the first's."""
    assert seen.resumed, "the resumed turn sent no model request"
    assert any(m in r.raw for r in seen.resumed for m in seen.first_markers), \
        "the resumed turn's request lacks the first turn's reply: the session was not restored"
    if seen.killed_prompt is not None:
        assert any(seen.killed_prompt in r.raw for r in seen.resumed), \
            "the prompt of the turn killed mid-stream was lost"
        assert seen.queued in queued_texts(seen.restored)
    shown = shown_sessions(seen.restored)
    replies = [r.marker for r in seen.resumed if r.marker]
    resumed = [text for text in shown.values() if any(m in text for m in replies)]
    assert resumed, f"`journal show` printed no session holding the resumed turn's reply ({replies}): {shown}"
    assert any(m in text for text in resumed for m in seen.first_markers), \
        f"`journal show` of the resumed session lacks the first turn's reply ({seen.first_markers}): {resumed}"


def shown_sessions(box: Box) -> dict[str, str]:
    """Each session of the store's newest checkpoint (``journal sessions``), as ``journal show`` prints it."""
    listed = json.loads(box.journal("sessions", "--json").stdout)["sessions"]
    assert listed, "`journal sessions` lists no session"
    return {s["id"]: box.journal("show", s["id"]).stdout for s in listed}


def _last_success(metrics: Path) -> float:
    try:
        text = metrics.read_text()
    except FileNotFoundError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("journal_last_success_timestamp_seconds "):
            return float(line.split()[1])
    return 0.0


@dataclass
class TornResume:
    """What a CLI did with the legacy copy's torn last line (``legacy_torn_resume``)."""

    transcript: str                     # the transcript whose last line was torn, relative to the tree
    fragment: bytes                     # the torn line as the copy held it
    torn_after: list[str]               # ``torn_lines`` of the tree after the resumed turn
    resumed: bool                       # the resumed turn's request held the first turn's reply


def legacy_torn_resume(agent: Agent, base: Path) -> TornResume:
    """The legacy design's loss, with the real CLI: a first turn (no journal); the tree
    copied with ``rsync -a`` as the legacy loop copies it, the newest transcript's last
    line cut in half (a copy racing the writer, or hf-mount uploading a file still
    open); the container lost; the copy put back; a resumed turn."""
    a = Box(base, "legacy", base / "no-store", agent.preset)
    agent.setup(a)
    tag = os.urandom(3).hex()
    first = f"Remember the word legacy-{tag}."
    done = a.run(agent.first(a, first))
    assert done.returncode == 0, done.stderr
    markers = [r.marker for r in agent.mock.carrying(first) if r.marker]
    tree, copy = agent.tree(a), base / "legacy-copy"
    if shutil.which("rsync"):
        subprocess.run(["rsync", "-a", f"{tree}/", f"{copy}/"], check=True)
    else:
        shutil.copytree(tree, copy, symlinks=True)
    newest = max(copy.rglob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    data = newest.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = start + (len(data) - start) // 2
    newest.write_bytes(data[:cut])
    a.lose()
    b = Box(base, "legacy", base / "no-store", agent.preset)
    shutil.copytree(copy, agent.tree(b), symlinks=True, dirs_exist_ok=True)
    agent.setup(b)
    before = len(agent.mock.requests)
    resumed = f"Resumed after the legacy copy {tag}."
    b.run(agent.resume(b, resumed))
    sent = [r for r in agent.mock.requests[before:] if resumed in r.raw]
    return TornResume(transcript=str(newest.relative_to(copy)), fragment=data[start:cut],
                      torn_after=torn_lines(agent.tree(b)),
                      resumed=any(m in r.raw for r in sent for m in markers))

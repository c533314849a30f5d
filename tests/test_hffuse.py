"""journal on a real FUSE mount with hf-mount's write rules (``tests/hffuse.py``).

The store is a plain path on the mount, as on a Hugging Face Space's ``/data``. The
mount process is a separate process; SIGKILL of it is the container dying, which
loses every byte not yet closed. Everything runs for real: the FUSE daemon, the
``journal`` CLI, the writers, the signals.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, Live

HERE = Path(__file__).parent
ROLLOUT = "codex-home/sessions/2026/12/03/rollout-live.jsonl"

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount") is None or ctypes.util.find_library("fuse") is None,
    reason="needs /dev/fuse, fusermount and libfuse 2 (Debian's fuse and libfuse2 packages)")


class Mount:
    """The FUSE daemon over ``bucket``, mounted at ``path``."""

    def __init__(self, tmp_path: Path):
        self.bucket = tmp_path / "bucket"
        self.path = tmp_path / "mnt"
        self.bucket.mkdir()
        self.path.mkdir()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "hffuse.py"), str(self.bucket), str(self.path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while not os.path.ismount(self.path):
            assert self.proc.poll() is None, self.proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the FUSE mount did not come up"
            time.sleep(0.02)

    def crash(self) -> None:
        """The container dies: the daemon gets SIGKILL; unclosed files are gone."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.unmount()

    def unmount(self) -> None:
        subprocess.run(["fusermount", "-u", "-z", str(self.path)], capture_output=True)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def mount(tmp_path):
    m = Mount(tmp_path)
    m.start()
    yield m
    m.unmount()


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".journal" not in p.relative_to(root).parts}


def test_the_mount_enforces_the_rules(mount):
    """The filesystem under test has teeth: fsync publishes nothing, an existing file
    cannot be reopened or appended to, writes are sequential, and a crash loses what
    was not closed."""
    closed = mount.path / "closed.txt"
    closed.write_bytes(b"one\n")
    assert (mount.bucket / "closed.txt").read_bytes() == b"one\n"
    for flags in (os.O_WRONLY | os.O_APPEND, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
        with pytest.raises(PermissionError):
            os.open(closed, flags)
    fd = os.open(mount.path / "open.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"held open\n")
    os.fsync(fd)
    with pytest.raises(OSError):
        os.pwrite(fd, b"x", 0)
    assert not (mount.bucket / "open.txt").exists()  # fsync uploaded nothing

    mount.crash()

    with pytest.raises(OSError):
        os.close(fd)  # the close reaches no one: the mount is gone
    assert sorted(p.name for p in mount.bucket.iterdir() if not p.name.startswith(".")) == ["closed.txt"]


def test_a_store_on_the_mount_reads_ahead_and_one_on_local_disk_does_not(mount, tmp_path):
    """Restore fetches ahead in other threads where a read is a round trip (a FUSE
    mount such as hf-mount), and reads in its own thread from a local disk."""
    from journal.store.local import LocalStore, mount_type

    assert mount_type(str(mount.path / "store")).startswith("fuse")
    assert LocalStore(str(mount.path / "store")).read_ahead is True
    assert LocalStore(str(tmp_path / "store")).read_ahead is False


def test_a_transcript_held_open_on_the_mount_is_lost_but_journal_keeps_every_complete_line(mount, tmp_path):
    """The field failure, reproduced: an agent appending to a rollout it holds open on
    the mount leaves nothing in the bucket when the container dies. The same agent
    writing to local disk, with `journal checkpoint` into a store on the mount, keeps
    every line up to the last checkpoint, and never a torn one."""
    store = mount.path / "journal"
    box = Live(tmp_path / "a", store, expect=0)
    (box.local / ROLLOUT).parent.mkdir(parents=True)
    shutil.copytree(FIXTURES / "codex-home", box.local / "codex-home", dirs_exist_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(box.local / ROLLOUT), str(mount.path / "rollout.jsonl")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for expected in ("100", "200"):
        assert writer.stdout.readline().strip() == expected
        box.run("checkpoint")
        writer.stdin.write("go\n")
        writer.stdin.flush()
    assert writer.stdout.readline().strip() == "torn"

    mount.crash()
    writer.kill()
    writer.wait()

    assert not (mount.bucket / "rollout.jsonl").exists()  # the legacy layout: all of it lost
    live = (box.local / ROLLOUT).read_bytes()
    mount.start()
    fresh = Live(tmp_path / "b", store, expect=0)
    fresh.run("restore")
    back = (fresh.local / ROLLOUT).read_bytes()
    assert back.count(b"\n") == 200 and back.endswith(b"\n")
    assert live.startswith(back)
    assert files_of(fresh.local / "codex-home" / "sessions" / "2026" / "02") == \
        files_of(box.local / "codex-home" / "sessions" / "2026" / "02")


_WRITER = r"""
import json, sys, time
local, mounted = open(sys.argv[1], "a"), open(sys.argv[2], "w")
for i in range(1, 251):
    line = json.dumps({"type": "response_item", "seq": i, "payload": {"text": "step %d " % i * 20}}) + "\n"
    for fh in (local, mounted):
        fh.write(line); fh.flush()
    if i % 100 == 0:
        print(i, flush=True)
        sys.stdin.readline()  # the test checkpoints, then lets the agent go on
for fh in (local, mounted):
    fh.write('{"type": "response_item", "seq": 251, "payl'); fh.flush()
print("torn", flush=True)
time.sleep(3600)
"""


@pytest.mark.parametrize("order", ["mount-first", "journal-first"])
def test_kill_9_in_the_middle_of_a_checkpoint_then_restore_is_complete(mount, tmp_path, order):
    """A checkpoint of 6 MB of changes is killed part way (the container dies: the
    mount first, or journal first and the mount's close-uploads of its half-written
    temp files go through). A restore on a new container brings back exactly one
    committed checkpoint, `verify --full` is clean, and the old container's next
    checkpoint carries on; gc through the mount then deletes for real."""
    store = mount.path / "journal"
    box = Live(tmp_path / "a", store, expect=0)
    rng = random.Random(order)
    tree = box.local / "agent-state" / "claude" / "projects"
    for d in range(4):
        for f in range(25):
            path = tree / f"p{d}" / f"s{f}.bin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(rng.randbytes(30_000))
    box.run("checkpoint")
    first = files_of(box.local)
    for path in sorted(tree.rglob("*.bin")):
        path.write_bytes(rng.randbytes(60_000))
    second = files_of(box.local)

    victim = box.popen("checkpoint")
    packs = mount.bucket / "journal" / "packs"
    before = sum(1 for _ in packs.rglob("*"))
    deadline = time.monotonic() + 60
    while sum(1 for _ in packs.rglob("*")) == before and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if order == "mount-first":
        # Stopped first, so that it writes nothing between the daemon's death and its own
        # (a file it made then, at the lazily unmounted path, would land in the empty
        # directory under the mount, and the next mount would refuse it as not empty).
        victim.send_signal(signal.SIGSTOP)
        mount.crash()
        victim.send_signal(signal.SIGKILL)
    else:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        mount.crash()
    victim.wait()
    assert victim.returncode != 0, "the checkpoint finished before the kill: make it bigger"
    mount.start()

    fresh = Live(tmp_path / "b", store, expect=0)
    fresh.run("restore")
    got = files_of(fresh.local)
    assert got in (first, second), "a restore is one committed checkpoint, never a mix"
    assert fresh.run("verify", "--full", "--json", expect=None).returncode == 0

    box.run("checkpoint")  # the killed container carries on (a pending manifest is republished)
    newest = json.loads(box.run("log", "--json").stdout)[0]
    assert newest["error"] is None
    again = Live(tmp_path / "c", store, expect=0)
    again.run("restore")
    assert files_of(again.local) == second

    for _ in range(2):
        box.run("gc", "--keep-last", "1", "--grace", "0s")
    assert box.run("verify", "--full", "--json", expect=None).returncode == 0
    last = Live(tmp_path / "d", store, expect=0)
    last.run("restore")
    assert files_of(last.local) == second

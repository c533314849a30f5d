"""`journal supervise`'s inotify watch (journal/local/watch.py, design §10 "The watch"):
an idle tick takes the directories where nothing happened without a look, and never
misses a change that a full walk would take, whoever made it and however.

Changes are made by other processes (``subprocess``) or through the kernel's own
paths (a shared memory map, a renamed parent); the ticks are the library's, as the
supervisor runs them. The rows a tick checks are counted through ``quiet.unchanged``."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

from journal.local import quiet
from journal.local.watch import SWEEP_TICKS, Watch

pytestmark = pytest.mark.skipif(not Watch().active, reason="no inotify here")


@pytest.fixture
def counted(monkeypatch):
    """The rows each tick checks in full (one process: no forked half)."""
    seen: list[int] = []
    real = quiet.unchanged

    def unchanged(dirs):
        dirs = list(dirs)
        seen[-1] += len(dirs)
        return real(dirs)

    monkeypatch.setattr(quiet, "unchanged", unchanged)
    monkeypatch.setattr(quiet, "_one_thread", lambda: False)

    def tick(live, watch):
        seen.append(0)
        result = live.checkpoint(watch=watch)
        return result, seen[-1]
    return tick


@pytest.fixture
def vouched(monkeypatch):
    """How many directories each call of ``Watch.trusted`` vouched for."""
    sizes: list[int] = []
    real = Watch.trusted

    def trusted(self, state_dir):
        out = real(self, state_dir)
        sizes.append(len(out))
        return out

    monkeypatch.setattr(Watch, "trusted", trusted)
    return sizes


def many_dirs(live, n: int = 40) -> Path:
    root = live.local / "codex-home" / "sessions" / "2030"
    for i in range(n):
        d = root / f"d{i:03d}"
        d.mkdir(parents=True)
        (d / f"rollout-{i}.jsonl").write_text('{"n": 0}\n')
    return root


def stored(live, rel: str) -> bytes:
    """The newest checkpoint's bytes of the codex tree's ``rel``, as `journal cat` prints them."""
    return live.run("cat", f"codex/{rel}", expect=0).stdout.encode()


def rows(live) -> int:
    return len(quiet.load(str(live.state_dir)).dirs)


def settled(live, tick, watch) -> None:
    """The first tick arms the watch, the second verifies it: from the third it vouches."""
    for _ in range(2):
        tick(live, watch)


def test_an_idle_watched_tick_checks_only_its_sweep_of_the_rows(live, counted):
    many_dirs(live)
    watch = Watch()
    settled(live, counted, watch)
    total = rows(live)
    _, unwatched = counted(live, None)
    checked = [counted(live, watch)[1] for _ in range(SWEEP_TICKS)]
    assert unwatched == total
    assert all(0 < n < total / 2 for n in checked), (checked, total)
    assert sum(checked) >= total   # over SWEEP_TICKS ticks, every row was checked in full at least once


def test_an_append_by_another_process_is_taken_at_the_next_watched_tick(live, counted):
    root = many_dirs(live)
    watch = Watch()
    settled(live, counted, watch)
    target = root / "d017" / "rollout-17.jsonl"
    subprocess.run([sys.executable, "-c", f"open({str(target)!r}, 'a').write('{{\"n\": 1}}\\n')"], check=True)
    result, checked = counted(live, watch)
    assert result.seq is not None and checked < rows(live)
    rel = str(target.relative_to(live.local / "codex-home"))
    assert stored(live, rel) == b'{"n": 0}\n{"n": 1}\n'


def test_a_directory_made_again_under_a_renamed_parent_is_walked(live, counted):
    """Renaming ``2030`` sends no event to the directories under it; their paths then name
    new directories, which the watch must not vouch for (it compares device and inode)."""
    root = many_dirs(live, 4)
    watch = Watch()
    settled(live, counted, watch)
    os.rename(root, root.with_name("2030.old"))
    for i in range(4):
        d = root / f"d{i:03d}"
        d.mkdir(parents=True)
        (d / f"rollout-{i}.jsonl").write_text('{"n": "again"}\n')
    os.utime(root.with_name("2030.old"), (1, 1))
    result, _ = counted(live, watch)
    assert result.seq is not None
    assert stored(live, "sessions/2030/d002/rollout-2.jsonl") == b'{"n": "again"}\n'
    assert stored(live, "sessions/2030.old/d002/rollout-2.jsonl") == b'{"n": 0}\n'


def test_a_write_through_a_shared_map_is_taken_within_the_sweep(live, counted):
    """inotify reports no write made through a shared memory map: the sweep takes it
    within SWEEP_TICKS ticks."""
    root = many_dirs(live)
    watch = Watch()
    settled(live, counted, watch)
    target = root / "d031" / "rollout-31.jsonl"
    before = os.stat(target).st_mtime_ns
    with open(target, "r+b") as fh:
        mem = mmap.mmap(fh.fileno(), 0)
    counted(live, watch)   # the open and close were events: this tick takes them
    mem[6:7] = b"7"        # no event: written through the map, no descriptor open
    mem.close()
    if os.stat(target).st_mtime_ns == before:
        pytest.skip("this filesystem left the mapped file's time unchanged")
    taken = next((t for t in range(1, SWEEP_TICKS + 2) if counted(live, watch)[0].seq is not None), None)
    assert taken is not None and taken <= SWEEP_TICKS + 1, taken
    assert stored(live, str(target.relative_to(live.local / "codex-home"))) == b'{"n": 7}\n'


def test_a_change_made_before_a_directory_is_watched_is_taken(live, counted, monkeypatch):
    """A directory's first watched tick checks it in full: a change between the walk and
    the watch (no event) is taken then."""
    root = many_dirs(live, 3)
    target = root / "d001" / "rollout-1.jsonl"
    real = Watch._arm

    def arm(self, path):
        if path == str(target.parent) and not target.with_suffix(".done").exists():
            target.with_suffix(".done").write_text("")
            with open(target, "a") as fh:
                fh.write('{"n": "unwatched"}\n')
        real(self, path)

    monkeypatch.setattr(Watch, "_arm", arm)
    watch = Watch()
    counted(live, watch)   # walks, then arms: the append lands before the watch
    assert counted(live, watch)[0].seq is not None
    assert stored(live, "sessions/2030/d001/rollout-1.jsonl").endswith(b'"unwatched"}\n')


def test_a_snapshot_another_process_wrote_is_checked_in_full(live, counted, vouched):
    root = many_dirs(live)
    watch = Watch()
    settled(live, counted, watch)
    counted(live, watch)
    assert vouched[-1] > 0
    (root / "d005" / "rollout-5.jsonl").write_text('{"n": 0}\n{"n": 5}\n')
    live.run("checkpoint", expect=0)   # another process: its snapshot's rows were seen by no watch of ours
    result, _ = counted(live, watch)
    assert result.seq is None and vouched[-1] == 0
    counted(live, watch)   # checked in full once, under the watch: vouched for again from the next
    assert counted(live, watch)[0].seq is None and vouched[-1] > 0


def test_an_overflowed_queue_trusts_nothing(live, counted):
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 100_000:
        pytest.skip(f"max_queued_events is {limit}")
    root = many_dirs(live, 2)
    watch = Watch()
    settled(live, counted, watch)
    a, b = root / "d000" / "rollout-0.jsonl", root / "d001" / "rollout-1.jsonl"
    st = os.stat(a)
    for i in range(limit // 2 + 10):   # two names in turn: the kernel merges only repeated events
        os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
    with open(b, "a") as fh:   # its event is lost past the overflow
        fh.write('{"n": "late"}\n')
    result, checked = counted(live, watch)
    assert watch.overflowed >= 1 and checked == rows(live)
    assert result.seq is not None and stored(live, "sessions/2030/d001/rollout-1.jsonl").endswith(b'"late"}\n')


def test_supervise_no_watch_is_accepted(live):
    out = live.run("supervise", "--help", expect=0)
    assert "--no-watch" in out.stdout

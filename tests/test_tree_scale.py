"""Large trees: what a first checkpoint and a restore hold and do per path, counted on a
tree of a few thousand files (issue 46; the figures at 20,000 to 1,000,000 files are in
docs/benchmarks.md, from the bench's tree part). Nothing here is timed."""

from __future__ import annotations

import functools
import os
import stat

import pytest

from journal.checkpoint import commit as checkpoint_commit
from journal.checkpoint import run as checkpoint_run
from journal.format.model import is_pending
from journal.local.walk import Matcher, walk_tree
from journal.local.tree_tmp import TreeTmp
from journal.repository.pack import PackWriter
from journal.restore import entry as restore_entry
from journal.restore import publish

TREE = "agent-state/claude"
FILES, DIRS = 2000, 8


@pytest.fixture
def tree_live(bare_live):
    """A Claude Code tree of ``FILES`` small transcripts in ``DIRS`` directories."""
    for i in range(FILES):
        bare_live.write(f"{TREE}/projects/p{i % DIRS}/s{i:05}.jsonl", ('{"type":"user","n":%d}\n' % i) * (1 + i % 3))
    return bare_live


def snapshot(root) -> dict[str, tuple[int, int, bytes]]:
    """Each file under ``root``: its mode, mtime and bytes."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            st = os.lstat(os.path.join(d, n))
            out[os.path.relpath(os.path.join(d, n), root)] = (st.st_mode, st.st_mtime_ns,
                                                               open(os.path.join(d, n), "rb").read())
    return out


def test_a_first_checkpoint_gives_the_paths_their_pack_as_each_pack_closes(tree_live, monkeypatch):
    """A data pack that closes while the walk goes on is named at once in the paths read
    into it, each replaced once, so the commit has only the last pack's paths left to
    name (before, every path was held twice at the commit: the placeholder's and the
    named one's). Packs of 16 KiB here: the tree fills several."""
    monkeypatch.setattr(checkpoint_run, "PackWriter", functools.partial(PackWriter, target=16 << 10))
    at_commit = []
    real = checkpoint_commit._resolved

    def resolved(trees, captured, data):
        states = [fs for read in captured.values() for fs in read]
        at_commit.append((len(states), {r.pack for fs in states for r in fs.entry.refs if is_pending(r.pack)},
                          sum(any(is_pending(r.pack) for r in fs.entry.refs) for fs in states)))
        return real(trees, captured, data)

    monkeypatch.setattr(checkpoint_commit, "_resolved", resolved)
    result = tree_live.checkpoint()

    (read, slots, waiting), = at_commit
    manifest = tree_live.manifest(result.seq)
    assert read == FILES + DIRS + 1 and len(manifest.packs) >= 6   # the data packs and the index pack
    assert len(slots) <= 1, "only the pack still open when the walk ended awaits its name"
    assert waiting * 3 < FILES, waiting
    out = tree_live.home / "out"
    assert tree_live.restore(to=str(out)).complete
    assert snapshot(out / "claude") == snapshot(tree_live.local / TREE)


def test_a_walk_listing_holds_each_names_type_not_its_stat(tmp_path):
    """The listing a quiet snapshot is made from is held until the tree's scan ends: per
    name, its file type (``stat.S_IFMT``), never the ``os.stat_result`` (about 500 bytes a
    name, 100 MB over 200,000 files); one object per type, shared by every name."""
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    (tmp_path / "g").write_text("y")
    os.symlink("f", tmp_path / "l")
    os.mkfifo(tmp_path / "p")
    listing: list = []
    items = list(walk_tree(str(tmp_path), Matcher(), listing=listing))

    assert {i.path for i in items} == {"d", "f", "g", "l"}
    top = dict((name, (kind, walked)) for name, kind, walked in listing[0][1])
    assert top == {"d": (stat.S_IFDIR, True), "f": (stat.S_IFREG, True), "g": (stat.S_IFREG, True),
                   "l": (stat.S_IFLNK, True), "p": (stat.S_IFIFO, False)}
    assert not any(isinstance(x, os.stat_result) for _, names in listing for entry in names for x in entry)
    assert top["f"][0] is top["g"][0]


def test_an_export_made_durable_by_one_syncfs_a_batch_looks_at_each_path_once(tree_live, monkeypatch):
    """Where one ``syncfs`` makes a batch durable (ext4, XFS: forced on here, where it is
    a real call too), a restore of the tree into a new directory fsyncs no file: one
    ``syncfs`` for its one batch and one for its directories. Each path is looked at
    once, just before its rename, in its directory as the batch opened it (at the
    decision its directory was not there yet, so nothing could be, and nothing is
    remembered of it), and each directory is opened once for the batch's renames, not
    once per file. A file is created with its mode where the umask leaves it: no chmod."""
    tree_live.checkpoint()
    before = snapshot(tree_live.local / TREE)   # read before ``os.lstat`` is counted
    monkeypatch.setattr(publish, "syncs_whole", lambda path: True)
    monkeypatch.setattr(restore_entry, "_UMASK", [0o022])
    umask = os.umask(0o022)
    syncs, fsyncs, looks, parents, chmods = [], [], [], [], []
    real_sync, real_fsync, real_lstat, real_parent = publish.sync_filesystem, os.fsync, os.lstat, TreeTmp.parent_fd
    monkeypatch.setattr(publish, "sync_filesystem", lambda fd: syncs.append(fd) or real_sync(fd))
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(os.readlink(f"/proc/self/fd/{fd}")) or real_fsync(fd))
    out = tree_live.home / "out"

    def lstat(path, *args, **kwargs):
        if str(path).endswith(".jsonl"):   # a live file, by its path or in its directory's descriptor
            looks.append(str(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(TreeTmp, "parent_fd", lambda self, dst: parents.append(dst) or real_parent(self, dst))
    real_fchmod = os.fchmod
    monkeypatch.setattr(os, "fchmod", lambda fd, mode: chmods.append(os.readlink(f"/proc/self/fd/{fd}"))
                        or real_fchmod(fd, mode))
    try:
        result = tree_live.restore(to=str(out))
    finally:
        os.umask(umask)
    monkeypatch.undo()

    assert result.complete
    assert snapshot(out / "claude") == before
    assert not [p for p in chmods if p.endswith(".part") and "/claude/" in p], "a file is created with its mode"
    assert len(syncs) == 2
    assert not [p for p in fsyncs if p.startswith(str(out / "claude"))], "no file is fsynced one by one"
    assert len(looks) == FILES
    assert len([p for p in parents if p.startswith(str(out / "claude"))]) == DIRS


def tree_state(path: str, i: int):
    """A cached file of the state, ``i`` its every number."""
    from journal.format.model import BlobRef, Entry
    from journal.local.state import FileState

    ref = BlobRef(f"{i:064x}", f"{i % 7:064x}", i, 100, i)
    return FileState((i, i, i, 0o100644), Entry(path=path, kind="file", mode=0o644, size=i, refs=(ref,)))


def test_a_first_checkpoint_holds_one_object_per_mode_and_device_and_the_entrys_size_and_time_once(tree_live):
    """Every path read holds its mode and device (ints past the few Python shares) and,
    in its signature, its size and time: one object per mode and device for the whole
    scan, and the signature's size and time the entry's own objects (a first checkpoint
    of 200,000 files held each twice over: 30 MB)."""
    from journal.local.state import read_state

    tree_live.checkpoint()
    files = [fs for fs in read_state(str(tree_live.state_dir)).trees["claude"].files.values()
             if fs.entry.kind == "jsonl"]
    assert len(files) == FILES
    assert len({id(fs.entry.mode) for fs in files}) == 1 and len({id(fs.sig[3]) for fs in files}) == 1
    assert len({id(fs.dev) for fs in files}) == 1
    assert all(fs.sig[0] is fs.entry.size and fs.sig[1] is fs.entry.mtime_ns for fs in files)
    assert all(fs.entry.refs[0].size is fs.entry.size for fs in files if len(fs.entry.refs) == 1)


def test_a_restore_holds_one_object_per_pack_name_and_mode(tree_live, monkeypatch):
    """A restore holds every entry of the tree; each page decodes a new string per
    reference's pack and a new int per mode: the entries it holds share one object per
    pack and per mode, and a one-blob file's reference its entry's size."""
    from journal.repository import history

    tree_live.checkpoint()
    loaded = []
    real = history.load_entries
    monkeypatch.setattr(history, "load_entries", lambda *a, **k: loaded.append(real(*a, **k)) or loaded[-1])
    out = tree_live.home / "out"
    assert tree_live.restore(to=str(out)).complete

    (entries, _), = loaded
    refs = [r for e in entries for r in e.refs]
    assert len(entries) == FILES + DIRS + 1 and len(refs) >= FILES
    assert len({id(r.pack) for r in refs}) == len({r.pack for r in refs}) < 4
    assert len({id(e.mode) for e in entries if e.kind == "jsonl"}) == 1
    assert all(e.refs[0].size is e.size for e in entries if len(e.refs) == 1)
    assert snapshot(out / "claude") == snapshot(tree_live.local / TREE)


def test_restore_plans_a_large_tree_without_a_pair_or_key_per_path(monkeypatch):
    """Restore's plan looks for paths under a file (``refused_paths``) among the few paths
    other paths are under, not a map of every path; its jobs (``plan_jobs``) sort each
    pack's small files by offset, with no key tuple and no (place, write) pair per path.
    Both were a few dozen bytes a path at once (200,000 paths: 25 MB). What they decide
    is as before: a path under a file is refused; small files go in pack order."""
    import tracemalloc

    from journal.format.model import BlobRef, Entry
    from journal.restore import writer

    n = 6000
    entries = [Entry(path=f"d{i % 30:02}", kind="dir", mode=0o755) for i in range(30)]
    entries += [Entry(path=f"d{i % 30:02}/f{i:05}", kind="file", mode=0o644, size=100,
                      refs=(BlobRef(f"{i:064x}", f"{i % 3:064x}", (n - i) * 100, 100, 100),)) for i in range(n)]
    entries.append(Entry(path="d00/f00000/under", kind="file", mode=0o644))
    entries.sort(key=lambda e: e.path)
    tree = object()
    writes = [(tree, e) for e in entries if e.kind == "file"]

    tracemalloc.start()
    try:
        refused = restore_entry.refused_paths(entries)
        planned = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        jobs = writer.plan_jobs(writes)
        jobbed = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert list(refused) == ["d00/f00000/under"]
    assert planned < 16 * n, planned
    assert jobbed < 40 * n, jobbed
    placed = [(e.refs[0].pack, e.refs[0].offset) for _, es in jobs for e in es if e.refs]
    assert placed == sorted(placed) and sum(len(es) for _, es in jobs) == len(writes)

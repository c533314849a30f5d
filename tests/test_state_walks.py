"""Version 4's grouped local state against the full walk, over random changes to a live
tree (a test first written by a review of that change): after every checkpoint the
state read back from disk holds exactly the paths the process holds, every group's
totals are its paths', the manifest's counts are its entries', and a full walk with no
quiet snapshot finds nothing left to do. ``fresh``: each checkpoint runs as a new
process would, with no state kept in memory."""

from __future__ import annotations

import random

import pytest

from helpers.trees import random_change
from journal.local import quiet
from journal.local.files import Group
from journal.local.state import forget_state, load_state

KINDS = ["append", "create", "create", "delete", "rename", "mkdir", "rmdir", "rmtree", "chmod", "touch",
         "file2dir", "dir2file", "symlink", "renamedir", "none"]


def read_back(live):
    """The state as this process holds it equals the state read from disk; every group's
    totals are its paths' and every path is in its parent's group. Returns the latter."""
    state_dir = str(live.state_dir)
    held = load_state(state_dir, live.repo().store_id)
    forget_state(state_dir)
    disk = load_state(state_dir, live.repo().store_id)
    for name, tree in held.trees.items():
        assert dict(tree.files.items()) == dict(disk.trees[name].files.items()), name
        for files in (tree.files, disk.trees[name].files):
            for d, group in files.groups.items():
                want = Group.of(dict(group.paths))
                assert (group.n, group.nfiles, group.nbytes, group.flags) == (want.n, want.nfiles, want.nbytes, want.flags)
                assert all(p.rpartition("/")[0] == d for p in group.paths)
    return disk


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fresh", [False, True], ids=["kept", "fresh"])
def test_random_changes_keep_the_grouped_state_equal_to_a_full_walk(bare_live, monkeypatch, seed, fresh):
    from journal.checkpoint import scan

    taken = []
    real = scan._same_dirs
    monkeypatch.setattr(scan, "_same_dirs", lambda *args: (out := real(*args), taken.append(len(out[1])))[0])
    live = bare_live
    root = live.local / "agent-state" / "claude" / "projects"
    for d in range(8):
        for f in range(4):
            path = root / f"-p{d}" / f"s{f}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b'{"x": 1}\n')
    rng = random.Random(seed)
    live.checkpoint()
    live.checkpoint()
    for step in range(30):
        op = random_change(rng, root, step, KINDS)
        if rng.random() < 0.3:
            op += "+" + random_change(rng, root, step + 1000, KINDS)
        if fresh:
            forget_state(str(live.state_dir))
            quiet._memo.clear()
        result = live.checkpoint(allow_deletions=True)
        state = read_back(live)
        if result.seq is not None:
            entries = live.entries("claude")
            assert set(entries) == set(state.trees["claude"].files), (step, op)
            said = live.repo().load_manifest(result.seq)[0].trees["claude"]
            plain = [e for e in entries.values() if e.kind != "dir"]
            assert (said.files, said.bytes) == (len(plain), sum(e.size for e in plain)), (step, op)
        if fresh:
            forget_state(str(live.state_dir))
            quiet._memo.clear()
        quiet.discard(live.cfg.state_dir)   # a full walk, with no directory taken as it was
        again = live.checkpoint(allow_deletions=True)
        assert again.seq is None and not any(t.changed or t.deleted or t.dirs_changed or t.dirs_deleted
                                             for t in again.trees), (step, op, again)
        live.checkpoint()   # the quiet snapshot again, for the next step's scan
    assert sum(taken) > 30, "the scans took directories whole (the path under test)"

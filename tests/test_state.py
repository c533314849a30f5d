"""The local state on disk (``journal/local/state.py``, design §10): a base written
rarely, a small state file of changes written at every save, and the crash-ordering
rules between them."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import signal
import subprocess
import sys

import msgspec
import pytest

from conftest import clean_env
from helpers.container import Live
from journal.checkpoint import commit as checkpoint_commit
from journal.format.model import BlobRef, Entry
from journal.local import state as state_mod
from journal.local.files import Files, Group
from journal.local.state import (FileState, LocalState, StateFile, TreeCache, forget_state, load_state, read_state,
                                 save_state)
from journal.paths import STATE_BASE_DIR, STATE_FILE
from tripwire import TRIPWIRE

TREE = "agent-state/claude"


def fill(live: Live, n: int) -> None:
    for i in range(n):
        live.write(f"{TREE}/projects/d{i % 20}/f{i:04}.json", f'{{"n": {i}}}\n' * 3)


def bases(state_dir) -> list[str]:
    folder = os.path.join(state_dir, STATE_BASE_DIR)
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_a_one_change_commit_writes_two_small_state_files_and_no_base(bare_live, monkeypatch):
    """A 600-path tree, one file appended to: the commit's two saves (pending, then
    committed) each write a state file holding that one path's entry (and the pages
    the new index changed), with two fsyncs each, not the whole state (which the base,
    written by the first checkpoint, holds)."""
    live = bare_live
    fill(live, 600)
    live.checkpoint()
    state_dir = str(live.state_dir)
    (base,) = bases(state_dir)
    base_size = os.path.getsize(os.path.join(state_dir, STATE_BASE_DIR, base))
    live.append(f"{TREE}/projects/d3/f0003.json", '{"n": "more"}\n')

    written, fsyncs, saving = [], [], []
    real_write, real_fsync, real_save = state_mod.write_file_atomic, os.fsync, checkpoint_commit.save_state

    def write(path, data, *args, **kwargs):
        written.append((os.path.basename(path), bytes(data)))
        return real_write(path, data, *args, **kwargs)

    def fsync(fd):
        if saving:
            fsyncs.append(fd)
        return real_fsync(fd)

    def save(*args, **kwargs):
        saving.append(True)
        try:
            return real_save(*args, **kwargs)
        finally:
            saving.pop()

    compared, real_deltas = [], state_mod._deltas

    def deltas(*args):
        compared.append(True)
        return real_deltas(*args)

    monkeypatch.setattr(state_mod, "write_file_atomic", write)
    monkeypatch.setattr(state_mod, "_deltas", deltas)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(checkpoint_commit, "save_state", save)   # the commit's two saves
    result = live.checkpoint()

    assert result.seq == 2 and sum(t.changed for t in result.trees) == 1
    assert [name for name, _ in written] == [STATE_FILE, STATE_FILE], "no base written"
    assert len(fsyncs) == 4, "each save: the temp file and the directory"
    assert len(compared) == 1, "the second save writes the first one's changes: no path is compared again"
    for _, data in written:
        top = msgspec.msgpack.decode(data, type=StateFile)
        assert top.base == base
        assert [path for t in top.trees.values() for path in t.files] == ["projects/d3/f0003.json"]
        assert len(data) * 20 < base_size, (len(data), base_size)
    pending, committed = (msgspec.msgpack.decode(data, type=StateFile) for _, data in written)
    assert pending.pending_seq == 2 and committed.pending is None
    assert bases(state_dir) == [base]


def ref(n: int) -> BlobRef:
    return BlobRef(f"{n:064x}", f"{n + 1:064x}", 0, 100, n)


def file_state(path: str, n: int) -> FileState:
    return FileState((n, n, n, 0o100644), Entry(path=path, kind="file", mode=0o644, size=n, refs=(ref(n),)))


def tree(paths: range, pages: int = 3) -> TreeCache:
    return TreeCache(root=ref(1), files={f"p{i:04}": file_state(f"p{i:04}", i) for i in paths},
                     pages={f"{k:064x}": ref(k) for k in range(pages)},
                     page_keys={f"{k:064x}": (0, f"p{k:04}") for k in range(pages)})


def reread(state_dir: str) -> LocalState:
    forget_state(state_dir)
    state = read_state(state_dir)
    assert state is not None
    return state


def test_a_one_change_tick_read_from_disk_decodes_only_the_changed_directory(bare_live, monkeypatch):
    """600 paths in 20 directories; each tick a new process's view (the in-memory state
    dropped): the quiet snapshot finds 19 directories unchanged, and the checkpoint takes
    their groups as the base stored them, decoding the paths of the one directory that
    changed only (and, once a tick's state file names changes in it, that one again at
    load); a deletion, the directory it was in and its parent. The result is the same
    tree as a full walk's: it verifies."""
    from journal.local import files as files_mod
    from journal.local import quiet as quiet_mod
    from journal.verify import verify

    live = bare_live
    fill(live, 600)
    live.checkpoint()
    live.checkpoint()  # idle: the quiet snapshot is saved after the first
    decoded = []
    real = files_mod._decode
    monkeypatch.setattr(files_mod, "_decode", lambda raw: decoded.append(real(raw)) or decoded[-1])
    for tick, d in enumerate((3, 3, 11), 1):
        live.append(f"{TREE}/projects/d{d}/f{d + 20:04}.json", '{"n": "more"}\n')
        forget_state(str(live.state_dir))
        quiet_mod._memo.clear()
        decoded.clear()
        result = live.checkpoint()
        assert result.seq == tick + 1 and sum(t.changed for t in result.trees) == 1
        assert {parent for got in decoded for parent in {p.rpartition("/")[0] for p in got}} <= {
            f"projects/d{n}" for n in (3, d)}, tick
        assert len(decoded) <= 2, (tick, len(decoded))
    # a deletion: the directory it was in and its parent (whose row holds that directory's
    # signature) are walked; the gone path is looked for there, not in every directory
    os.unlink(live.local / TREE / "projects/d5/f0005.json")
    forget_state(str(live.state_dir))
    quiet_mod._memo.clear()
    decoded.clear()
    result = live.checkpoint()
    assert sum(t.deleted for t in result.trees) == 1
    assert {p.rpartition("/")[0] for got in decoded for p in got} <= {"projects/d5", "projects", "projects/d3",
                                                                        "projects/d11"}
    forget_state(str(live.state_dir))
    cache = load_state(str(live.state_dir), live.repo().store_id).trees["claude"]
    assert len(cache.files) == 599 + 21 and cache.files.nfiles == 599 and verify(live.repo(), full=True).ok
    assert "projects/d5/f0005.json" not in cache.files


def test_a_state_reads_back_as_saved_through_changes_gone_paths_trees_and_new_bases(tmp_path):
    state_dir = str(tmp_path / "state")
    state = LocalState(store_id="s" * 64, writer="w" * 32, seq=3, trees={"a": tree(range(1000)),
                                                                       "b": tree(range(5))})
    save_state(state_dir, state)
    (first,) = bases(state_dir)
    assert reread(state_dir) == state

    # changed, added and gone paths and pages, a tree added and one dropped: one state file
    cache = state.trees["a"]
    files = dict(cache.files)
    files["p0007"] = file_state("p0007", 70007)
    files["new"] = file_state("new", 5)
    del files["p0008"]
    state.trees = {"a": TreeCache(root=ref(9), files=files, pages={**cache.pages, "f" * 64: ref(3)},
                                  page_keys={}, dirty=True), "c": tree(range(2))}
    state.pending, state.pending_seq = b"manifest", 4
    save_state(state_dir, state)
    top = msgspec.msgpack.decode((tmp_path / "state" / STATE_FILE).read_bytes(), type=StateFile)
    assert top.base == first and bases(state_dir) == [first]
    assert sorted(top.trees["a"].files) == ["new", "p0007"] and top.trees["a"].files_gone == ["p0008"]
    assert len(top.trees["a"].page_keys_gone) == 3 and "b" not in top.trees
    assert reread(state_dir) == state

    # a change of more than a sixteenth of the paths: a new base, and the old one removed
    state = reread(state_dir)
    state.trees["a"].files = Files.of({p: file_state(p, 9) for p in state.trees["a"].files})
    save_state(state_dir, state)
    (second,) = bases(state_dir)
    assert second != first
    assert reread(state_dir) == state


def test_trees_as_saved_are_taken_only_over_the_file_this_process_saved_of_this_state(tmp_path):
    """``save_state(..., trees_as_saved=True)`` writes the last save's changes again only
    while the state file on disk is the one that save wrote: after a read, or once the
    file was replaced (its stamp differs), the trees are compared with the base (here a
    caller that did change a tree: the change is saved, not lost)."""
    state_dir = str(tmp_path / "state")
    path = os.path.join(state_dir, STATE_FILE)
    state = LocalState(store_id="s" * 64, writer="w" * 32, trees={"a": tree(range(100))})
    save_state(state_dir, state)
    state.seq = 1
    save_state(state_dir, state, trees_as_saved=True)
    assert reread(state_dir) == state

    state = read_state(state_dir)   # a read: nothing saved by this process yet
    state.trees["a"].files = Files.of({**state.trees["a"].files, "after-read": file_state("after-read", 1)})
    save_state(state_dir, state, trees_as_saved=True)
    assert "after-read" in reread(state_dir).trees["a"].files

    state = read_state(state_dir)
    save_state(state_dir, state)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))   # replaced since, as far as a stamp tells
    state.trees["a"].files = Files.of({**state.trees["a"].files, "after-replace": file_state("after-replace", 2)})
    save_state(state_dir, state, trees_as_saved=True)
    assert {"after-read", "after-replace"} <= set(reread(state_dir).trees["a"].files)


def test_a_save_after_another_process_replaced_the_state_writes_a_new_base(tmp_path):
    """A process holding a decoded state (a supervisor) while another replaced the state
    file and its base must not write changes against the base it knows, which is gone."""
    state_dir = str(tmp_path / "state")
    state = LocalState(store_id="s" * 64, writer="w" * 32, trees={"a": tree(range(800))})
    save_state(state_dir, state)
    known = state_mod._memo[os.path.join(state_dir, STATE_FILE)]
    other = reread(state_dir)   # the other process: a new base, the first removed
    forget_state(state_dir)
    save_state(state_dir, other)
    assert len(bases(state_dir)) == 1 and bases(state_dir) != [known.base.token]

    state_mod._memo[os.path.join(state_dir, STATE_FILE)] = known   # the first process again
    state.seq = 5
    save_state(state_dir, state)
    assert reread(state_dir) == state


def plain(value) -> bytes:
    """``value`` encoded with every ``Files`` as the plain map an earlier version wrote."""
    return msgspec.msgpack.encode(value, enc_hook=lambda o: dict(o.items()) if isinstance(o, Files) else o)


def test_a_version_2_state_file_is_read_whole_and_saved_with_a_base(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    old = LocalState(version=2, store_id="s" * 64, writer="w" * 32, seq=2, trees={"a": tree(range(700))})
    (state_dir / STATE_FILE).write_bytes(plain(old))
    state = load_state(str(state_dir), "s" * 64)
    assert state == old
    save_state(str(state_dir), state)
    assert msgspec.msgpack.decode((state_dir / STATE_FILE).read_bytes())["version"] == 4
    assert len(bases(str(state_dir))) == 1
    assert reread(str(state_dir)) == msgspec.structs.replace(old, version=4)


def test_a_version_3_state_and_its_base_are_read_and_changed_on_top_until_a_new_base(tmp_path):
    """A version 3 base (each tree's paths one map) is read as it is; a small change is
    saved as a version 4 state file on top of it (a version 3 reader refuses that file,
    so it never takes the changes for a whole tree); a large one writes a version 4 base
    (paths grouped by directory), and the version 3 base goes."""
    state_dir = tmp_path / "state"
    (state_dir / STATE_BASE_DIR).mkdir(parents=True)
    trees = {"a": {"pages": {"0" * 64: ref(1)}, "page_keys": {}, "bases": {},
                   "files": {f"d{i % 7}/p{i:04}": file_state(f"d{i % 7}/p{i:04}", i) for i in range(700)}}}
    token = "a" * 32
    data = msgspec.msgpack.encode({"version": 3, "token": token, "trees": trees})
    (state_dir / STATE_BASE_DIR / token).write_bytes(data)
    top = {"version": 3, "store_id": "s" * 64, "writer": "w" * 32, "seq": 5, "base": token,
           "base_sha256": hashlib.sha256(data).hexdigest(),
           "trees": {"a": {"root": ref(2), "files": {"d1/new": file_state("d1/new", 1)}, "files_gone": ["d2/p0002"]}}}
    (state_dir / STATE_FILE).write_bytes(msgspec.msgpack.encode(top))
    state = load_state(str(state_dir), "s" * 64)
    want = {**trees["a"]["files"], "d1/new": file_state("d1/new", 1)}
    del want["d2/p0002"]
    assert state.seq == 5 and state.trees["a"].files == want and state.trees["a"].root == ref(2)
    assert state.trees["a"].pages == trees["a"]["pages"] and sorted(state.trees["a"].files.groups) == [
        f"d{i}" for i in range(7)]

    state.trees["a"] = TreeCache(root=ref(3), pages=state.trees["a"].pages,
                                 files=state.trees["a"].files.changed({"d3/new": file_state("d3/new", 3)}))
    save_state(str(state_dir), state)
    saved = msgspec.msgpack.decode((state_dir / STATE_FILE).read_bytes())
    assert saved["version"] == 4 and saved["base"] == token and bases(str(state_dir)) == [token]
    assert sorted(saved["trees"]["a"]["files"]) == ["d1/new", "d3/new"]
    assert reread(str(state_dir)) == state

    state.trees["a"] = TreeCache(root=ref(4), files=Files.of({p: file_state(p, 9) for p in state.trees["a"].files}))
    save_state(str(state_dir), state)
    (fresh,) = bases(str(state_dir))
    assert fresh != token
    stored = msgspec.msgpack.decode((state_dir / STATE_BASE_DIR / fresh).read_bytes(), type=state_mod.StateBase)
    assert stored.version == 4 and sorted(state_mod._decode_v4(stored.trees)["a"].groups) == [f"d{i}" for i in range(7)]
    assert reread(str(state_dir)) == state


def test_a_save_writes_a_new_base_once_directories_changed_before_hold_half_the_paths(tmp_path):
    """A load decodes the group of every directory with changes since the base. One new
    path in another directory at each save: once the directories changed by earlier
    saves (not this one) hold half the paths, the save writes a new base. Directories
    that every save changes again never count (a new base would not spare the next
    load their groups), however many paths they hold: a flat tree of one directory, or
    the same sixty directories at every save, writes no base by this rule."""
    state_dir = str(tmp_path / "state")
    files = {f"d{i:03}/p{j:02}": file_state(f"d{i:03}/p{j:02}", j) for i in range(100) for j in range(40)}
    state = LocalState(store_id="s" * 64, writer="w" * 32, trees={"a": TreeCache(files=files)})
    save_state(state_dir, state)
    (first,) = bases(state_dir)
    n = 0
    while bases(state_dir) == [first]:
        n += 1
        assert n <= 60, "no new base"
        state.trees["a"] = TreeCache(files=state.trees["a"].files.changed({f"d{n:03}/new": file_state("x", n)}))
        save_state(state_dir, state)
    assert 50 <= n <= 52, n   # 2,000 of the 4,000 paths in directories changed before this save
    assert len(bases(state_dir)) == 1 and reread(state_dir) == state

    forget_state(state_dir)
    state = reread(state_dir)   # a process that read it: the same rule from the state file's changes
    (second,) = bases(state_dir)
    for tick in range(80):
        changes = {f"d{d:03}/p00": file_state(f"d{d:03}/p00", 1000 * tick + d) for d in range(60)}
        state.trees["a"] = TreeCache(files=state.trees["a"].files.changed(changes))
        save_state(state_dir, state)
        if tick % 20 == 0:
            forget_state(state_dir)
            state = reread(state_dir)
    assert bases(state_dir) == [second]

    flat = {f"p{j:05}": file_state(f"p{j:05}", j) for j in range(3000)}
    state = LocalState(store_id="s" * 64, writer="w" * 32, trees={"a": TreeCache(files=flat)})
    save_state(state_dir, state)
    (first,) = bases(state_dir)
    for n in range(150):
        state.trees["a"] = TreeCache(files=state.trees["a"].files.changed({f"p{n:05}": file_state(f"p{n:05}", 10000 + n)}))
        save_state(state_dir, state)
    assert bases(state_dir) == [first]
    assert reread(state_dir) == state


def test_a_state_file_whose_base_is_missing_or_another_reads_as_no_state(tmp_path):
    """No state for a checkpoint (``load_state``); for the lineage guards (``read_state``)
    the state file's own scalars, without trees."""
    state_dir = str(tmp_path / "state")
    save_state(state_dir, LocalState(store_id="s" * 64, writer="w" * 32, seq=7,
                                     trees={"a": tree(range(600))}))
    (name,) = bases(state_dir)
    folder = os.path.join(state_dir, STATE_BASE_DIR)
    os.rename(os.path.join(folder, name), os.path.join(folder, "0" * 32))
    forget_state(state_dir)
    assert load_state(state_dir, "s" * 64) is None
    assert read_state(state_dir) == LocalState(store_id="s" * 64, writer="w" * 32, seq=7)
    os.rename(os.path.join(folder, "0" * 32), os.path.join(folder, name))
    assert reread(state_dir).trees["a"].files["p0001"] == file_state("p0001", 1)


def test_a_base_with_a_changed_byte_that_still_decodes_is_not_read(tmp_path):
    """A base lives long: a byte changed on disk that still decodes (a path's name here)
    must not be taken for entries. The state file names the base's SHA-256."""
    state_dir = str(tmp_path / "state")
    save_state(state_dir, LocalState(store_id="s" * 64, writer="w" * 32, seq=2, trees={"a": tree(range(600))}))
    (name,) = bases(state_dir)
    path = os.path.join(state_dir, STATE_BASE_DIR, name)
    with open(path, "rb") as fh:
        data = fh.read()
    changed = data.replace(b"p0001", b"q0001", 1)
    stored = msgspec.msgpack.decode(changed, type=state_mod.StateBase)
    assert changed != data and Group.stored(state_mod._decode_v4(stored.trees)["a"].groups[""]).paths
    with open(path, "wb") as fh:
        fh.write(changed)
    forget_state(state_dir)

    assert load_state(state_dir, "s" * 64) is None
    assert read_state(state_dir) == LocalState(store_id="s" * 64, writer="w" * 32, seq=2)


def test_an_unreadable_state_file_still_lets_the_lineage_guards_refuse_a_vanished_store(bare_live):
    """A damaged state file (it does not decode) is not a fresh machine: with the store
    unmounted the checkpoint refuses, naming the state file, instead of creating a new,
    empty store there; `journal init` starts one on purpose."""
    live = bare_live
    fill(live, 10)
    live.run("checkpoint", expect=0)
    (live.state_dir / STATE_FILE).write_bytes(b"\xc1 not msgpack")
    live.store_path.rename(live.store_path.with_name("unmounted"))
    live.append(f"{TREE}/projects/d3/f0003.json", '{"n": "more"}\n')

    ran = live.run("checkpoint", expect=1)

    assert "no journal store at" in ran.stderr and "cannot be read" in ran.stderr, ran.stderr
    assert str(live.state_dir / STATE_FILE) in ran.stderr, ran.stderr
    assert not live.store_path.exists()
    live.run("init", expect=0)
    live.run("checkpoint", expect=0)


def test_a_lost_base_still_lets_the_lineage_guards_refuse_a_vanished_store(bare_live):
    """The base gone (a partial copy of the state directory, a clean-up) and the store
    unmounted: the checkpoint refuses the vanished store, as with a whole state, instead
    of creating a new, empty store there and publishing checkpoint 1 into it."""
    live = bare_live
    fill(live, 600)
    live.run("checkpoint", expect=0)
    shutil.rmtree(live.state_dir / STATE_BASE_DIR)
    live.store_path.rename(live.store_path.with_name("unmounted"))
    live.append(f"{TREE}/projects/d3/f0003.json", '{"n": "more"}\n')

    ran = live.run("checkpoint", expect=1)

    assert "no journal store at" in ran.stderr and "checkpointed up to 1" in ran.stderr, ran.stderr
    assert not live.store_path.exists()


@pytest.mark.parametrize("swap", ["fifo", "symlink"])
def test_a_base_swapped_for_a_fifo_or_a_symlink_is_unreadable_and_never_blocks(bare_live, swap):
    """journal writes a base as a regular file and never a link: one that is a FIFO (an
    open would wait for a writer forever) or a symlink (it could name /dev/zero) is an
    unreadable local state, which the checkpoint refuses at once."""
    live = bare_live
    fill(live, 600)
    live.run("checkpoint", expect=0)
    (name,) = bases(live.state_dir)
    path = live.state_dir / STATE_BASE_DIR / name
    path.rename(live.home / "moved")
    if swap == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(live.home / "moved")
    live.append(f"{TREE}/projects/d3/f0003.json", '{"n": "more"}\n')

    ran = live.run("checkpoint", expect=1, timeout=60)

    assert "missing or unreadable" in ran.stderr, ran.stderr


def test_a_save_that_fails_after_writing_a_base_removes_that_base(tmp_path, monkeypatch):
    """A disk that fills up between the base and the state file: the save fails, the
    state on disk is the one before it, and the new base does not stay behind (each
    retry on a full disk would leave another copy of the whole state)."""
    state_dir = str(tmp_path / "state")
    before = LocalState(store_id="s" * 64, writer="w" * 32, trees={"a": tree(range(800))})
    save_state(state_dir, before)
    (first,) = bases(state_dir)
    real = state_mod.write_file_atomic

    def full(path, data, *args, **kwargs):
        if os.path.basename(path) == STATE_FILE:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, data, *args, **kwargs)

    monkeypatch.setattr(state_mod, "write_file_atomic", full)
    changed = reread(state_dir)
    changed.trees["a"].files = Files.of({p: file_state(p, 9) for p in changed.trees["a"].files})
    with pytest.raises(OSError, match="No space left"):
        save_state(state_dir, changed)

    assert bases(state_dir) == [first]
    assert reread(state_dir) == before


def test_a_save_whose_base_was_removed_behind_it_writes_a_new_one(tmp_path):
    """A process that keeps its decoded state (``journal supervise``) while someone
    removes ``state-base/``: its next save must not write changes against the base no
    reader can find any more (every later run would find no state)."""
    state_dir = str(tmp_path / "state")
    state = LocalState(store_id="s" * 64, writer="w" * 32, trees={"a": tree(range(800))})
    save_state(state_dir, state)
    shutil.rmtree(os.path.join(state_dir, STATE_BASE_DIR))
    state.seq = 4
    state.trees["a"].files = state.trees["a"].files.changed({"p0001": file_state("p0001", 11)})
    save_state(state_dir, state)

    forget_state(state_dir)
    assert load_state(state_dir, "s" * 64) == state


def test_a_save_removes_only_what_can_be_a_base(tmp_path):
    """Removing the other bases touches only names a base can have, and a name it cannot
    remove (a directory) does not fail the save, whose state file is in place."""
    state_dir = str(tmp_path / "state")
    state = LocalState(store_id="s" * 64, writer="w" * 32, trees={"a": tree(range(800))})
    save_state(state_dir, state)
    (first,) = bases(state_dir)
    folder = tmp_path / "state" / STATE_BASE_DIR
    (folder / "notes.txt").write_text("an operator's note\n")
    (folder / ("d" * 32)).mkdir()
    state.trees["a"].files = Files.of({p: file_state(p, 9) for p in state.trees["a"].files})
    save_state(state_dir, state)

    assert first not in bases(state_dir) and {"notes.txt", "d" * 32} <= set(bases(state_dir))
    assert reread(state_dir) == state


def test_a_reader_whose_base_a_save_removed_meanwhile_reads_the_new_state(tmp_path, monkeypatch):
    """A reader without the lock (the lineage guards of `journal log`) reads the state
    file, then a checkpoint writes a new base and state file and removes the old base,
    then the reader opens the base it was named: it reads the new state instead."""
    state_dir = str(tmp_path / "state")
    first = LocalState(store_id="s" * 64, writer="w" * 32, seq=1, trees={"a": tree(range(600))})
    save_state(state_dir, first)
    (old,) = bases(state_dir)
    newer = LocalState(store_id="s" * 64, writer="w" * 32, seq=2, trees={"a": tree(range(1, 601))})
    real = state_mod._read_base
    asked = []

    def read_base(directory, name, digest):
        if not asked:   # the checkpoint runs between the reads of the state file and its base
            save_state(state_dir, newer)
            forget_state(state_dir)
        asked.append(name)
        return real(directory, name, digest)

    forget_state(state_dir)
    monkeypatch.setattr(state_mod, "_read_base", read_base)
    assert read_state(state_dir) == newer
    assert asked[0] == old and bases(state_dir) == asked[1:] != [old]


# --- real SIGKILLs at every call of a checkpoint that writes a new base ---------------

#: The tripwire, with a new base written once 8 paths changed (not 512): a small tree
#: exercises every step of a checkpoint that writes one.
SMALL_BASES = TRIPWIRE.replace("from journal.cli.entry import main",
                               "import journal.local.state as _state\n_state.COMPACT_MIN = 8\n"
                               "from journal.cli.entry import main")


def kill_box(tmp_path, name: str, script) -> Live:
    """A 40-path tree checkpointed (with a base), then 10 of its paths changed: the next
    checkpoint writes a new base and removes the first."""
    live = Live(tmp_path / name / "home", tmp_path / name / "store")
    fill(live, 40)
    run_killed(live, script, "fsync:0", expect=0)
    assert len(bases(live.state_dir)) == 1
    for i in range(0, 40, 4):
        live.append(f"{TREE}/projects/d{i % 20}/f{i:04}.json", "changed\n")
    return live


def run_killed(live: Live, script, kill: str, expect: int | None = None) -> subprocess.CompletedProcess:
    """``journal checkpoint`` through ``script``, killed as ``kill`` says (``fn:0``: not killed)."""
    done = subprocess.run([sys.executable, str(script), "checkpoint"], capture_output=True, text=True, timeout=120,
                          env=clean_env({**live.env, "JOURNAL_TEST_KILL": kill}))
    assert expect is None or done.returncode == expect, done.stderr
    return done


@pytest.mark.long(short=3, full=1)
@pytest.mark.parametrize("fn", ["fsync", "replace", "unlink"])
def test_a_checkpoint_killed_at_any_call_while_it_writes_a_new_base_leaves_a_readable_state(tmp_path, fn,
                                                                                             long_size):
    """Killed at each (``--long``; else every third) fsync, rename or unlink of a
    checkpoint that writes a new base: the next checkpoint reads the state (or its
    pending manifest) and commits, and the one after it finds the state matching the
    live tree (idle), with the base the state file names in place."""
    script = tmp_path / "tripwire.py"
    script.write_text(SMALL_BASES)
    template = kill_box(tmp_path, "template", script)
    first = bases(template.state_dir)
    counted = run_killed(template, script, f"{fn}:0", expect=0)
    assert len(bases(template.state_dir)) == 1 and bases(template.state_dir) != first
    total = int(counted.stderr.rsplit("calls=", 1)[1].split()[0])
    assert total >= 3
    for n in range(1, total + 1, long_size):
        live = kill_box(tmp_path, f"kill-{fn}-{n}", script)
        killed = run_killed(live, script, f"{fn}:{n}")
        assert killed.returncode == -signal.SIGKILL, f"not killed at {fn} #{n}: {killed.stderr}"
        run_killed(live, script, "fsync:0", expect=0)
        assert "idle" in run_killed(live, script, "fsync:0", expect=0).stdout, f"killed at {fn} #{n}"
        state = load_state(str(live.state_dir), live.repo().store_id)
        forget_state(str(live.state_dir))
        live_paths = {str(p.relative_to(live.local / TREE)) for p in (live.local / TREE).rglob("*")}
        assert set(state.trees["claude"].files) == live_paths
        top = msgspec.msgpack.decode(live.state_file.read_bytes(), type=StateFile)
        assert top.base in bases(live.state_dir) and len(bases(live.state_dir)) <= 2
        shutil.rmtree(tmp_path / f"kill-{fn}-{n}")


def test_every_map_a_tree_holds_is_a_declared_table():
    """A state file holds each table of a tree as changes to its base and a base holds it
    whole; every other field is a scalar. A map added to a tree without being declared
    a table (with its ``_gone`` field and its place in a base) fails here."""
    def maps(cls) -> set[str]:
        return {f.name for f in msgspec.structs.fields(cls)
                if f.default_factory is dict or f.type is Files or getattr(f.type, "__origin__", None) is dict}

    assert maps(TreeCache) == set(state_mod._TABLES)
    assert maps(state_mod.TreeDelta) == set(state_mod._TABLES)
    assert {f"{t}_gone" for t in state_mod._TABLES} <= set(state_mod.TreeDelta.__struct_fields__)
    assert set(state_mod._TABLES) - {"files"} | {"groups"} == set(state_mod.BaseTree.__struct_fields__)
    assert not set(state_mod._SCALARS) & set(state_mod._TABLES)


def test_a_base_is_written_one_group_at_a_time_as_the_bytes_one_encoding_gives(tmp_path, monkeypatch):
    """A save that writes a base encodes each directory's group just before its bytes are
    written, never all of them first nor the whole base at once (a 200,000-path state
    held 76 MB of groups and a 109 MB buffer so): counted here, group by group. The
    bytes are exactly ``msgspec.msgpack.encode`` of the base (the format is unchanged),
    with more than 15 directories (a map's longer header) and more than one tree."""
    files = {f"d{i % 40:02}/p{i:04}": file_state(f"d{i % 40:02}/p{i:04}", i) for i in range(800)}
    state = LocalState(store_id="s" * 64, writer="w" * 32,
                       trees={"a": TreeCache(root=ref(1), files=files, pages={f"{k:064x}": ref(k) for k in range(3)}),
                              "b": tree(range(20))})
    made, written, pieces = [], [], []
    real_record, real_write = Group.record, state_mod.write_file_atomic
    monkeypatch.setattr(Group, "record", lambda self: made.append(self) or real_record(self))

    def write(path, data, *args, **kwargs):
        if STATE_BASE_DIR in path:
            for piece in data:
                written.append(len(made))   # groups encoded when this piece went out
                pieces.append(piece)
            data = b"".join(pieces)
        return real_write(path, data, *args, **kwargs)

    monkeypatch.setattr(state_mod, "write_file_atomic", write)
    save_state(str(tmp_path), state)

    groups = 40 + 1
    assert len(made) == groups
    assert max(n - i for i, n in enumerate(written)) <= 1, "a group is encoded only as the one before it is written"
    (base,) = bases(str(tmp_path))
    on_disk = (tmp_path / STATE_BASE_DIR / base).read_bytes()
    whole = msgspec.msgpack.encode(state_mod._BaseOut(token=base, trees={
        name: state_mod.BaseTree(pages=t.pages, page_keys=t.page_keys, bases=t.bases,
                                 groups={d: real_record(g) for d, g in t.files.groups.items()})
        for name, t in state.trees.items()}))
    assert on_disk == b"".join(pieces) == whole
    assert reread(str(tmp_path)) == state

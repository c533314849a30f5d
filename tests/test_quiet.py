"""The quiet snapshot (journal/local/quiet.py): an idle checkpoint proven by re-listing and
re-statting, never by trusting a clock; any change, however quick, goes to the full walk."""

from __future__ import annotations

import fcntl
import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from conftest import clean_env
from helpers.trees import random_change
from journal.local import quiet
from journal.checkpoint.run import config_key
from journal.local.state import load_state, save_state

ROLLOUTS = Path("codex-home/sessions/2026/02/23")


def quiet_claims_idle(live, fork: bool = False) -> bool:
    cfg = live.cfg
    return quiet.idle_result(cfg.state_dir, str(live.state_file), config_key=config_key(cfg), fork=fork) is not None


def split_always(monkeypatch) -> None:
    """The console path's check split over two processes, even on a small tree."""
    monkeypatch.setattr(quiet, "SPLIT_MIN_NAMES", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})


@pytest.fixture
def split(monkeypatch):
    split_always(monkeypatch)


def first_rollout(live) -> Path:
    return sorted((live.local / ROLLOUTS).iterdir())[0]


def launch(live, *args: str) -> tuple[int, str, bool]:
    """Run the console entry point in a child; (exit status, stdout, whether the full command
    ran: click, or the checkpoint's library, which a busy plain checkpoint runs without click)."""
    code = ("import sys; from journal.cli import launch; sys.argv = ['journal', *sys.argv[1:]]\n"
            "try:\n    rc = launch.main()\nexcept SystemExit as e:\n    rc = e.code\n"
            "full = 'click' in sys.modules or 'journal.checkpoint.run' in sys.modules\n"
            "print('CLICK' if full else 'NOCLICK', file=sys.stderr); sys.exit(rc or 0)")
    proc = subprocess.run([sys.executable, "-c", code, *args], env=clean_env(live.env), capture_output=True, text=True,
                          timeout=60, cwd=live.home)
    return proc.returncode, proc.stdout, "NOCLICK" not in proc.stderr


def test_idle_cli_checkpoint_is_answered_without_importing_the_cli(live):
    assert launch(live, "checkpoint")[0] == 0  # the first checkpoint: full path, saves the snapshot
    rc, out, imported_cli = launch(live, "checkpoint", "--json")
    assert rc == 0 and not imported_cli
    fast = json.loads(out)

    (live.local / ".journal" / quiet.QUIET_FILE).unlink()
    rc, out, imported_cli = launch(live, "checkpoint", "--json")
    assert rc == 0 and imported_cli
    slow = json.loads(out)

    assert fast["seq"] is None and fast["objects_uploaded"] == 0
    fast.pop("seconds"), slow.pop("seconds")
    assert fast == slow
    rc, out, imported_cli = launch(live, "checkpoint")
    assert (rc, imported_cli) == (0, False) and out.startswith("idle: nothing changed in 3 trees")


def sqlite_tree(live) -> sqlite3.Connection:
    home = live.local / "hermes"
    home.mkdir()
    con = sqlite3.connect(home / "state.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, body TEXT)")
    con.execute("INSERT INTO m (body) VALUES ('first')")
    return con


def _append(live):
    with open(first_rollout(live), "ab") as fh:
        fh.write(b'{"type":"event_msg","payload":{"n":1}}\n')


def _same_size_rewrite(live):
    path = live.local / "codex-home" / "config.toml"
    data = path.read_bytes()
    path.write_bytes(data[:-1] + (b"#" if data[-1:] != b"#" else b"!"))


def _new_file(live):
    (live.local / ROLLOUTS / "rollout-new.jsonl").write_bytes(b'{"type":"x"}\n')


def _delete(live):
    (live.local / "codex-home" / "config.toml").unlink()  # a transcript's deletion is held back


def _rename(live):
    path = first_rollout(live)
    path.rename(path.with_name("renamed-" + path.name))


def _file_to_dir(live):
    path = live.local / "codex-home" / "config.toml"
    path.unlink()
    path.mkdir()


def _chmod(live):
    path = live.local / "codex-home" / "config.toml"
    path.chmod(0o600 if path.stat().st_mode & 0o077 else 0o644)


def _file_to_symlink(live):
    path = live.local / "codex-home" / "config.toml"
    path.unlink()
    path.symlink_to("elsewhere.toml")


def _new_empty_dir(live):
    (live.local / ROLLOUTS / "sub").mkdir()


def _new_harness(live):
    live.add_gemini_tree()


MUTATIONS = [_append, _same_size_rewrite, _new_file, _delete, _rename, _file_to_dir, _chmod,
             _file_to_symlink, _new_empty_dir, _new_harness]


@pytest.mark.parametrize("forked", [False, True], ids=["one-process", "forked"])
@pytest.mark.parametrize("mutate", MUTATIONS, ids=lambda f: f.__name__.strip("_"))
def test_a_change_made_right_after_a_checkpoint_is_never_taken_for_idle(live, mutate, forked, monkeypatch):
    if forked:
        split_always(monkeypatch)
    (live.local / "codex-home" / "config.toml").write_text('model = "o3"\n')
    live.checkpoint()
    assert quiet_claims_idle(live, fork=forked)

    mutate(live)  # within the same clock tick as the walk, as often as not

    assert not quiet_claims_idle(live, fork=forked)
    assert live.checkpoint().seq == 2
    assert quiet_claims_idle(live, fork=forked)


def _part_rows(live, i: int) -> list:
    snap = quiet._read(quiet.quiet_path(live.cfg.state_dir))
    return snap.part(i)


@pytest.mark.parametrize("part", [0, 1], ids=["parent's-part", "child's-part"])
def test_the_split_check_sees_a_change_in_either_part(live, split, part):
    live.checkpoint()
    assert quiet_claims_idle(live, fork=True)
    rows = _part_rows(live, part)
    assert rows and all(rows for rows in (_part_rows(live, 0), _part_rows(live, 1)))
    path, names, sigs, _others, _tree = next(row for row in rows if any(sigs for sigs in row[2]))
    name = next(n for n, sig in zip(names, sigs) if sig is not None and sig[0] > 0)
    target = Path(path) / name
    data = target.read_bytes()
    target.write_bytes(data[:-1] + (b"x" if data[-1:] != b"x" else b"y"))  # same size, new mtime
    os.utime(target, ns=(sigs[names.index(name)][1] + 1,) * 2)

    assert not quiet_claims_idle(live, fork=True)
    assert not quiet_claims_idle(live)  # and the one-process check agrees


def kill_forked_children(monkeypatch):
    """Make ``quiet.unchanged`` SIGKILL itself in any forked child; returns the real one."""
    parent = os.getpid()
    real = quiet.unchanged

    def dies_in_the_child(rows):
        if os.getpid() != parent:
            os.kill(os.getpid(), 9)
        return real(rows)

    monkeypatch.setattr(quiet, "unchanged", dies_in_the_child)
    return real


def test_a_child_that_dies_is_not_taken_for_idle(live, split, monkeypatch):
    live.checkpoint()
    real = kill_forked_children(monkeypatch)
    assert not quiet_claims_idle(live, fork=True)
    monkeypatch.setattr(quiet, "unchanged", real)
    assert quiet_claims_idle(live, fork=True)


def test_the_parts_hold_about_half_the_names_each(live):
    for i in range(40):
        (live.local / "codex-home" / "sessions" / f"extra-{i}.jsonl").write_text("{}\n")
    live.checkpoint()
    sizes = [sum(len(row[1]) for row in _part_rows(live, i)) for i in (0, 1)]
    biggest_dir = max(len(row[1]) for i in (0, 1) for row in _part_rows(live, i))
    assert abs(sizes[0] - sizes[1]) <= biggest_dir


def test_a_sqlite_commit_is_seen(live):
    con = sqlite_tree(live)
    assert live.checkpoint().seq == 1 and quiet_claims_idle(live)

    con.execute("INSERT INTO m (body) VALUES ('second')")

    assert not quiet_claims_idle(live)
    assert live.checkpoint().seq == 2
    assert quiet_claims_idle(live)
    con.close()


def test_excluded_paths_do_not_matter_but_new_names_are_rechecked(live):
    live.checkpoint()
    cache = live.local / "codex-home" / "cache"
    cache.mkdir()  # a new name in a walked directory: not proven idle, the full walk decides
    assert not quiet_claims_idle(live)
    assert live.checkpoint().seq is None  # the preset excludes cache/: nothing to publish
    assert quiet_claims_idle(live)

    (cache / "blob.bin").write_bytes(b"x" * 100)  # inside an excluded directory: never looked at
    assert quiet_claims_idle(live)


def test_the_snapshot_holds_only_with_the_state_it_was_written_after(live):
    live.checkpoint()
    cfg = live.cfg
    state = load_state(cfg.state_dir, live.repo().store_id)
    save_state(cfg.state_dir, state)  # same content, a new file: a restore or takeover does this

    assert not quiet_claims_idle(live)
    assert live.checkpoint().seq is None
    assert quiet_claims_idle(live)


def test_an_idle_tick_over_an_unmounted_store_is_not_answered_idle(live):
    """Nothing changed, but the store's volume went away: the console tick must not say
    "idle" (exit 0) over it; the full command refuses the vanished store."""
    live.checkpoint()
    live.run("checkpoint", expect=0)   # idle: answered from the snapshot
    live.store_path.rename(live.store_path.with_name("unmounted"))

    ran = live.run("checkpoint", expect=1)

    assert "no journal store at" in ran.stderr, ran.stderr
    assert "idle" not in ran.stdout
    assert not live.store_path.exists()


def test_another_configuration_does_not_use_the_snapshot(live):
    live.checkpoint()
    cfg = live.cfg
    other = quiet.idle_result(cfg.state_dir, str(live.state_file), config_key="0" * 64)
    assert other is None
    assert quiet.idle_result(cfg.state_dir, str(live.state_file), inputs="not-these-inputs") is None


def test_a_checkpoint_with_warnings_leaves_no_snapshot(live):
    live.checkpoint()
    bad = live.local / "codex-home" / os.fsdecode(b"bad-\xff-name")
    bad.write_bytes(b"x")

    live.checkpoint()

    assert any("not valid UTF-8" in w for w in live.warnings)
    assert not (live.local / ".journal" / quiet.QUIET_FILE).exists()
    live.checkpoint()  # warns again: the full walk runs every time
    assert any("not valid UTF-8" in w for w in live.warnings)


def test_a_corrupt_snapshot_is_ignored_and_replaced(live):
    live.checkpoint()
    path = live.local / ".journal" / quiet.QUIET_FILE
    path.write_bytes(path.read_bytes()[:50])

    assert not quiet_claims_idle(live)
    assert live.checkpoint().seq is None
    assert quiet_claims_idle(live)


def test_a_config_file_sends_the_launcher_to_the_full_command(live):
    (live.home / ".config" / "journal").mkdir(parents=True)
    (live.home / ".config" / "journal" / "config.toml").write_text("interval = 30\n")
    assert launch(live, "checkpoint")[0] == 0
    rc, out, imported_cli = launch(live, "checkpoint")
    assert (rc, imported_cli) == (0, True) and out.startswith("idle:")

    live.env["JOURNAL_STATE_DIR"] = str(live.local / ".journal")  # the file cannot move it now
    assert launch(live, "checkpoint")[0] == 0
    rc, out, imported_cli = launch(live, "checkpoint")
    assert (rc, imported_cli) == (0, False) and out.startswith("idle:")

    (live.home / ".config" / "journal" / "config.toml").write_text("interval = 20\n")
    rc, out, imported_cli = launch(live, "checkpoint")
    assert (rc, imported_cli) == (0, True)


def test_a_busy_lock_is_reported_by_the_full_command(live):
    assert launch(live, "checkpoint")[0] == 0
    fd = os.open(live.local / ".journal" / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        proc = live.run("checkpoint")
    finally:
        os.close(fd)
    assert proc.returncode == 1 and "another journal operation holds" in proc.stderr


def test_unknown_options_go_to_the_full_command(live):
    assert launch(live, "checkpoint")[0] == 0
    assert launch(live, "checkpoint", "--wait")[2]
    rc, _, imported_cli = launch(live, "checkpoint", "--no-such-option")
    assert rc == 2 and imported_cli


def test_random_changes_right_after_checkpoints_agree_with_the_full_walk(bare_live):
    """Whenever the snapshot claims idle, a full checkpoint (snapshot removed) finds nothing."""
    live = bare_live
    root = live.local / "agent-state" / "claude" / "projects"
    root.mkdir(parents=True)
    rng = random.Random(7)
    claims = 0
    live.checkpoint()
    for step in range(150):
        op = random_change(rng, root, step, ["append", "create", "delete", "rename", "mkdir", "chmod", "touch",
                                             "none", "none"])
        if quiet_claims_idle(live):
            claims += 1
            quiet.discard(live.cfg.state_dir)
            result = live.checkpoint()
            assert result.seq is None and not any(t.changed or t.deleted for t in result.trees), (step, op)
        else:
            live.checkpoint()
    assert claims >= 10  # the no-op steps were proven idle


# --- A busy tick takes the directories the snapshot found unchanged as they were ---

def _full_walk_finds_nothing(live) -> bool:
    """A checkpoint without the snapshot (so a full walk of every directory) finds no change."""
    quiet.discard(live.cfg.state_dir)
    result = live.checkpoint()
    return result.seq is None and not any(t.changed or t.deleted for t in result.trees)


def _projects(live, dirs: int, files: int) -> Path:
    root = live.local / "agent-state" / "claude" / "projects"
    for d in range(dirs):
        for f in range(files):
            path = root / f"-home-p{d:02d}" / f"s{f}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b'{"d": %d, "f": %d}\n' % (d, f))
    return root


def test_a_busy_tick_lists_only_the_directories_that_changed(bare_live, monkeypatch):
    live = bare_live
    root = _projects(live, dirs=20, files=5)
    live.checkpoint()
    live.checkpoint()  # a clean checkpoint: the snapshot holds every directory
    with open(root / "-home-p07" / "s3.jsonl", "ab") as fh:
        fh.write(b'{"more": 1}\n')

    from journal.local import walk
    listed = []
    real_scandir = os.scandir
    monkeypatch.setattr(walk.os, "scandir", lambda path: listed.append(path) or real_scandir(path))
    result = live.checkpoint()
    monkeypatch.undo()

    assert result.seq is not None and sum(t.changed for t in result.trees) == 1
    assert listed == [str(root / "-home-p07")]  # 22 directories in the tree; one listed again
    assert quiet_claims_idle(live)
    assert _full_walk_finds_nothing(live)
    entries = live.entries("claude")
    assert sum(1 for p in entries if p.endswith(".jsonl")) == 100


def _console_check(live) -> bool:
    """The console path's check (``launch._quiet_checkpoint``), in this process: idle or not."""
    cfg = live.cfg
    return quiet.idle_result(cfg.state_dir, str(live.state_file), inputs=cfg.inputs, fork=True) is not None


def _dir_fd_lstats(monkeypatch) -> list[str]:
    """Count the check's ``lstat`` calls (it ``lstat``s each name relative to its directory)."""
    calls: list[str] = []
    real = os.lstat

    def counting(path, *args, **kwargs):
        if kwargs.get("dir_fd") is not None:
            calls.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", counting)
    return calls


@pytest.mark.parametrize("forked", [False, True], ids=["one-process", "split"])
def test_a_busy_console_tick_checks_each_name_once(bare_live, monkeypatch, forked):
    live = bare_live
    root = _projects(live, dirs=20, files=5)
    live.checkpoint()
    live.checkpoint()
    names = sum(len(row.names) for row in quiet.load(live.cfg.state_dir).dirs)
    with open(root / "-home-p07" / "s3.jsonl", "ab") as fh:
        fh.write(b'{"more": 1}\n')
    if forked:
        split_always(monkeypatch)
    lstats = _dir_fd_lstats(monkeypatch)

    assert not _console_check(live)
    checked = len(lstats)
    result = live.checkpoint()  # the full command, as the console path goes on to run it

    assert 0 < checked < names if forked else checked == names  # split: the child checks the other part
    assert len(lstats) == checked  # the checkpoint took the verdicts: no name checked again
    assert result.seq is not None and sum(t.changed for t in result.trees) == 1
    monkeypatch.undo()
    assert _full_walk_finds_nothing(live)


def test_verdicts_of_a_snapshot_replaced_since_are_not_taken(bare_live, monkeypatch):
    live = bare_live
    root = _projects(live, dirs=4, files=3)
    live.checkpoint()
    live.checkpoint()
    with open(root / "-home-p01" / "s0.jsonl", "ab") as fh:
        fh.write(b'{"more": 1}\n')
    assert not _console_check(live)  # -home-p02 checked unchanged, and the verdict kept
    snapshot = Path(quiet.quiet_path(live.cfg.state_dir))
    copy = snapshot.with_name("copy")
    copy.write_bytes(snapshot.read_bytes())
    os.replace(copy, snapshot)  # as another process saves a snapshot: a new file
    with open(root / "-home-p02" / "s2.jsonl", "ab") as fh:
        fh.write(b'{"more": 2}\n')
    lstats = _dir_fd_lstats(monkeypatch)

    result = live.checkpoint()

    assert lstats  # the new file's rows were checked here
    assert result.seq is not None and sum(t.changed for t in result.trees) == 2
    monkeypatch.undo()
    assert _full_walk_finds_nothing(live)


def test_a_directory_whose_row_the_cache_does_not_hold_is_walked(bare_live):
    from journal.checkpoint.scan import _same_dirs
    from journal.local.state import read_state

    live = bare_live
    _projects(live, dirs=3, files=2)
    live.checkpoint()
    live.checkpoint()
    proven, same = quiet.same_rows(live.cfg.state_dir, str(live.state_file), config_key=config_key(live.cfg))
    tree = next(t for t in live.cfg.active_trees() if t.name == "claude")
    cache = read_state(live.cfg.state_dir).trees["claude"]
    assert proven is not None and "projects/-home-p01" in _same_dirs(tree, cache, same, False)[0]
    rows, whole = _same_dirs(tree, cache, same, True)  # the state the snapshot was written after
    assert "projects/-home-p01" in rows and whole["projects/-home-p01"] is cache.files.groups["projects/-home-p01"]

    file, subdir = cache.files["projects/-home-p01/s1.jsonl"], cache.files["projects/-home-p01"]
    cache.files = cache.files.changed({
        file.entry.path: msgspec.structs.replace(file, sig=(file.sig[0] + 1, *file.sig[1:])),  # a file's signature
        subdir.entry.path: msgspec.structs.replace(subdir, sig=(subdir.sig[0], subdir.sig[1] + 1, *subdir.sig[2:])),
    })  # ... and a directory's value differ from the rows'
    taken, whole = _same_dirs(tree, cache, same, False)

    assert not whole
    assert "projects/-home-p01" not in taken  # its row holds s1.jsonl with another signature
    assert "projects" not in taken  # its row holds -home-p01 with another value
    assert "projects/-home-p00" in taken
    cache.files = cache.files.changed({}, ["projects/-home-p00/s0.jsonl"])
    assert "projects/-home-p00" not in _same_dirs(tree, cache, same, False)[0]
    # trusted, a group that holds fewer paths than its row includes is looked into, and walked
    assert "projects/-home-p00" not in _same_dirs(tree, cache, same, True)[0]


def test_a_row_that_does_not_match_the_cache_exactly_is_walked():
    """A directory is taken as it was only when its row has one signature per name and
    the cache holds each with exactly that signature (design §10); anything else (a row
    a hostile or older writer left) means walking it."""
    from journal.checkpoint.scan import _cache_holds
    from journal.format.model import Entry
    from journal.local.state import FileState, Files

    sig = (5, 10, 7, 0o100644)
    files = Files.of({"d/a.jsonl": FileState(sig, Entry(path="d/a.jsonl", kind="jsonl", mode=0o644)),
                      "d/state.db": FileState(None, Entry(path="d/state.db", kind="sqlite", mode=0o644))})
    assert _cache_holds("d", quiet.Row("/x/d", ["a.jsonl"], [sig], [], "t"), files)
    assert not _cache_holds("d", quiet.Row("/x/d", ["a.jsonl", "b"], [sig], [], "t"), files)  # a name unsigned
    assert not _cache_holds("d", quiet.Row("/x/d", ["a.jsonl"], [list(sig)], [], "t"), files)  # not a tuple
    # the cache marked the database "re-read it": no row value, even None, stands for it
    assert not _cache_holds("d", quiet.Row("/x/d", ["state.db"], [None], [(0, quiet.DB, None)], "t"), files)


def test_random_changes_with_directories_taken_from_the_snapshot_miss_nothing(bare_live):
    """Every busy tick that takes unchanged directories from the snapshot records what a
    full walk finds: a full walk right after it has nothing to add."""
    live = bare_live
    root = _projects(live, dirs=6, files=3)
    rng = random.Random(11)
    live.checkpoint()
    for step in range(60):
        op = random_change(rng, root, step, ["append", "create", "delete", "rename", "mkdir", "rmdir", "chmod",
                                             "touch"])
        live.checkpoint()  # takes every unchanged directory from the snapshot
        assert _full_walk_finds_nothing(live), (step, op)


def nested_trees(live, wide_exclude: str = "", narrow_exclude: str = "") -> None:
    """A config with tree "wide" at shared/ and tree "narrow" at shared/sub/ inside it."""
    (live.home / ".config" / "journal").mkdir(parents=True)
    (live.home / ".config" / "journal" / "config.toml").write_text(
        'presets = []\n'
        f'[[trees]]\nname = "wide"\npath = "shared"\n{wide_exclude}\n'
        f'[[trees]]\nname = "narrow"\npath = "shared/sub"\n{narrow_exclude}\n')


def test_a_directory_two_trees_walk_is_never_taken_from_the_other_trees_row(bare_live):
    live = bare_live
    nested_trees(live, wide_exclude='exclude = ["*.log"]')
    sub = live.local / "shared" / "sub"
    sub.mkdir(parents=True)
    (sub / "run.log").write_text("line 1\n")
    (sub / "notes.txt").write_text("notes\n")
    live.checkpoint()
    live.checkpoint()
    (live.local / "shared" / "top.txt").write_text("a change elsewhere\n")  # a busy tick

    live.checkpoint()

    assert sorted(live.entries("narrow")) == ["notes.txt", "run.log"]
    assert sorted(live.entries("wide")) == ["sub", "sub/notes.txt", "top.txt"]
    assert _full_walk_finds_nothing(live)


def test_a_busy_tick_keeps_databases_links_and_subdirectories_of_unchanged_directories(live):
    con = sqlite_tree(live)  # hermes/state.db, WAL mode, a writer still open
    (live.local / "hermes" / "memories").mkdir()
    (live.local / "hermes" / "memories" / "a.md").write_text("remember\n")
    (live.local / "hermes" / "latest").symlink_to("memories/a.md")
    live.checkpoint()
    live.checkpoint()
    before = {tree: sorted(live.entries(tree)) for tree in ("hermes", "codex")}
    _append(live)  # only the codex tree changes

    result = live.checkpoint()

    assert [t.name for t in result.trees if t.changed] == ["codex"]
    assert sorted(live.entries("hermes")) == before["hermes"]
    assert {"state.db", "memories", "memories/a.md", "latest"} <= set(before["hermes"])
    assert _full_walk_finds_nothing(live)
    con.close()


# --- In-process (journal supervise): the row checks forked when the process runs one thread ---

@pytest.fixture
def forks(monkeypatch):
    """The in-process check split with a child even on a small tree and under pytest
    (whose idle threads the child never touches); returns the list of forks made."""
    split_always(monkeypatch)
    monkeypatch.setattr(quiet, "_one_thread", lambda: True)
    made = []
    real_fork = os.fork

    def counting_fork():
        pid = real_fork()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(quiet.os, "fork", counting_fork)
    return made


def test_in_process_forked_checks_agree_with_the_full_walk(bare_live, forks):
    live = bare_live
    root = _projects(live, dirs=6, files=3)
    rng = random.Random(13)
    live.checkpoint()
    idle = 0
    for step in range(40):
        op = random_change(rng, root, step, ["append", "create", "delete", "rename", "mkdir", "chmod", "none"])
        result = live.checkpoint()
        idle += result.seq is None
        assert _full_walk_finds_nothing(live), (step, op)
    assert len(forks) >= 40 and idle >= 3


def test_in_process_a_child_that_dies_leaves_its_rows_to_the_walk(bare_live, forks, monkeypatch):
    live = bare_live
    root = _projects(live, dirs=6, files=3)
    live.checkpoint()
    live.checkpoint()
    real = kill_forked_children(monkeypatch)
    proven, same = quiet.same_rows(live.cfg.state_dir, str(live.state_file), config_key=config_key(live.cfg),
                                   fork=True)
    assert forks and proven is None  # the child's half is unanswered: not idle
    rows = quiet.load(live.cfg.state_dir).dirs
    assert len(same) == len(rows[0::2])  # the parent's half, all unchanged
    with open(root / "-home-p02" / "s1.jsonl", "ab") as fh:
        fh.write(b'{"more": 1}\n')
    assert live.checkpoint().seq is not None
    monkeypatch.setattr(quiet, "unchanged", real)
    assert _full_walk_finds_nothing(live)


def test_one_thread_is_told_apart_from_many():
    code = ("import threading, time\nfrom journal.local import quiet\nalone = quiet._one_thread()\n"
            "stop = threading.Event(); t = threading.Thread(target=stop.wait); t.start()\n"
            "crowded = quiet._one_thread(); stop.set(); t.join()\nprint(alone, crowded)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_an_unreadable_directory_is_reported_on_every_tick_never_answered_idle(live):
    """While a directory cannot be read (mode 000, as an unprivileged user) no snapshot
    is saved: every tick walks, warns and commits what it can; once readable again,
    what changed in it meanwhile is published."""
    secret = live.local / "agent-state" / "claude" / "secret"
    secret.mkdir()
    (secret / "a.md").write_text("a\n")
    snapshot = live.local / ".journal" / quiet.QUIET_FILE
    assert live.run("checkpoint", unprivileged=True).returncode == 0 and snapshot.exists()
    secret.chmod(0)
    try:
        for _ in range(2):
            done = live.run("checkpoint", unprivileged=True)
            assert done.returncode == 0 and f"cannot read {secret}" in done.stderr, done.stderr
            assert not snapshot.exists()
        (secret / "b.md").write_text("written while journal could not look\n")
    finally:
        secret.chmod(0o755)

    done = live.run("checkpoint", unprivileged=True)

    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert snapshot.exists()
    assert {"secret/a.md", "secret/b.md"} <= live.entries("claude").keys()


def test_the_snapshot_lists_the_directories_changed_last_first(bare_live):
    """A busy tick's check stops at the first changed directory, so the snapshot lists
    the directories the last tick walked first (newest change first), then those it
    took from the snapshot before, in that snapshot's order."""
    base = bare_live.local / "codex-home" / "memories"
    for d in range(6):
        (base / f"d{d}").mkdir(parents=True)
        for f in range(3):
            (base / f"d{d}" / f"n{f}.md").write_text(f"{d}/{f}\n")
            os.utime(base / f"d{d}" / f"n{f}.md", ns=(10 ** 18 + d * 10 ** 9, 10 ** 18 + d * 10 ** 9))
    bare_live.checkpoint()
    first = [row.abs_dir for row in quiet.load(str(bare_live.state_dir)).dirs]
    assert first[0] == str(base / "d5")
    for tick, d in enumerate((2, 4), 1):
        with open(base / f"d{d}" / "n1.md", "a") as fh:
            fh.write("more\n")
        bare_live.checkpoint()
        rows = [row.abs_dir for row in quiet.load(str(bare_live.state_dir)).dirs]
        assert rows[:tick] == [str(base / f"d{n}") for n in (4, 2)[-tick:]], rows
        assert sorted(rows) == sorted(first)

"""Restore against what else is on the machine (found by an adversarial review):
live databases another process is using, a file where a directory belongs, a tree on
its own filesystem, a dry run, and a process writing a path while the restore runs.
Real SQLite, real processes and real mounts; one fault is injected in-process where
only its timing could not be had otherwise."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from journal.restore import writer as tree_writer
from conftest import clean_env, run_journal, wait_for
from helpers.cli import drop_dac_override


def _db_rows(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT count(*) FROM t").fetchone()[0]
    finally:
        con.close()


def _make_db(path: Path, rows: int, wal: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t(x INTEGER PRIMARY KEY, y)")
    con.execute("CREATE INDEX ty ON t(y)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, os.urandom(60).hex()) for i in range(rows)])
    con.commit()
    con.close()


def test_a_valid_local_db_with_a_hot_rollback_journal_is_kept(make_live):
    """The agent committed after the checkpoint, then died in the middle of a later
    transaction: the db plus its -journal is valid and newer than the stored copy."""
    a = make_live("a", fixtures=False)
    db = a.local / "opencode-share" / "opencode.db"
    _make_db(db, 20000)
    assert a.checkpoint().seq == 1
    writer = ("import os, signal, sqlite3, sys\n"
              "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
              "c.execute('PRAGMA cache_size=5')\n"
              "c.execute('INSERT INTO t SELECT x + 100000, y FROM t WHERE x < 1000')\n"   # committed
              "c.execute('BEGIN')\n"
              "c.execute('UPDATE t SET y = hex(randomblob(60))')\n"                       # spills pages
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", writer, str(db)])
    assert proc.returncode == -signal.SIGKILL
    assert Path(str(db) + "-journal").exists()      # hot: the writer died mid-transaction
    r = a.restore()
    assert r.complete
    assert not list((a.local / ".journal").glob("invalid/**/opencode.db")), a.warnings
    assert _db_rows(db) == 21000                    # the local commit survives (SQLite rolls back the rest)


def test_a_db_a_writer_keeps_committing_to_is_never_moved_aside(make_live):
    a = make_live("a", fixtures=False)
    db = a.local / "opencode-share" / "opencode.db"
    _make_db(db, 30000, wal=True)
    assert a.checkpoint().seq == 1
    writer = subprocess.Popen([sys.executable, "-c",
                               "import os, sqlite3, sys\n"
                               "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                               "c.execute('PRAGMA wal_autocheckpoint=20')\n"
                               "i = 10**6\n"
                               "while True:\n"
                               "    c.execute('BEGIN')\n"
                               "    for _ in range(200):\n"
                               "        c.execute('INSERT INTO t VALUES (?, ?)', (i, os.urandom(60).hex())); i += 1\n"
                               "    c.execute('COMMIT')\n", str(db)])
    try:
        wait_for(lambda: writer.poll() is None and _db_rows(db) > 30000, 60, "the writer's first commit")
        for _ in range(8):
            r = a.restore()
            assert r.complete
            assert not any("is not valid" in w for w in a.warnings), a.warnings
    finally:
        writer.kill()
        writer.wait()
    assert _db_rows(db) > 30000


def test_a_file_where_the_store_has_a_directory_is_a_conflict_of_its_tree_only(live, make_live):
    assert live.checkpoint().seq == 1
    b = make_live("b", fixtures=False)
    (b.local / "codex-home").mkdir()
    blocker = b.local / "oc-home" / ".openclaw" / "agents" / "main"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a local note")
    r = b.restore()
    assert r.complete, [(t.name, t.error, t.lost) for t in r.trees]
    assert blocker.read_text() == "a local note"
    for name in ("codex-home", "agent-state"):
        assert _files_under(live.local / name) == _files_under(b.local / name)


def _files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_dry_run_creates_nothing_in_a_tree_that_holds_a_live_db(make_live):
    a = make_live("a", fixtures=False)
    db = a.local / "opencode-share" / "opencode.db"
    _make_db(db, 500)
    assert a.checkpoint().seq == 1
    before = sorted(p.name for p in db.parent.iterdir())
    proc = run_journal("restore", "--dry-run", env=a.env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in db.parent.iterdir()) == before


def test_the_check_directory_is_made_only_for_a_local_database_and_removed_after(make_live, monkeypatch):
    """A restore checks a local database through a private copy in a directory of its
    own (mode 0700) under the state's temp directory, made when the first database needs
    it and removed with what it holds when the tree is done; a restore into a container
    with no local database makes none (nor imports ``tempfile`` for it)."""
    from journal.restore import entry as restore_entry

    made: list[tuple[str, int]] = []
    path = restore_entry.CheckDir.path

    def recording(self):
        was = self._path
        got = path(self)
        if was is None:
            made.append((got, stat.S_IMODE(os.stat(got).st_mode)))
        return got

    monkeypatch.setattr(restore_entry.CheckDir, "path", recording)
    a = make_live("a", fixtures=False)
    _make_db(a.local / "opencode-share" / "opencode.db", 300)
    assert a.checkpoint().seq == 1

    b = make_live("b", fixtures=False)
    assert b.restore().complete and made == []          # nothing local: nothing to check
    local = b.local / "opencode-share" / "opencode.db"
    with sqlite3.connect(local) as con:                 # a newer local database: checked, and kept
        con.execute("INSERT INTO t VALUES (100000, 'local')")
    con.close()
    r = b.restore()
    assert r.complete, [(t.name, t.error, t.lost) for t in r.trees]
    with sqlite3.connect(local) as con:
        assert con.execute("SELECT y FROM t WHERE x = 100000").fetchone() == ("local",)
    con.close()
    assert len(made) == 1 and made[0][1] == 0o700
    assert os.path.dirname(made[0][0]).startswith(str(b.cfg.state_dir)) and not os.path.exists(made[0][0])


def test_a_check_directory_that_cannot_be_made_is_a_local_write_error_not_an_unreadable_database(tmp_path):
    """When the directory to check local databases in cannot be made (its parent is a
    file here; a full disk alike), restore says so, naming it, as journal's own write
    error: the database is never taken for one that cannot be read, nothing is left
    recorded, and cleaning up after it is quiet."""
    from journal.local.errors import LocalWriteError
    from journal.restore.entry import CheckDir

    (tmp_path / "state-tmp").write_text("a file where the directory belongs")
    check = CheckDir(str(tmp_path / "state-tmp" / "tmp"))
    with pytest.raises(LocalWriteError, match="cannot make the directory local databases are checked in") as err:
        check.path()
    assert str(tmp_path / "state-tmp") in str(err.value)
    check.cleanup()   # nothing was made: nothing to remove, no error
    (tmp_path / "state-tmp").unlink()
    made = check.path()   # made once it can be
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    shutil.rmtree(made)   # removed meanwhile: cleanup is still quiet
    check.cleanup()


def _can_mount() -> bool:
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"journal-mount-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        return subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)],
                              capture_output=True).returncode == 0
    except OSError:
        return False
    finally:
        probe.rmdir()


@pytest.mark.skipif(shutil.which("unshare") is None or not _can_mount(), reason="needs unshare -m and mount")
def test_an_invalid_db_on_another_filesystem_than_the_state_dir_is_moved_aside(make_live, tmp_path):
    a = make_live("a", fixtures=False)
    db = a.local / "opencode-share" / "opencode.db"
    _make_db(db, 1000)
    assert a.checkpoint().seq == 1
    b = make_live("b", fixtures=False)
    tree = b.local / "opencode-share"
    tree.mkdir(parents=True)
    bad = os.urandom(8192)
    (tmp_path / "bad.db").write_bytes(bad)
    script = (f"mount -t tmpfs -o size=64m tmpfs {tree} && cp {tmp_path / 'bad.db'} {tree}/opencode.db && "
              f"{sys.executable} -m journal restore; echo rc=$?; "
              f"{sys.executable} -c \"import sqlite3; print('rows', sqlite3.connect('{tree}/opencode.db')"
              f".execute('SELECT count(*) FROM t').fetchone()[0])\"")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], env=clean_env(b.env), capture_output=True, text=True,
                          timeout=60)
    assert "rc=0" in proc.stdout and "rows 1000" in proc.stdout, proc.stdout + proc.stderr
    moved = list((b.local / ".journal").glob("invalid/*/opencode/opencode.db"))
    assert len(moved) == 1 and moved[0].read_bytes() == bad


def test_a_path_created_or_appended_while_the_restore_runs_is_kept(live, make_live, monkeypatch):
    """An agent started early writes a transcript after restore decided to write it
    (absent) or replace it (older): the agent's file stays, and the restore says so."""
    assert live.checkpoint().seq == 1
    b = make_live("b", fixtures=False)
    stored = {str(p.relative_to(live.local)): p for p in (live.local / "codex-home").rglob("*.jsonl")}
    created, replaced = sorted(stored)[:2]
    (b.local / replaced).parent.mkdir(parents=True, exist_ok=True)
    (b.local / replaced).write_bytes(b"old\n")
    os.utime(b.local / replaced, ns=(1, 1))            # older than the stored copy: planned as a replace
    agent_line = b'{"type":"agent","note":"written while the restore ran"}\n'
    real = tree_writer.stage_group

    def stage_then_agent_writes(root, tmp_dir, entries, reader, *args):
        out = real(root, tmp_dir, entries, reader, *args)
        for e in entries:
            if os.path.join(root, e.path) in (str(b.local / created), str(b.local / replaced)):
                with open(os.path.join(root, e.path), "ab") as fh:
                    fh.write(agent_line)
        return out
    monkeypatch.setattr(tree_writer, "stage_group", stage_then_agent_writes)
    r = b.restore()
    assert r.complete
    assert (b.local / created).read_bytes() == agent_line
    assert (b.local / replaced).read_bytes() == b"old\n" + agent_line
    assert sum("while the restore ran" in w for w in b.warnings) == 2, b.warnings
    assert not list((b.local / "codex-home").rglob("*.part"))


# --- a process that can write the tree plants symlinks where restore writes ---------------------


def _untouched(root: Path) -> dict[str, tuple]:
    """Everything under ``root`` (not followed), with what a write through a link would
    change: bytes, mode, mtime, a link's target, and each directory's listing and mtime."""
    out = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        if path.is_symlink():
            out[str(path)] = ("link", os.readlink(path))
        elif path.is_dir():
            out[str(path)] = ("dir", st.st_mode, st.st_mtime_ns, sorted(os.listdir(path)))
        else:
            out[str(path)] = ("file", path.read_bytes(), st.st_mode, st.st_mtime_ns)
    return out


def _source_with_db_and_link(make_live):
    """A checkpoint of a Hermes database and an fx tree with a file and a symlink."""
    a = make_live("a", fixtures=False)
    _make_db(a.local / "hermes" / "state.db", 500)
    fx = a.local / "fx-home"
    fx.mkdir()
    (fx / "notes.txt").write_text("notes\n")
    os.symlink("notes.txt", fx / "latest")
    assert a.checkpoint().seq == 1
    return a


@pytest.mark.parametrize("plant", ["links-at-the-old-temp-names", "temp-dir-is-a-link"])
def test_restore_never_writes_through_symlinks_planted_where_it_stages(make_live, tmp_path, plant):
    """Restore used to stage a database at ``.journal-tmp/db-<pid>-<hash of its path>``
    (pid 1 under supervise: predictable), opened O_CREAT|O_TRUNC, chmod and utime by name,
    then renamed over the live path. Symlinks planted at every such name (this process's
    pid and pid 1), or a ``.journal-tmp`` that is itself a link, change nothing outside
    the tree, and the restore completes."""
    _source_with_db_and_link(make_live)
    b = make_live("b", fixtures=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = []
    for tree, entry in (("hermes", "state.db"), ("fx-home", "latest")):
        root = b.local / tree
        root.mkdir()
        if plant == "temp-dir-is-a-link":
            os.symlink(outside, root / ".journal-tmp")
            continue
        (root / ".journal-tmp").mkdir()
        tag = hashlib.sha256(str(root / entry).encode()).hexdigest()[:16]
        for pid in {os.getpid(), 1}:
            for kind in ("db", "link"):
                victim = outside / f"{tree}-{kind}-{pid}"
                victim.write_bytes(b"precious, outside every tree\n")
                victim.chmod(0o600)
                os.symlink(victim, root / ".journal-tmp" / f"{kind}-{pid}-{tag}")
                planted.append(root / ".journal-tmp" / f"{kind}-{pid}-{tag}")
    before = _untouched(outside)

    r = b.restore()  # in this process: its pid is one of those planted

    assert _untouched(outside) == before
    assert r.complete, [(t.name, t.error, t.lost) for t in r.trees]
    db = b.local / "hermes" / "state.db"
    assert not db.is_symlink() and _db_rows(db) == 500
    assert os.readlink(b.local / "fx-home" / "latest") == "notes.txt"
    assert all(p.is_symlink() for p in planted), "the tree's own entries are never removed"


def test_restore_stages_through_its_temp_dir_even_when_it_is_swapped_for_a_link(make_live, tmp_path, monkeypatch):
    """A process renames restore's temp directory away, once restore made it, and puts a
    symlink to a directory outside the tree in its place: restore creates, renames and
    removes its temp files through the directory it opened, so nothing lands outside."""
    _source_with_db_and_link(make_live)
    b = make_live("b", fixtures=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    before = _untouched(outside)
    real = tree_writer.stage_group

    def swap_then_stage(root, *args):
        for tmp in Path(root).glob(".journal-tmp*"):
            if tmp.is_dir() and not tmp.is_symlink():
                tmp.rename(Path(root) / f"moved-{tmp.name}")
                os.symlink(outside, tmp)
        return real(root, *args)

    monkeypatch.setattr(tree_writer, "stage_group", swap_then_stage)
    r = b.restore()

    assert _untouched(outside) == before
    assert r.complete, [(t.name, t.error, t.lost) for t in r.trees]
    assert _db_rows(b.local / "hermes" / "state.db") == 500
    assert (b.local / "fx-home" / "notes.txt").read_text() == "notes\n"
    assert os.readlink(b.local / "fx-home" / "latest") == "notes.txt"
    assert not list((b.local).rglob("*.part")), "every temp file is removed, through the directory it is in"


def test_an_invalid_db_under_a_local_symlink_is_never_moved_out_of_where_it_points(make_live, tmp_path):
    """The store has ``sub/state.db``; locally ``sub`` is a symlink to a directory outside
    the tree holding an invalid ``state.db``. Restore refuses that entry (nothing read,
    moved or written through the link) and restores the rest."""
    a = make_live("a", fixtures=False)
    _make_db(a.local / "hermes" / "sub" / "state.db", 50)
    (a.local / "hermes" / "notes.txt").write_text("notes\n")
    assert a.checkpoint().seq == 1
    b = make_live("b", fixtures=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "state.db").write_bytes(b"not a database, and not the tree's to move\n")
    (b.local / "hermes").mkdir()
    os.symlink(outside, b.local / "hermes" / "sub")
    before = _untouched(outside)

    r = b.restore()

    assert _untouched(outside) == before
    hermes = next(t for t in r.trees if t.name == "hermes")
    assert hermes.error is None and hermes.lost == ["sub/state.db"]
    assert "is a symlink" in hermes.refused["sub/state.db"]
    assert (b.local / "hermes" / "notes.txt").read_text() == "notes\n"
    assert not r.complete


@pytest.mark.parametrize("planted", ["fifo", "symlink"])
def test_a_fifo_or_symlink_planted_beside_a_database_never_blocks_or_is_followed(bare_live, tmp_path, planted):
    """A FIFO planted as a database's -wal blocked the restore for ever (its signature
    opened it with a plain ``open``) and would have blocked the checkpoint's backup
    (SQLite opens and reads it); a symlink there was followed. The signature opens it
    without waiting or following; restore takes a database beside such a companion for
    invalid (its copy for the check once failed as if a writer were at work, and any
    bytes there were kept as "valid"): it moves both aside, never following or opening
    the companion, and restores the database; a snapshot refuses a database whose
    companion is not a regular file, loudly, and the commands end."""
    db = bare_live.local / "hermes" / "state.db"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    con.close()
    bare_live.run("checkpoint")
    wal = Path(str(db) + "-wal")
    outside = tmp_path / "outside"
    outside.write_bytes(b"not journal's\n")

    def plant() -> None:
        if planted == "fifo":
            os.mkfifo(wal)
        else:
            os.symlink(outside, wal)

    plant()
    restored = bare_live.run("restore", expect=None, timeout=60)
    assert restored.returncode == 0 and "is not valid" in restored.stderr, restored.stderr
    aside = list((bare_live.local / ".journal").glob("invalid/*/hermes/state.db-wal"))
    assert len(aside) == 1 and (stat.S_ISFIFO(aside[0].lstat().st_mode) if planted == "fifo"
                                else os.readlink(aside[0]) == str(outside))
    assert not wal.exists() and not wal.is_symlink()
    con = sqlite3.connect(db)
    assert con.execute("SELECT x FROM t").fetchall() == [(1,)]
    con.close()
    plant()
    checkpointed = bare_live.run("checkpoint", expect=None, timeout=60)

    assert checkpointed.returncode == 1 and "its -wal is not a regular file" in checkpointed.stderr, checkpointed.stderr
    assert "Traceback" not in restored.stderr + checkpointed.stderr
    assert outside.read_bytes() == b"not journal's\n"
    back = tmp_path / "back"
    bare_live.run("restore", "--to", str(back))
    con = sqlite3.connect(back / "hermes" / "state.db")
    assert con.execute("SELECT x FROM t").fetchall() == [(1,)]
    con.close()


def test_restore_never_sets_setuid_or_setgid_on_a_file_or_a_directory(bare_live, tmp_path):
    """A store's bytes are only as trusted as whoever could write it: a restore run as
    root made a file it names setuid (or setgid) as the store said, a root program for
    anyone. Restored files lost both bits, but restored directories kept them (a
    setgid directory hands its group to every file made in it). One rule now: restore
    never sets either bit; the sticky bit and the rest of the mode stay. A directory
    already at its entry's mode is left as it is."""
    home = bare_live.local / "fx-home"
    (home / "shared").mkdir(parents=True)
    (home / "drop").mkdir()
    (home / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (home / "plain.sh").write_text("x\n")
    modes = {"tool.sh": 0o6755, "plain.sh": 0o1750, "shared": 0o6755, "drop": 0o1777}
    for name, mode in modes.items():
        (home / name).chmod(mode)
    bare_live.run("checkpoint")
    assert {name: bare_live.entries("fx")[name].mode for name in modes} == modes   # stored as they were

    out = tmp_path / "out"
    bare_live.run("restore", "--to", str(out))

    restored = {name: (out / "fx" / name).stat().st_mode & 0o7777 for name in modes}
    assert restored == {"tool.sh": 0o755, "plain.sh": 0o1750, "shared": 0o755, "drop": 0o1777}
    bare_live.run("restore")   # a hot restart: the live directory holds its entry's mode already
    assert (home / "shared").stat().st_mode & 0o7777 == 0o6755


def test_a_hot_restore_keeps_a_newer_local_directory_mode(bare_live):
    """A directory chmodded here since the last checkpoint had the checkpoint's mode put
    back by a restore over the live tree (and the cache called it clean, so the change
    was lost): a newer local mode is kept, as a newer local file is, and the next
    checkpoint records it."""
    fx = bare_live.local / "fx-home"
    (fx / "mine").mkdir(parents=True)
    (fx / "mine" / "f.txt").write_text("f\n")
    (fx / "mine").chmod(0o755)
    bare_live.run("checkpoint")
    (fx / "mine").chmod(0o700)

    ran = bare_live.run("restore")

    assert "kept the newer local mode 700 of fx/mine" in ran.stderr + ran.stdout
    assert (fx / "mine").stat().st_mode & 0o7777 == 0o700
    bare_live.run("checkpoint")
    assert bare_live.entries("fx")["mine"].mode == 0o700


def test_a_hot_restore_gives_a_directory_it_recreates_the_checkpointed_mode(bare_live):
    """A directory deleted here is made again by a hot restore (0700 while it fills):
    it gets its checkpointed mode, as ``restore --to`` gives it, and never counts as a
    newer local mode that the next checkpoint would publish."""
    fx = bare_live.local / "fx-home"
    (fx / "shared").mkdir(parents=True)
    (fx / "shared" / "f.txt").write_text("f\n")
    (fx / "shared").chmod(0o755)
    bare_live.run("checkpoint")
    shutil.rmtree(fx / "shared")

    ran = bare_live.run("restore")

    assert "newer local mode" not in ran.stderr + ran.stdout
    assert (fx / "shared").stat().st_mode & 0o7777 == 0o755
    assert (fx / "shared" / "f.txt").read_text() == "f\n"
    (fx / "later.txt").write_text("a later change\n")
    bare_live.run("checkpoint")
    assert bare_live.entries("fx")["shared"].mode == 0o755
    listed = bare_live.run("ls", "--long", "fx", expect=0).stdout.splitlines()
    assert [line for line in listed if line.endswith(" shared/")][0].startswith("drwxr-xr-x")


@pytest.mark.parametrize("what", ["files", "a database"])
def test_a_directory_swapped_for_a_symlink_during_the_restore_sends_nothing_outside(bare_live, tmp_path,
                                                                                     monkeypatch, what):
    """A process swaps a directory of the tree for a symlink to a directory outside it
    after the restore decided and staged its files, before their renames: the renames
    (and a database's companions' removal) looked the directories up again by path and
    went through the symlink, writing (and deleting) outside the tree while reporting
    the restore complete. They go through the directory as reached from the tree's
    root without a symlink: nothing outside is touched, and those files are lost."""
    from journal.restore import publish

    sub = bare_live.local / "hermes" / "sub" if what == "a database" else bare_live.local / "fx-home" / "sub"
    sub.mkdir(parents=True)
    if what == "a database":
        con = sqlite3.connect(sub / "state.db")
        con.execute("CREATE TABLE t (x)")
        con.execute("INSERT INTO t VALUES (1)")
        con.commit()
        con.close()
    else:
        for n in range(3):
            (sub / f"f{n}.txt").write_text(f"file {n}\n")
    bare_live.run("checkpoint")
    shutil.rmtree(bare_live.local)
    bare_live.local.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for suffix in ("-wal", "-shm", "-journal"):
        (outside / f"state.db{suffix}").write_text("not journal's\n")
    real_flush = publish.PublishBatch.flush

    def swap_then_flush(self):
        if sub.is_dir() and not sub.is_symlink() and self.items:
            sub.rename(sub.with_name("moved"))
            sub.symlink_to(outside)
        return real_flush(self)

    monkeypatch.setattr(publish.PublishBatch, "flush", swap_then_flush)
    result = bare_live.restore()

    assert sorted(p.name for p in outside.iterdir()) == ["state.db-journal", "state.db-shm", "state.db-wal"]
    assert all((outside / n).read_text() == "not journal's\n" for n in os.listdir(outside))
    assert not result.complete
    lost = [p for t in result.trees for p in t.lost]
    assert lost and all(p.startswith("sub/") for p in lost), lost
    assert any("no longer a directory reached without a symlink" in w for w in bare_live.warnings), bare_live.warnings


def test_a_tree_whose_root_is_a_symlink_as_configured_is_restored(bare_live, tmp_path):
    """The renames go through the directories as reached from the tree's root, and the
    root is the directory journal's temp directory was made in: a root that is itself a
    symlink (``codex-home`` linked to a volume, as configured) is restored as before,
    not refused as a swapped directory."""
    real = tmp_path / "volume"
    (real / "sub").mkdir(parents=True)
    (real / "sub" / "f.txt").write_text("x\n")
    (bare_live.local / "codex-home").symlink_to(real)
    bare_live.run("checkpoint")
    (real / "sub" / "f.txt").unlink()

    ran = bare_live.run("restore")

    assert "restore complete" in ran.stdout, ran.stdout + ran.stderr
    assert (real / "sub" / "f.txt").read_text() == "x\n"


# --- the rest of what restore does in a tree, through the directories as reached from its root ---
# The decision looks at a directory; another process then swaps it for a symlink to a
# directory outside the tree; the action must refuse, and leave outside untouched.

def _swapped(tmp_path: Path) -> tuple[Path, Path]:
    """A tree ``root`` whose directory ``a`` is now a symlink to ``outside`` (which holds
    what ``a`` held); returns (root, outside)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b").chmod(0o700)
    (root / "a" / "state.db").write_bytes(b"not a database\n")
    (root / "a" / "state.db-wal").write_bytes(b"its wal\n")
    shutil.move(root / "a", outside)
    (root / "a").symlink_to(outside)
    return root, outside


def test_parents_made_for_a_new_file_are_never_made_through_a_swapped_directory(tmp_path):
    from journal.local.errors import UnsafePath
    from journal.restore.entry import ensure_parents
    root, outside = _swapped(tmp_path)
    known = {str(root / "a")}  # looked at (a directory then) earlier in this restore
    created: list[str] = []
    with pytest.raises(UnsafePath, match="no longer a directory reached without a symlink"):
        ensure_parents(str(root), "a/new/deeper/file.txt", known, created)
    assert not (outside / "new").exists() and created == []


def test_a_directory_mode_is_never_set_through_a_swapped_directory(tmp_path):
    from journal.format.model import KIND_DIR, Entry
    from journal.restore.entry import finish_dirs
    root, outside = _swapped(tmp_path)
    changed = finish_dirs(str(root), [Entry(path="a/b", kind=KIND_DIR, mode=0o40777)])
    assert changed == [] and (outside / "b").stat().st_mode & 0o777 == 0o700


def test_a_database_is_never_moved_aside_from_outside_the_tree(tmp_path):
    from journal.local.errors import UnsafePath
    from journal.format.model import KIND_SQLITE, Entry
    from journal.restore.aside import move_aside
    root, outside = _swapped(tmp_path)
    with pytest.raises(UnsafePath):
        move_aside(str(root), Entry(path="a/state.db", kind=KIND_SQLITE, mode=0o600), str(tmp_path / "aside"))
    assert sorted(os.listdir(outside)) == ["b", "state.db", "state.db-wal"]


def test_modes_and_moves_still_reach_real_directories_even_unreadable_ones(tmp_path):
    from journal.format.model import KIND_SQLITE, Entry
    from journal.restore.aside import move_aside
    from journal.restore.entry import ensure_parents
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "state.db").write_bytes(b"not a database\n")
    (root / "a" / "state.db-wal").write_bytes(b"its wal\n")
    created: list[str] = []
    ensure_parents(str(root), "a/new/deeper/file.txt", set(), created)
    assert created == [str(root / "a" / "new"), str(root / "a" / "new" / "deeper")]
    moved = move_aside(str(root), Entry(path="a/state.db", kind=KIND_SQLITE, mode=0o600), str(tmp_path / "aside"))
    assert sorted(os.listdir(Path(moved).parent)) == ["state.db", "state.db-wal"]
    assert sorted(os.listdir(root / "a")) == ["b", "new"]
    (root / "a" / "b").chmod(0o300)  # write and search only: not readable, even by its owner
    (root / "a").chmod(0o755)
    script = (f"from journal.format.model import KIND_DIR, Entry\n"
              f"from journal.restore.entry import finish_dirs\n"
              f"print(finish_dirs({str(root)!r}, [Entry(path='a/b', kind=KIND_DIR, mode=0o40750),"
              f" Entry(path='a', kind=KIND_DIR, mode=0o40711)]))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          preexec_fn=drop_dac_override, env=clean_env())  # as an ordinary user is bound
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr([str(root / "a" / "b"), str(root / "a")])
    assert (root / "a" / "b").stat().st_mode & 0o777 == 0o750 and (root / "a").stat().st_mode & 0o777 == 0o711


def test_an_invalid_db_whose_directory_is_swapped_before_it_is_moved_aside_is_refused(make_live, tmp_path,
                                                                                       monkeypatch):
    """Restore looked at ``sub`` (a directory, holding an invalid ``state.db``) and
    decided to move that database aside; before the move, another process swaps
    ``sub`` for a symlink to a directory outside the tree holding another invalid
    ``state.db``. Nothing outside is moved, the entry is lost (the restore is
    incomplete), and the rest of the tree is restored."""
    from journal.restore import trees

    a = make_live("a", fixtures=False)
    _make_db(a.local / "hermes" / "sub" / "state.db", 50)
    (a.local / "hermes" / "notes.txt").write_text("notes\n")
    assert a.checkpoint().seq == 1
    b = make_live("b", fixtures=False)
    sub = b.local / "hermes" / "sub"
    sub.mkdir(parents=True)
    (sub / "state.db").write_bytes(b"not a database\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "state.db").write_bytes(b"not a database, and not the tree's to move\n")
    before = _untouched(outside)
    real = trees.move_aside

    def swap_then_move(root, entry, aside):
        sub.rename(sub.with_name("moved"))
        sub.symlink_to(outside)
        return real(root, entry, aside)

    monkeypatch.setattr(trees, "move_aside", swap_then_move)
    r = b.restore()

    assert _untouched(outside) == before
    hermes = next(t for t in r.trees if t.name == "hermes")
    assert hermes.error is None and hermes.lost == ["sub/state.db"], (hermes.error, hermes.lost)
    assert "could not be moved aside" in hermes.refused["sub/state.db"]
    assert (b.local / "hermes" / "notes.txt").read_text() == "notes\n"
    assert not r.complete


def test_a_fifo_beside_an_invalid_db_moved_aside_across_filesystems_never_blocks(small_tmpfs, tmp_path):
    """Across filesystems a move aside copies: a FIFO planted as a companion is made
    again as a FIFO there, never opened (an open blocks until a writer comes)."""
    tree = small_tmpfs("4m")  # the tree on a filesystem of its own; the aside directory on tmp_path's
    (tree / "state.db").write_bytes(b"not a database\n")
    os.mkfifo(tree / "state.db-wal")
    (tree / "state.db-shm").write_bytes(b"shm\n")
    aside = tmp_path / "aside"
    script = ("import sys\nfrom journal.format.model import KIND_SQLITE, Entry\n"
              "from journal.restore.aside import move_aside\n"
              "print(move_aside(sys.argv[1], Entry(path='state.db', kind=KIND_SQLITE, mode=0o600), sys.argv[2]))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tree), str(aside)], capture_output=True, text=True,
                          timeout=60, env=clean_env())
    assert done.returncode == 0, done.stderr
    assert os.listdir(tree) == [] or sorted(os.listdir(tree)) == ["lost+found"]
    assert (aside / "state.db").read_bytes() == b"not a database\n" and (aside / "state.db-shm").read_bytes() == b"shm\n"
    assert stat.S_ISFIFO((aside / "state.db-wal").lstat().st_mode)


def test_a_directory_its_owner_may_only_search_is_walked_through(tmp_path):
    """A directory at mode 0311 (search and write, not read: a drop box) is no swapped
    directory: restore makes parents in it, moves a database aside from it and sets
    the modes below it, as an ordinary user (without CAP_DAC_OVERRIDE) can."""
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "state.db").write_bytes(b"not a database\n")
    (root / "a").chmod(0o311)
    script = textwrap.dedent(f"""
        from journal.format.model import KIND_DIR, KIND_SQLITE, Entry
        from journal.restore.aside import move_aside
        from journal.restore.entry import ensure_parents, finish_dirs
        root = {str(root)!r}
        made = []
        ensure_parents(root, "a/new/f.txt", set(), made)
        print(made)
        print(move_aside(root, Entry(path="a/state.db", kind=KIND_SQLITE, mode=0o600), {str(tmp_path / 'aside')!r}))
        print(finish_dirs(root, [Entry(path="a/b", kind=KIND_DIR, mode=0o40750)]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          preexec_fn=drop_dac_override, env=clean_env())
    (root / "a").chmod(0o755)
    assert done.returncode == 0, done.stderr
    made, moved, changed = done.stdout.splitlines()
    assert made == repr([str(root / "a" / "new")]) and (root / "a" / "new").is_dir()
    assert (tmp_path / "aside" / "a" / "state.db").exists() and not (root / "a" / "state.db").exists()
    assert changed == repr([str(root / "a" / "b")]) and (root / "a" / "b").stat().st_mode & 0o777 == 0o750


def test_directory_modes_of_a_deep_tree_are_all_set(tmp_path):
    from journal.format.model import KIND_DIR, Entry
    from journal.restore.entry import finish_dirs
    root = tmp_path / "root"
    deep = root.joinpath(*["d"] * 200)
    deep.mkdir(parents=True)
    entries = [Entry(path="/".join(["d"] * n), kind=KIND_DIR, mode=0o40750) for n in range(1, 201)]
    changed = finish_dirs(str(root), entries)
    assert len(changed) == 200 and deep.stat().st_mode & 0o777 == 0o750 and (root / "d").stat().st_mode & 0o777 == 0o750


def test_the_root_reached_for_a_change_is_a_descriptor_that_can_be_fsynced(tmp_path):
    """A database moved aside from the tree's root: the root's descriptor is opened
    again readable (an ``O_PATH`` one cannot be fsynced, and ``sync`` took that for a
    FUSE directory, silently)."""
    import fcntl

    from journal.local.under import dir_under, sync
    with dir_under(str(tmp_path), "") as fd:
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_PATH
        sync(fd)
    bad = os.open(str(tmp_path), os.O_RDONLY)
    os.close(bad)
    with pytest.raises(OSError):
        sync(bad)  # a wrong descriptor is never taken for a directory that cannot be fsynced


@pytest.mark.parametrize("odd", ["directory", "socket"])
def test_a_database_beside_a_directory_or_socket_companion_is_moved_aside_on_the_same_filesystem(make_live, odd):
    """A -shm that is a directory or a socket makes the local database invalid (never
    SQLite's); on the tree's own filesystem the move aside is a rename, which takes
    any kind: the database is restored and the rest moved aside, nothing deleted."""
    import socket

    a = make_live("a", fixtures=False)
    _make_db(a.local / "hermes" / "state.db", 50)
    assert a.checkpoint().seq == 1
    b = make_live("b", fixtures=False)
    _make_db(b.local / "hermes" / "state.db", 3)
    shm = b.local / "hermes" / "state.db-shm"
    if odd == "directory":
        shm.mkdir()
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(shm))
        sock.close()
    r = b.restore()
    assert r.complete, [(t.lost, t.refused) for t in r.trees]
    assert _db_rows(b.local / "hermes" / "state.db") == 50
    moved = list((b.local / ".journal").glob("invalid/*/hermes/state.db*"))
    assert sorted(p.name for p in moved) == ["state.db", "state.db-shm"]


def test_a_companion_gone_before_it_is_moved_aside_is_skipped(tmp_path):
    """SQLite removes -wal and -shm at its last close: one gone between the look and
    the move is no error (it aborted every tree's restore), there is just nothing to move."""
    from journal.restore.aside import _copy_aside
    (tmp_path / "aside").mkdir()
    wal = tmp_path / "state.db-wal"
    wal.write_bytes(b"frames\n")
    st = wal.lstat()
    wal.unlink()
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _copy_aside(fd, "state.db-wal", st, str(tmp_path / "aside" / "state.db-wal"), "state.db-wal")
    finally:
        os.close(fd)
    assert os.listdir(tmp_path / "aside") == []


def test_a_file_written_while_it_is_copied_aside_is_left_in_place(tmp_path, monkeypatch):
    """Across filesystems a move aside is a copy, then an unlink: bytes a writer adds
    meanwhile were deleted with the name. The name is unlinked only if nothing changed it."""
    from journal.local.errors import UnsafePath
    from journal.restore import aside as aside_mod
    (tmp_path / "aside").mkdir()
    wal = tmp_path / "state.db-wal"
    wal.write_bytes(b"frame1")
    st = wal.lstat()
    real = aside_mod._copy_file

    def copy_then_append(*args):
        done = real(*args)
        with open(wal, "ab") as fh:
            fh.write(b"+frame2")  # a writer commits right after the copy
        return done

    monkeypatch.setattr(aside_mod, "_copy_file", copy_then_append)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(UnsafePath, match="left in place"):
            aside_mod._copy_aside(fd, "state.db-wal", st, str(tmp_path / "aside" / "state.db-wal"), "state.db-wal")
    finally:
        os.close(fd)
    assert wal.read_bytes() == b"frame1+frame2"


@pytest.mark.skipif(shutil.which("unshare") is None or not _can_mount(), reason="needs unshare -m and mount")
def test_a_bind_mounted_tree_with_a_directory_shm_is_refused_before_anything_moves(make_live, tmp_path):
    """On a bind mount the tree has the aside directory's device number, yet a rename
    across it is a copy (EXDEV): a directory companion, which cannot be copied, refuses
    the move before the database moves (it was copied aside first, then the refusal
    said "not moved"); a second restore then failed on the directory, aborting every tree."""
    a = make_live("a", fixtures=False)
    _make_db(a.local / "hermes" / "state.db", 50)
    (a.local / "hermes" / "notes.txt").write_text("notes\n")
    assert a.checkpoint().seq == 1
    b = make_live("b", fixtures=False)
    real = tmp_path / "real-hermes"
    real.mkdir()
    (real / "state.db").write_bytes(b"not a database\n")
    (real / "state.db-shm").mkdir()
    tree = b.local / "hermes"
    tree.mkdir(parents=True)
    script = (f"mount --bind {real} {tree} && {sys.executable} -m journal restore; echo rc=$?; "
              f"{sys.executable} -m journal restore; echo rc=$?")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], env=clean_env(b.env), capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.count("rc=1") == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "nothing was" in proc.stderr, proc.stderr
    assert sorted(os.listdir(real)) == ["notes.txt", "state.db", "state.db-shm"]
    assert (real / "state.db").read_bytes() == b"not a database\n"
    assert not list((b.local / ".journal").glob("invalid/*/hermes/state.db"))


def test_a_directory_where_a_database_companion_belongs_refuses_that_database_only(make_live):
    """No local database, but a directory at its -shm: installing the restored database
    removes stale companions, and the directory made that raise out of the restore,
    aborting every tree. Now that one database is lost (the restore is incomplete),
    the directory stays, and the rest is restored."""
    a = make_live("a", fixtures=False)
    _make_db(a.local / "hermes" / "state.db", 50)
    (a.local / "hermes" / "notes.txt").write_text("notes\n")
    assert a.checkpoint().seq == 1
    b = make_live("b", fixtures=False)
    (b.local / "hermes" / "state.db-shm").mkdir(parents=True)
    r = b.restore()
    hermes = next(t for t in r.trees if t.name == "hermes")
    assert not r.complete and hermes.lost == ["state.db"], (hermes.lost, hermes.error)
    assert (b.local / "hermes" / "notes.txt").read_text() == "notes\n"
    assert (b.local / "hermes" / "state.db-shm").is_dir() and not (b.local / "hermes" / "state.db").exists()

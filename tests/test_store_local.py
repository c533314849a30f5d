"""The local-directory backend: the store contract plus how it writes files."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from store_contract import StoreContract, store_dirs

from journal.atomic import FsOps
from journal.errors import ConfigError, KeyExists, ObjectNotFound, StoreError
from journal.store import open_store
from journal.store.local import TMP_DIR, LocalStore

REPO = Path(__file__).resolve().parents[1]


class RecordingFsOps(FsOps):
    """Real filesystem calls, recorded as (name, args) in ``calls``."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __getattribute__(self, name):
        attr = super().__getattribute__(name)
        if name.startswith("_") or name == "calls" or not callable(attr):
            return attr

        def record(*args):
            self.calls.append((name, *args))
            return attr(*args)

        return record


class TestLocalStore(StoreContract):
    @pytest.fixture
    def make_store(self, tmp_path):
        dirs = store_dirs(tmp_path)
        return lambda: LocalStore(next(dirs))


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_temp_files_live_only_under_tmp_and_none_remain(tmp_path):
    fs = RecordingFsOps()
    store = LocalStore(str(tmp_path), fs=fs)
    store.put_if_absent("packs/ab/abcd", b"x" * 1000)
    store.put_if_absent("manifests/0001", b"m")
    opened = [call[1] for call in fs.calls if call[0] == "open"]
    assert len(opened) == 2
    assert all(os.path.dirname(path) == os.path.join(str(tmp_path), TMP_DIR) for path in opened)
    assert os.listdir(tmp_path / TMP_DIR) == []
    assert files_under(tmp_path) == ["manifests/0001", "packs/ab/abcd"]


def test_no_store_file_is_opened_for_append_or_update(tmp_path):
    fs = RecordingFsOps()
    store = LocalStore(str(tmp_path), fs=fs)
    for n in range(3):
        store.put_if_absent(f"k/{n}", b"v")
    with pytest.raises(KeyExists):
        store.put_if_absent("k/0", b"again")
    opens = [call for call in fs.calls if call[0] == "open"]
    for _, path, flags, _mode in opens:
        assert flags & os.O_ACCMODE == os.O_WRONLY
        assert flags & os.O_CREAT and flags & os.O_EXCL
        assert not flags & (os.O_APPEND | os.O_TRUNC)
    published = {os.path.join(str(tmp_path), "k", str(n)) for n in range(3)}
    assert not published & {path for _, path, _, _ in opens}
    assert len({path for _, path, _, _ in opens}) == len(opens)


def test_publish_is_write_fsync_close_rename_fsync_dir(tmp_path):
    fs = RecordingFsOps()
    LocalStore(str(tmp_path), fs=fs).put_if_absent("a/b", b"payload")
    names = [call[0] for call in fs.calls if call[0] not in ("makedirs", "mkdir")]
    i = names.index("open")
    assert names[i:] == ["open", "write", "fsync", "close", "rename_noclobber", "fsync_dir"]
    assert fs.calls[-1] == ("fsync_dir", os.path.join(str(tmp_path), "a"))


def test_put_first_absent_writes_the_bytes_once_and_renames_them_per_taken_key(tmp_path):
    store = LocalStore(str(tmp_path))
    for n in range(3):
        store.put_if_absent(f"s/i{n}", b"taken")
    fs = store.fs = RecordingFsOps()

    assert store.put_first_absent((f"s/i{n}" for n in range(5)), b"new") == "s/i3"
    names = [call[0] for call in fs.calls if call[0] not in ("makedirs", "mkdir")]
    assert names == ["open", "write", "fsync", "close"] + ["rename_noclobber"] * 4 + ["fsync_dir"]
    assert store.put_first_absent(iter(["s/i0"]), b"none") is None
    assert os.listdir(tmp_path / TMP_DIR) == [], "the unpublished temp file is removed"
    assert files_under(tmp_path) == ["s/i0", "s/i1", "s/i2", "s/i3"]


def test_put_file_links_the_closed_file_into_place_private_and_never_replaces(tmp_path):
    """A spool pack on the store's filesystem is published by a hard link (its bytes are
    not copied), made private like every stored file, and never replaces a key."""
    store = LocalStore(str(tmp_path / "store"))
    spool = tmp_path / "spool.pack"
    spool.write_bytes(b"pack bytes")
    spool.chmod(0o644)

    store.put_file_if_absent("packs/ab/abcd", str(spool))

    stored = tmp_path / "store" / "packs" / "ab" / "abcd"
    assert os.path.samefile(stored, spool)
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert (store.puts, store.put_bytes) == (1, len(b"pack bytes"))
    other = tmp_path / "other.pack"
    other.write_bytes(b"other bytes")
    with pytest.raises(KeyExists):
        store.put_file_if_absent("packs/ab/abcd", str(other))
    assert store.get("packs/ab/abcd") == b"pack bytes"
    assert not (tmp_path / "store" / TMP_DIR).exists() or os.listdir(tmp_path / "store" / TMP_DIR) == []


def test_put_file_through_recorded_calls_copies_and_publishes_as_put_does(tmp_path):
    """A store whose filesystem calls go through another ``FsOps`` (hfsim's rules, a
    recorder) copies the file: write, fsync, close, rename, fsync the directory."""
    fs = RecordingFsOps()
    store = LocalStore(str(tmp_path / "store"), fs=fs)
    spool = tmp_path / "spool.pack"
    spool.write_bytes(b"pack bytes")

    store.put_file_if_absent("a/b", str(spool))

    assert not os.path.samefile(tmp_path / "store" / "a" / "b", spool)
    names = [call[0] for call in fs.calls if call[0] not in ("makedirs", "mkdir")]
    assert names[names.index("open"):] == ["open", "write", "fsync", "close", "rename_noclobber", "fsync_dir"]
    assert store.get("a/b") == b"pack bytes"


def test_new_directories_have_their_parent_fsynced(tmp_path):
    fs = RecordingFsOps()
    LocalStore(str(tmp_path / "root"), fs=fs).put_if_absent("x/y/z", b"1")
    made = [call[1] for call in fs.calls if call[0] == "mkdir"]
    synced = [call[1] for call in fs.calls if call[0] == "fsync_dir"]
    assert [os.path.relpath(d, tmp_path) for d in made] == ["root", "root/x", "root/x/y"]
    assert all(os.path.dirname(d) in synced for d in made)


def test_foreign_files_make_the_store_non_empty(tmp_path):
    store = LocalStore(str(tmp_path))
    assert store.is_empty()
    (tmp_path / TMP_DIR).mkdir()
    assert store.is_empty()
    (tmp_path / "My Notes.txt").write_text("not a key")
    (tmp_path / ".bashrc").write_text("hidden")
    assert list(store.list()) == []
    assert not store.is_empty()


def test_missing_root_is_empty_and_created_on_first_put(tmp_path):
    store = LocalStore(str(tmp_path / "new" / "store"))
    assert store.is_empty() and list(store.list()) == []
    store.put_if_absent("k", b"v")
    assert (tmp_path / "new" / "store" / "k").read_bytes() == b"v"


def test_list_reads_only_directories_that_can_match(tmp_path, monkeypatch):
    store = LocalStore(str(tmp_path))
    for key in ["manifests/0001", "packs/00/00aa", "packs/01/01bb", "packs/02/02cc"]:
        store.put_if_absent(key, b"x")
    scanned = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: scanned.append(path) or real_scandir(path))
    assert list(store.list("manifests/")) == ["manifests/0001"]
    assert not any("packs" in path for path in scanned)
    scanned.clear()
    assert list(store.list("packs/01/")) == ["packs/01/01bb"]
    assert [os.path.relpath(p, tmp_path) for p in scanned] == ["packs/01"]   # the prefix's directory only


def test_delete_prunes_empty_parent_directories(tmp_path):
    store = LocalStore(str(tmp_path))
    store.put_if_absent("a/b/c", b"1")
    store.put_if_absent("a/d", b"2")
    store.delete("a/b/c")
    assert not (tmp_path / "a" / "b").exists()
    assert (tmp_path / "a" / "d").exists()
    store.delete("a/d")
    assert not (tmp_path / "a").exists() and tmp_path.exists()


def test_key_colliding_with_a_directory_of_keys_is_a_store_error(tmp_path):
    store = LocalStore(str(tmp_path))
    store.put_if_absent("a/b/c", b"1")
    with pytest.raises(StoreError):
        store.put_if_absent("a/b", b"2")
    with pytest.raises(StoreError):
        store.put_if_absent("a/b/c/d", b"3")
    assert list(store.list()) == ["a/b/c"]


def test_get_of_a_key_that_is_a_directory_of_keys_is_not_found(tmp_path):
    """``get`` reads through a bare descriptor (``os.open`` opens a directory, where a
    buffered ``open`` refused it): a directory is still no object."""
    store = LocalStore(str(tmp_path))
    store.put_if_absent("a/b/c", b"0123456789")
    with pytest.raises(ObjectNotFound):
        store.get("a/b")
    assert (store.get("a/b/c", 2, 5), store.get("a/b/c", 8, 99), store.get("a/b/c", 10)) == (b"234", b"89", b"")


def test_open_store_maps_paths_and_file_urls_to_local_stores(tmp_path):
    for url in [str(tmp_path), f"file://{tmp_path}"]:
        store = open_store(url)
        assert isinstance(store, LocalStore) and store.root == str(tmp_path)


@pytest.mark.parametrize("url", ["ftp://host/x", "file://host/x", ""])
def test_open_store_rejects_unsupported_urls(url):
    with pytest.raises(ConfigError, match="open store"):
        open_store(url)


RACER = textwrap.dedent(
    """
    import json, os, sys, time
    from journal.errors import KeyExists
    from journal.store.local import LocalStore

    root, go, name = sys.argv[1:4]
    store = LocalStore(root)
    while not os.path.exists(go):
        time.sleep(0.001)
    won = []
    for n in range(20):
        try:
            store.put_if_absent(f"race/{n:02d}", name.encode() * 50_000)
            won.append(n)
        except KeyExists:
            pass
    print(json.dumps(won))
    """
)


def test_racing_processes_get_exactly_one_winner_per_key(tmp_path):
    root, go = tmp_path / "store", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(root), str(go), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for name in ("A", "B")
    ]
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(results[0] + results[1]) == list(range(20))
    store = LocalStore(str(root))
    for n in range(20):
        winner = "A" if n in results[0] else "B"
        assert store.get(f"race/{n:02d}") == winner.encode() * 50_000
    assert os.listdir(root / TMP_DIR) == []


class PruningFsOps(FsOps):
    """Removes the destination's (empty) directory before the first rename, like a racing delete."""

    def __init__(self):
        self.pruned = 0

    def rename_noclobber(self, src, dst):
        if not self.pruned:
            self.pruned += 1
            os.rmdir(os.path.dirname(dst))
        super().rename_noclobber(src, dst)


@pytest.mark.parametrize("make_data", [lambda: b"payload", lambda: io.BytesIO(b"payload")])
def test_put_retries_when_a_concurrent_delete_pruned_the_parent(tmp_path, make_data):
    fs = PruningFsOps()
    store = LocalStore(str(tmp_path), fs=fs)
    store.put_if_absent("packs/ab/abcd", make_data())
    assert fs.pruned == 1
    assert store.get("packs/ab/abcd") == b"payload"
    assert (store.puts, store.put_bytes) == (1, 7)
    assert os.listdir(tmp_path / TMP_DIR) == []


def test_a_store_directory_that_vanished_is_never_made_again_by_a_put(tmp_path):
    """A volume unmounted in the middle of a checkpoint: the puts that follow fail, and
    nothing appears at the store's path on the disk underneath the mount point."""
    root = tmp_path / "data" / "journal"
    store = LocalStore(str(root))
    store.put_if_absent("config", b"{}")        # a new store's first put makes its directory
    assert store.get("config") == b"{}"
    root.rename(tmp_path / "data" / "journal-unmounted")
    with pytest.raises(StoreError, match="is gone"):
        store.put_if_absent("packs/ab/abcd", b"x")
    assert not root.exists()


def test_a_store_directory_that_vanished_is_never_made_again_by_a_staged_put(tmp_path):
    """The manifest staged while packs upload (``stage``) writes its temp file first: that
    write must not make the vanished store's directory again either."""
    root = tmp_path / "data" / "journal"
    store = LocalStore(str(root))
    store.put_if_absent("config", b"{}")
    assert store.get("config") == b"{}"
    root.rename(tmp_path / "data" / "journal-unmounted")
    with pytest.raises(StoreError, match="is gone"):
        store.stage("manifests/00000000000000000002", b"m")
    with pytest.raises(StoreError, match="is gone"):
        store.put_first_absent(["manifests/00000000000000000002"], b"m")
    assert not root.exists()

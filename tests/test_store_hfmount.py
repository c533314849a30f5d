"""The hf-mount simulation: the store contract passes on it, and it enforces the streaming rules."""

from __future__ import annotations

import errno
import os

import pytest
from store_contract import StoreContract, store_dirs

from journal.errors import StoreError
from journal.store import open_store
from journal.store.hfmount import HfMountSimStore, PhantomPrefixError
from journal.store.local import TMP_DIR


class TestHfMountSimStore(StoreContract):
    @pytest.fixture
    def make_store(self, tmp_path):
        dirs = store_dirs(tmp_path)
        return lambda: HfMountSimStore(next(dirs))


class SimulatedCrash(BaseException):
    """The process dies here."""


class CrashingStream:
    """Yields a few pieces, then crashes the mount and the process."""

    def __init__(self, store: HfMountSimStore):
        self.store = store
        self.reads = 0

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        if self.reads == 3:
            self.store.crash()
            raise SimulatedCrash()
        return b"x" * min(size, 4096)


@pytest.fixture
def store(tmp_path):
    return HfMountSimStore(str(tmp_path))


def test_crash_mid_put_leaves_no_object_and_the_key_can_be_put_later(store, tmp_path):
    with pytest.raises(SimulatedCrash):
        store.put_if_absent("packs/ab/abcd", CrashingStream(store))
    assert store.head("packs/ab/abcd") is None
    assert list(store.list()) == []
    assert os.listdir(tmp_path / TMP_DIR) == []
    store.put_if_absent("packs/ab/abcd", b"complete")
    assert store.get("packs/ab/abcd") == b"complete"


def test_crash_drops_every_unclosed_file(store, tmp_path):
    path = str(tmp_path / "direct")
    fd = store.fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    store.fs.write(fd, memoryview(b"unclosed"))
    assert store.crash() == [path]
    with pytest.raises(OSError) as info:
        store.fs.write(fd, memoryview(b"more"))
    assert info.value.errno == errno.EBADF
    store.fs.close(fd)
    assert not os.path.exists(path)


def test_file_appears_only_at_close_and_fsync_does_not_publish(store, tmp_path):
    path = str(tmp_path / "k")
    fd = store.fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    store.fs.write(fd, memoryview(b"abc"))
    store.fs.fsync(fd)
    assert not os.path.exists(path)
    store.fs.close(fd)
    assert open(path, "rb").read() == b"abc"


def test_reopening_an_existing_key_for_write_fails_with_eperm(store, tmp_path):
    store.put_if_absent("k", b"published")
    path = str(tmp_path / "k")
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND, os.O_WRONLY | os.O_APPEND | os.O_TRUNC):
        with pytest.raises(PermissionError) as info:
            store.fs.open(path, flags, 0o600)
        assert info.value.errno == errno.EPERM
    assert store.get("k") == b"published"


def test_non_sequential_write_fails(store, tmp_path):
    fd = store.fs.open(str(tmp_path / "k"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    store.fs.write(fd, memoryview(b"0123"))
    store.fs.pwrite(fd, memoryview(b"45"), 4)
    with pytest.raises(OSError) as info:
        store.fs.pwrite(fd, memoryview(b"x"), 2)
    assert info.value.errno == errno.EINVAL
    store.fs.close(fd)
    assert open(tmp_path / "k", "rb").read() == b"012345"


def test_unlink_of_a_file_open_for_writing_fails_with_eperm(store, tmp_path):
    path = str(tmp_path / "k")
    fd = store.fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with pytest.raises(PermissionError):
        store.fs.unlink(path)
    store.fs.close(fd)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("projects.json.1.tmp", "projects.json"),
        ("projects.json", "projects.json.1.tmp"),
        ("a/b/c", "a/b"),
        ("a/b", "a/b/c"),
        ("packs/ab", "packs/abc/d"),
    ],
)
def test_put_that_would_create_a_phantom_prefix_key_is_refused(store, first, second):
    store.put_if_absent(first, b"1")
    with pytest.raises(StoreError) as info:
        store.put_if_absent(second, b"2")
    assert isinstance(info.value.__cause__, (PhantomPrefixError, FileExistsError))
    assert list(store.list()) == [first]


def test_phantom_rule_counts_unclosed_files(store, tmp_path):
    fd = store.fs.open(str(tmp_path / "name"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with pytest.raises(PhantomPrefixError):
        store.fs.open(str(tmp_path / "name.tmp"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    store.fs.close(fd)


def test_open_store_hfsim_url_gives_the_simulation(tmp_path):
    store = open_store(f"hfsim://{tmp_path}")
    assert isinstance(store, HfMountSimStore) and store.root == str(tmp_path)

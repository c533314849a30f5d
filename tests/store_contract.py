"""The store contract, as tests every backend must pass.

Each backend's test module subclasses ``StoreContract`` (the name has no ``Test``
prefix, so pytest collects only the subclasses) and overrides ``make_store`` with a
factory of fresh, empty stores.
"""

from __future__ import annotations

import io
import itertools
import os
import threading
from collections.abc import Iterator

import pytest

from journal.errors import KeyExists, ObjectNotFound
from journal.atomic import COPY_CHUNK

BAD_KEYS = ["", "/a", "a/", "a//b", ".hidden", "a/.b", "a/../b", "a b", "a\\b", "é", "x" * 513]


class RecordingStream:
    """A binary stream that records the size of every ``read`` call."""

    def __init__(self, data: bytes, fail_after: int | None = None):
        self._inner = io.BytesIO(data)
        self._fail_after = fail_after
        self.sizes: list[int | None] = []

    def read(self, size: int | None = -1) -> bytes:
        self.sizes.append(size)
        if self._fail_after is not None and len(self.sizes) > self._fail_after:
            raise RuntimeError("source stream failed")
        return self._inner.read(size)


class StoreContract:
    """Conformance tests for ``journal.store.base.Store``."""

    @pytest.fixture
    def make_store(self):
        """Return a callable making a fresh, empty store. Backends override this."""
        pytest.fail("subclass StoreContract and override the make_store fixture")

    @pytest.fixture
    def store(self, make_store):
        store = make_store()
        yield store
        store.close()

    def test_put_then_get_returns_the_bytes(self, store):
        store.put_if_absent("packs/ab/abcd", b"hello")
        assert store.get("packs/ab/abcd") == b"hello"

    def test_put_of_empty_object_is_stored(self, store):
        store.put_if_absent("empty", b"")
        assert store.get("empty") == b""
        assert store.head("empty") == 0

    def test_put_stream_is_read_in_bounded_pieces(self, store):
        payload = os.urandom(3 * (1 << 20) + 7)
        stream = RecordingStream(payload)
        store.put_if_absent("big", stream)
        assert store.get("big") == payload
        assert len(stream.sizes) >= 4
        assert all(size is not None and 0 < size <= COPY_CHUNK for size in stream.sizes)

    def test_put_existing_key_raises_and_keeps_old_bytes(self, store):
        store.put_if_absent("k", b"first")
        with pytest.raises(KeyExists) as info:
            store.put_if_absent("k", b"second")
        assert info.value.key == "k"
        with pytest.raises(KeyExists):
            store.put_if_absent("k", io.BytesIO(b"third"))
        assert store.get("k") == b"first"

    def test_failed_stream_leaves_no_object(self, store):
        with pytest.raises(RuntimeError):
            store.put_if_absent("k", RecordingStream(os.urandom(3 * COPY_CHUNK), fail_after=1))
        assert store.head("k") is None
        assert list(store.list()) == []
        store.put_if_absent("k", b"retry")
        assert store.get("k") == b"retry"

    def test_get_missing_raises_object_not_found(self, store):
        with pytest.raises(ObjectNotFound) as info:
            store.get("missing/key")
        assert info.value.key == "missing/key"
        with pytest.raises(ObjectNotFound):
            store.get("missing", 0, 10)

    def test_get_range_returns_the_slice(self, store):
        data = bytes(range(256)) * 40
        store.put_if_absent("r", data)
        for start, end in [(0, 1), (10, 20), (100, None), (0, None), (5, 5), (9, 3), (len(data) - 1, len(data))]:
            assert store.get("r", start, end) == data[start:end]

    def test_get_range_past_end_is_truncated(self, store):
        store.put_if_absent("r", b"0123456789")
        assert store.get("r", 8, 100) == b"89"
        assert store.get("r", 10, 20) == b""
        assert store.get("r", 50) == b""

    def test_head_returns_size_or_none(self, store):
        store.put_if_absent("a/b", b"12345")
        assert store.head("a/b") == 5
        assert store.head("a/c") is None
        assert store.head("a") is None
        assert store.exists("a/b") and not store.exists("a/c")

    def test_list_yields_keys_in_ascending_byte_order(self, store):
        keys = ["p/a-1", "p/a.2", "p/a/3", "p/a0", "p/b", "q/c", "P/z", "_u"]
        for key in reversed(keys):
            store.put_if_absent(key, key.encode())
        expected = sorted(keys, key=str.encode)
        assert list(store.list()) == expected
        assert list(store.list("")) == expected

    def test_list_filters_by_prefix_even_mid_component(self, store):
        keys = ["manifests/0001", "manifests/0002", "manifests/0100", "packs/00/00aa", "packs/01/01bb", "packsx"]
        for key in keys:
            store.put_if_absent(key, b"x")
        assert list(store.list("manifests/")) == keys[:3]
        assert list(store.list("manifests/00")) == keys[:2]
        assert list(store.list("manifests/01")) == ["manifests/0100"]
        assert list(store.list("packs/")) == ["packs/00/00aa", "packs/01/01bb"]
        assert list(store.list("packs")) == ["packs/00/00aa", "packs/01/01bb", "packsx"]
        assert list(store.list("packs/01/01")) == ["packs/01/01bb"]
        assert list(store.list("manifests/0001")) == ["manifests/0001"]
        assert list(store.list("nothing/")) == []
        assert list(store.list("manifests/0001/")) == []

    def test_list_sizes_yields_what_list_yields_with_sizes_and_no_head(self, store, monkeypatch):
        sizes = {"manifests/0001": 0, "manifests/0002": 7, "packs/00/00aa": 1 << 20, "packs/01/01bb": 3, "packsx": 1}
        for key, size in sizes.items():
            store.put_if_absent(key, b"s" * size)
        expected = {prefix: [(k, sizes[k]) for k in store.list(prefix)]
                    for prefix in ("", "manifests/", "manifests/0002", "packs", "packs/01/", "nothing/")}

        def no_head(key):
            raise AssertionError(f"list_sizes made a HEAD request ({key}): the listing carries the sizes")
        monkeypatch.setattr(store, "head", no_head)

        for prefix, pairs in expected.items():
            assert list(store.list_sizes(prefix)) == pairs, prefix
        assert [k for k, _ in expected[""]] == sorted(sizes, key=str.encode)

    def test_delete_removes_key_and_is_idempotent(self, store):
        store.put_if_absent("d/one", b"1")
        store.put_if_absent("d/two", b"2")
        store.delete("d/one")
        store.delete("d/one")
        store.delete("never/existed")
        assert store.head("d/one") is None
        assert list(store.list()) == ["d/two"]

    def test_delete_many_removes_the_keys_and_skips_missing_ones(self, store):
        keys = ["manifests/0001", "manifests/0002", "packs/00/00aa", "packs/00/00bb", "packs/01/01cc", "config"]
        for key in keys:
            store.put_if_absent(key, b"k")
        store.delete_many([])
        store.delete_many(["packs/00/00aa", "never/existed", "packs/01/01cc", "manifests/0001", "packs/02/02dd"])
        assert list(store.list()) == ["config", "manifests/0002", "packs/00/00bb"]
        store.delete_many(("config", "manifests/0002", "packs/00/00bb", "config"))  # any sequence; twice is fine
        assert store.is_empty()

    def test_delete_many_checks_every_key_before_deleting_any(self, store):
        store.put_if_absent("a/b", b"1")
        for key in BAD_KEYS:
            with pytest.raises(ValueError):
                store.delete_many(["a/b", key])
        assert list(store.list()) == ["a/b"]

    def test_deleted_key_can_be_put_again(self, store):
        store.put_if_absent("a/b/c", b"old")
        store.delete("a/b/c")
        store.put_if_absent("a/b/c", b"new")
        assert store.get("a/b/c") == b"new"

    @pytest.mark.parametrize("key", BAD_KEYS)
    def test_invalid_keys_are_rejected(self, store, key):
        with pytest.raises(ValueError):
            store.put_if_absent(key, b"x")
        with pytest.raises(ValueError):
            store.get(key)
        with pytest.raises(ValueError):
            store.head(key)
        with pytest.raises(ValueError):
            store.delete(key)
        assert list(store.list()) == []

    def test_concurrent_put_if_absent_has_exactly_one_winner(self, store):
        barrier = threading.Barrier(8)
        winners, losers = [], []

        def race(n: int) -> None:
            payload = bytes([n]) * 100_000
            barrier.wait()
            try:
                store.put_if_absent("contested", payload)
                winners.append(payload)
            except KeyExists:
                losers.append(n)

        threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(winners) == 1 and len(losers) == 7
        assert store.get("contested") == winners[0]
        assert store.puts == 1

    def test_put_first_absent_takes_the_first_free_key_and_keeps_the_taken_ones(self, store):
        store.put_if_absent("s/i1", b"one")
        store.put_if_absent("s/i2", b"two")
        tried = []

        def keys():
            for n in itertools.count(1):
                tried.append(n)
                yield f"s/i{n}"

        assert store.put_first_absent(keys(), b"three") == "s/i3" and tried == [1, 2, 3]
        assert [store.get(f"s/i{n}") for n in (1, 2, 3)] == [b"one", b"two", b"three"]
        assert store.put_first_absent(iter(["s/i1", "s/i2"]), b"none") is None
        assert list(store.list()) == ["s/i1", "s/i2", "s/i3"] and store.puts == 3

    def test_staged_object_shows_under_no_key_until_published(self, store):
        staged = store.stage("manifests/0001", b"staged")
        assert list(store.list()) == [] and store.head("manifests/0001") is None and store.puts == 0
        staged.publish()
        staged.discard()
        assert store.get("manifests/0001") == b"staged" and list(store.list()) == ["manifests/0001"]
        assert store.puts == 1

    def test_publish_of_a_staged_object_to_a_taken_key_raises_and_keeps_the_old(self, store):
        staged = store.stage("k", b"second")
        store.put_if_absent("k", b"first")
        with pytest.raises(KeyExists):
            staged.publish()
        staged.discard()
        assert store.get("k") == b"first" and list(store.list()) == ["k"] and store.puts == 1

    def test_discarded_staged_object_leaves_nothing(self, store):
        store.stage("k", b"dropped").discard()
        assert list(store.list()) == [] and store.is_empty()

    def test_concurrent_put_first_absent_gives_every_writer_its_own_key(self, store):
        barrier = threading.Barrier(8)
        got: dict[int, str] = {}

        def race(n: int) -> None:
            barrier.wait()
            got[n] = store.put_first_absent((f"s/{k:02d}" for k in range(20)), bytes([n]) * 10_000)

        threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(got.values()) == [f"s/{k:02d}" for k in range(8)]
        assert all(store.get(key) == bytes([n]) * 10_000 for n, key in got.items())

    def test_counters_count_successful_puts_and_bytes(self, store):
        assert (store.puts, store.put_bytes) == (0, 0)
        store.put_if_absent("a", b"123")
        store.put_if_absent("b", io.BytesIO(b"12345"))
        with pytest.raises(KeyExists):
            store.put_if_absent("a", b"1234567")
        assert (store.puts, store.put_bytes) == (2, 8)

    def test_is_empty_until_first_put_and_after_last_delete(self, store):
        assert store.is_empty()
        store.put_if_absent("x/y", b"1")
        assert not store.is_empty()
        store.delete("x/y")
        assert store.is_empty()


def store_dirs(base: os.PathLike | str) -> Iterator[str]:
    """Distinct, not-yet-existing store directories under ``base``, for ``make_store`` factories."""
    return (os.path.join(base, f"store{n}") for n in itertools.count())

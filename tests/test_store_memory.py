"""The in-memory backend passes the store contract."""

import pytest
from store_contract import StoreContract

from journal.store import open_store
from journal.store.memory import MemoryStore


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def make_store(self):
        return MemoryStore


def test_open_store_memory_url_gives_a_new_empty_store_each_time():
    first = open_store("memory://")
    first.put_if_absent("k", b"1")
    second = open_store("memory://")
    assert isinstance(second, MemoryStore) and second.is_empty()


def test_memory_store_keeps_a_copy_of_mutable_input():
    store = MemoryStore()
    data = bytearray(b"abc")
    store.put_if_absent("k", data)
    data[0] = ord("z")
    assert store.get("k") == b"abc"

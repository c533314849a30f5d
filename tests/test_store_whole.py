"""``WholeReads``: small objects read once, whole; ranges of them answered from memory."""

from __future__ import annotations

from journal.store.counting import CountingStore
from journal.store.memory import MemoryStore
from journal.store.whole import WholeReads


def stored(objects: dict[str, bytes]) -> CountingStore:
    inner = MemoryStore()
    for key, data in objects.items():
        inner.put_if_absent(key, data)
    return CountingStore(inner)


def test_a_small_object_is_read_once_whole_and_its_ranges_come_from_memory():
    inner = stored({"packs/aa": bytes(range(200))})
    store = WholeReads(inner, {"packs/aa": 200}.get, small=256)

    got = [store.get("packs/aa", 10, 20), store.get("packs/aa", 150), store.get("packs/aa", 190, 500),
           store.get("packs/aa", 300, 400)]

    assert got == [bytes(range(10, 20)), bytes(range(150, 200)), bytes(range(190, 200)), b""]
    assert inner.gets["packs"] == 1 and inner.bytes_read == 200


def test_an_object_over_the_size_or_of_unknown_size_is_read_as_asked():
    inner = stored({"packs/big": b"b" * 1000, "manifests/1": b"m" * 10})
    store = WholeReads(inner, {"packs/big": 1000}.get, small=256)

    for _ in range(2):
        assert store.get("packs/big", 0, 4) == b"bbbb" and store.get("manifests/1", 2, 5) == b"mmm"

    assert inner.gets["packs"] == 2 and inner.gets["manifests"] == 2 and inner.bytes_read == 2 * (4 + 3)


def test_whole_objects_kept_stay_within_the_bytes_kept_the_least_recently_read_dropped():
    inner = stored({f"k{n}": bytes([n]) * 100 for n in range(3)})
    store = WholeReads(inner, lambda key: 100, small=100, kept=250)

    for key in ("k0", "k1", "k0", "k2", "k0", "k1"):    # k1 goes when k2 comes; k0 stays, read last
        store.get(key, 0, 1)

    assert inner.gets["k0"] == 1 and inner.gets["k1"] == 2 and inner.gets["k2"] == 1

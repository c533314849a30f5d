"""Index pages read ahead (``repository/pages_ahead.py``): the pages of many trees, a
level of every tree at a time, each level's reads at once."""

from __future__ import annotations

import threading

from journal.format.index import load_entries
from journal.repository.history import ManifestCache
from journal.repository.pages_ahead import page_at, read_pages_ahead
from journal.repository.repository import Repository
from journal.store import open_store
from journal.store.counting import CountingStore

TREES = ("claude", "codex", "openclaw")


def roots_of(live, seq: int) -> dict:
    trees = live.manifest(seq).trees
    return {name: trees[name].root for name in TREES}


def test_the_roots_of_every_tree_are_read_at_once_then_their_pages_a_level_at_a_time(live):
    live.checkpoint()
    repo = live.repo()
    roots = roots_of(live, 1)
    together = threading.Barrier(len(roots), timeout=30)   # each root's read waits until all are under way
    read = []

    def read_page(ref):
        read.append(ref)
        if ref in roots.values():
            together.wait()
        return repo.read_page(ref)

    ahead = read_pages_ahead(read_page, list(roots.values()))

    every = {ref.id: ref for root in roots.values()
             for ref in load_entries(root, lambda r: repo.read_page(r)[0])[1].values()}
    assert {page_at(ref) for ref in every.values()} == set(ahead) and len(read) == len(every)
    assert set(read[:len(roots)]) == set(roots.values())                  # the first level first
    assert not together.broken


def test_a_restore_s_tree_walks_read_no_page_the_read_ahead_read(live):
    live.checkpoint()
    (live.codex / "config.toml").write_text('model = "o3"\n')
    assert live.checkpoint().seq == 2
    store = CountingStore(open_store(live.store_url))
    store.read_ahead = True                                # as over a link: the pages are read ahead
    cache = ManifestCache(Repository.open(store))

    cache.read_ahead(2, TREES)
    ahead = store.gets["packs"]
    walked = [cache.tree(2, name) for name in TREES]

    assert ahead > 0 and store.gets["packs"] == ahead
    assert walked == [ManifestCache(live.repo()).tree(2, name) for name in TREES]

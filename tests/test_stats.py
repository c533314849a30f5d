"""``journal stats`` (``journal/browse/stats.py``, ``journal/cli/stats.py``): the store's
bytes and objects per tree and in total, logical against stored size, growth per day,
the largest files and the local state, from the listing, the manifests and the index
pages only, with the store requests it made counted (``test_gc.CountingStore``)."""

from __future__ import annotations

import datetime
import json
import math
import sqlite3

import msgspec
import pytest

from journal.browse.stats import store_stats
from journal.format.index import iter_pages
from journal.format.model import KIND_DIR, KIND_SQLITE
from journal.repository.repository import Repository, manifest_key, pack_key
from journal.store import open_store
from journal.supervise.status import local_size

from conftest import Live, OpencodeLive
from test_gc import CountingStore

pytest_plugins = ["tests.s3server"]

ROLLOUT = "sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
DAY = 86_400 * 10**9


@pytest.fixture
def history(live: Live) -> Live:
    """Three checkpoints of the fixture trees: a codex file rewritten, then a transcript appended to."""
    live.checkpoint()
    (live.codex / "config.toml").write_text('model = "gpt-5.3-codex"\n')
    live.checkpoint()
    live.append(f"codex-home/{ROLLOUT}", '{"type":"event","n":1}\n')
    assert live.checkpoint().seq == 3
    return live


class Walk:
    """What a full walk of every checkpoint finds, tree by tree, computed here without stats:
    each tree's distinct records by position, and every index record (page or page base)."""

    def __init__(self, repo: Repository):
        self.records: dict[str, dict[tuple[str, int], tuple[int, int, bool]]] = {}
        self.index: set[tuple[str, int, int]] = set()
        self.history: dict[str, int] = {}
        self.databases: dict[str, int] = {}
        self.manifests = repo.manifest_seqs()
        for seq in self.manifests:
            for name, tree in repo.load_manifest(seq)[0].trees.items():
                self.history[name] = self.history.get(name, 0) + tree.bytes
                self.tree(repo, name, tree)

    def tree(self, repo: Repository, name: str, tree) -> None:
        mine = self.records.setdefault(name, {})
        for ref, page in iter_pages(tree.root, lambda r: repo.read_page(r)[0]):
            base = repo.read_page(ref)[1]
            for page_ref in (ref, base) if base is not None else (ref,):
                mine[(page_ref.pack, page_ref.offset)] = (page_ref.length, page_ref.size, False)
                self.index.add((pack_key(page_ref.pack), page_ref.offset, page_ref.offset + page_ref.length))
            for e in page.entries:
                if e.kind == KIND_SQLITE:
                    self.databases[name] = self.databases.get(name, 0) + e.size
                for ref2 in (*e.refs, *(b for b in e.bases if b is not None)):
                    mine[(ref2.pack, ref2.offset)] = (ref2.length, ref2.size, e.kind != KIND_SQLITE)

    def stored(self, name: str) -> int:
        return sum(length for length, _size, _data in self.records[name].values())

    def data(self, name: str) -> int:
        return sum(size for _length, size, data in self.records[name].values() if data)


def counted_stats(live: Live, top: int = 10):
    """``store_stats`` over a store whose every call is recorded; the store's calls made
    by stats alone (opening the store before it is not counted)."""
    store = CountingStore(open_store(live.store_url))
    repo = Repository.open(store)
    before = len(store.gets), len(store.lists), len(store.heads)
    result = store_stats(repo, top)
    return result, store.gets[before[0]:], store.lists[before[1]:], store.heads[before[2]:]


def test_stats_counts_every_tree_from_the_listing_the_manifests_and_each_index_page_once(history):
    result, gets, lists, heads = counted_stats(history)
    walk = Walk(history.repo())

    assert lists == [""] and heads == []
    assert [key for key, _s, _e in gets if not key.startswith("packs/")] == [manifest_key(s) for s in (3, 2, 1)]
    pack_reads = [(key, start, end) for key, start, end in gets if key.startswith("packs/")]
    assert set(pack_reads) == walk.index and len(pack_reads) == len(walk.index), "each index record once, no data"
    assert result.requests.lists == 1 and result.requests.manifest_gets == 3
    assert (result.requests.index_gets, result.requests.other_gets, result.requests.heads) == (len(walk.index), 0, 0)
    for tree in result.trees:
        assert (tree.objects, tree.stored_bytes) == (len(walk.records[tree.name]), walk.stored(tree.name)), tree.name
        assert tree.data_bytes == walk.data(tree.name) and tree.history_bytes == walk.history[tree.name]
        assert tree.checkpoints == 3
    every = {at: rec for records in walk.records.values() for at, rec in records.items()}
    assert result.total.objects == len(every)
    assert result.total.stored_bytes == sum(length for length, _s, _d in every.values())


def test_stats_counts_the_store_from_one_listing(history):
    result = store_stats(history.repo())
    files = {str(p.relative_to(history.store_path)): p.stat().st_size
             for p in history.store_path.rglob("*") if p.is_file()}

    assert (result.objects, result.bytes) == (len(files), sum(files.values()))
    packs = [size for key, size in files.items() if key.startswith("packs/")]
    assert (result.packs, result.pack_bytes) == (len(packs), sum(packs))
    assert (result.manifests, result.checkpoints, result.newest) == (3, 3, 3)
    assert result.unattributed_bytes == result.pack_bytes - result.total.stored_bytes >= 0


def test_stats_logical_size_is_what_a_restore_of_the_newest_checkpoint_writes(history, tmp_path):
    result = store_stats(history.repo())
    history.run("restore", "--to", str(tmp_path / "out"), expect=0)

    for tree in result.trees:
        written = [p for p in (tmp_path / "out" / tree.name).rglob("*") if p.is_symlink() or not p.is_dir()]
        assert (tree.files, tree.logical_bytes) == (len(written), sum(p.lstat().st_size for p in written)), tree.name
    assert result.total.logical_bytes == sum(t.logical_bytes for t in result.trees)


def test_a_tree_unchanged_over_three_checkpoints_dedups_three_times(history):
    trees = {t.name: t for t in store_stats(history.repo()).trees}

    claude = trees["claude"]
    assert claude.history_bytes == 3 * claude.logical_bytes and claude.dedup == pytest.approx(3.0)
    assert claude.compression == pytest.approx(claude.data_bytes / claude.data_stored_bytes) and claude.compression > 1
    assert 1 < trees["codex"].dedup < 3, "codex changed twice: less than three copies' worth shared"


def test_stats_growth_adds_what_each_checkpoint_added_by_utc_day(history):
    first = history.manifest(1).created_ns
    day0 = datetime.datetime.fromtimestamp(first / 1e9, datetime.timezone.utc).date()
    history.publish({}, created_ns=first + 2 * DAY, created="later", added_bytes=1000, added_objects=2)
    added = [history.manifest(s).added_bytes for s in (1, 2, 3)]

    result = store_stats(history.repo())

    assert [(d.date, d.checkpoints, d.added_bytes) for d in result.growth] == [
        (day0.isoformat(), 3, sum(added)), ((day0 + datetime.timedelta(days=2)).isoformat(), 1, 1000)]
    assert result.days == 3 and result.bytes_per_day == pytest.approx((sum(added) + 1000) / 3)
    assert result.last_time == "later"


def test_stats_lists_the_largest_files_of_the_newest_checkpoint(history):
    result = store_stats(history.repo(), top=3)

    sizes = sorted(((e.size, name, e.path) for name in ("codex", "claude", "openclaw")
                    for e in history.entries(name).values() if e.kind != KIND_DIR and e.kind != "symlink"),
                   reverse=True)
    assert [(f.size, f.tree, f.path) for f in result.largest] == sizes[:3]


def test_a_database_is_counted_in_its_tree_history_and_its_pages_are_not_read(tmp_path):
    live = OpencodeLive(tmp_path / "a", tmp_path / "store")
    with sqlite3.connect(live.db) as db:
        db.execute("CREATE TABLE t (x)")
        db.executemany("INSERT INTO t VALUES (?)", [(b"x" * 3000,)] * 50)
    live.tick()
    with sqlite3.connect(live.db) as db:
        db.execute("INSERT INTO t VALUES (?)", (b"y" * 3000,))
    assert live.tick() == 2

    result, gets, _lists, _heads = counted_stats(live)
    walk = Walk(live.repo())

    tree = next(t for t in result.trees if t.name == "opencode")
    assert tree.database_bytes == walk.databases["opencode"] == live.entry(1).size + live.entry(2).size
    assert {(k, s, e) for k, s, e in gets if k.startswith("packs/")} <= walk.index, "no page map, no page read"
    maps = {(r.pack, r.offset) for seq in (1, 2) for r in live.entry(seq).refs}
    assert tree.objects == len(walk.records["opencode"]) and maps <= walk.records["opencode"].keys()
    assert tree.data_bytes == 0 and tree.dedup is None, "a database's pages are not file or transcript data"


def test_stats_json_gives_the_store_the_local_state_and_the_requests(history):
    proc = history.run("stats", "--json", "--top", "2", expect=0)
    out = json.loads(proc.stdout)

    assert [t["name"] for t in out["trees"]] == ["claude", "codex", "openclaw"] and len(out["largest"]) == 2
    assert out["requests"]["lists"] == 1 and out["requests"]["manifest_gets"] == 3
    assert out["state_dir"] == str(history.state_dir)
    assert out["local_state"] == msgspec.to_builtins(local_size(str(history.state_dir)))
    assert set(out["local_state"]) == {"bytes", "chunks_bytes", "sqlite_base_bytes", "maps_bytes", "pages_bytes",
                                       "spool_bytes", "live_trees_bytes", "share_of_live_trees"}
    assert out["total"]["dedup"] == pytest.approx(
        (out["total"]["history_bytes"] - out["total"]["database_bytes"]) / out["total"]["data_bytes"])


def test_stats_text_names_each_tree_the_growth_and_the_requests(history):
    text = history.run("stats", expect=0).stdout

    for tree in ("claude", "codex", "openclaw", "total"):
        assert any(line.startswith(f"{tree} ") for line in text.splitlines()), tree
    assert "growth: " in text and "largest files (checkpoint 3):" in text
    assert "requests: 1 listing, 3 manifest GETs" in text and "no data pack read" in text
    assert f"local state ({history.state_dir}): " in text and "spool 0" in text


def test_stats_passes_over_an_unreadable_manifest_with_a_warning_and_exits_3(history):
    path = history.store_path / manifest_key(2)
    path.write_bytes(path.read_bytes()[:-3])

    proc = history.run("stats", "--json", expect=3)
    out = json.loads(proc.stdout)

    assert out["checkpoints"] == 2 and out["manifests"] == 3 and out["newest"] == 3
    assert len(out["skipped"]) == 1 and out["skipped"][0].startswith("checkpoint 2 is unreadable")
    text = history.run("stats", expect=3)
    assert "warning: stats: checkpoint 2 is unreadable" in text.stderr


def test_stats_of_an_empty_store(live):
    live.run("init", expect=0)

    result = store_stats(live.repo())

    assert (result.checkpoints, result.trees, result.largest, result.growth) == (0, [], [], [])
    assert result.objects == 1 and math.isclose(result.bytes_per_day, 0)
    assert "checkpoints: none" in live.run("stats", expect=0).stdout


def test_stats_on_s3_states_the_requests_the_server_saw(history, s3_bucket, s3_server):
    cloud = open_store(s3_bucket.url)
    for key in history.store.list():
        cloud.put_if_absent(key, history.store.get(key))
    local = json.loads(history.run("stats", "--json", expect=0).stdout)
    mark = s3_bucket.mark()

    out = json.loads(history.run("stats", "--json", env={**s3_server.env, "JOURNAL_STORE": s3_bucket.url},
                                 expect=0).stdout)

    seen = s3_server.requests[mark:]
    assert all(method == "GET" for method, _path, _query in seen), seen
    asked = out["requests"]
    assert len([r for r in seen if "list-type" in r[2]]) == asked["lists"] == 1
    assert len([r for r in seen if "list-type" not in r[2]]) == 1 + asked["manifest_gets"] + asked["index_gets"], \
        "the config, then exactly the reads stats counted"
    assert {k: v for k, v in out.items() if k != "store"} == {k: v for k, v in local.items() if k != "store"}

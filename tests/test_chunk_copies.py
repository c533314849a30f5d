"""The local chunk copies follow the local state and stay bounded
(``journal/checkpoint/chunk_copies.py``, design §10): a deleted file's copies go at the
checkpoint that drops it, the directory never holds more than its limit, and
``journal status`` reports what the state directory holds."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import Live, one_line_error

TREE = "claude"


def chunk_ids(live: Live, name: str) -> set[str]:
    """Every chunk the newest checkpoint's entry of ``name`` names (refs and bases)."""
    entry = live.entries(TREE)[name]
    return {r.id for r in (*entry.refs, *entry.bases) if r is not None}


def base_ids(live: Live, name: str) -> set[str]:
    """The whole chunks the next rewrite of ``name`` makes its deltas against: each
    chunk's base, or the chunk itself when it is stored whole."""
    entry = live.entries(TREE)[name]
    return {(base or ref).id for ref, base in zip(entry.refs, entry.bases or (None,) * len(entry.refs))}


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_deleted_files_chunk_copies_go_at_the_checkpoint_that_drops_it(bare_live):
    """Rounds of: create a 2 MiB file, checkpoint, rewrite it (its chunks are kept as
    copies, the bases of its next delta), checkpoint, delete it, checkpoint, through
    the CLI. After each deletion no copy of either version's chunks is left, the copies
    of a file that stays are kept, and the directory does not grow from round to round;
    ``journal status --json`` reports the state directory's bytes and its caches'."""
    live = bare_live
    claude = live.local / "agent-state" / TREE
    claude.mkdir(parents=True)
    chunks = live.state_dir / "chunks"
    settings = claude / "settings.json"
    settings.write_bytes(b'{"turn": -1, "theme": "dark"}' + b" " * 3000)
    live.checkpoint_ok()
    sizes = []
    for turn in range(3):
        settings.write_bytes(b'{"turn": %02d, "theme": "dark"}' % turn + b" " * 3000)
        big = claude / "big.json"
        big.write_bytes(os.urandom(2 << 20))
        live.checkpoint_ok()
        first = chunk_ids(live, "big.json")
        big.write_bytes(os.urandom(2 << 20))
        live.checkpoint_ok()
        second = chunk_ids(live, "big.json")
        assert second <= set(os.listdir(chunks)), "the rewrite keeps its chunks as the next delta's bases"
        big.unlink()
        done = live.checkpoint_ok()
        assert done["seq"] is not None and sum(t["files_deleted"] for t in done["trees"]) == 1
        assert not (first | second) & set(os.listdir(chunks)), f"round {turn}: a deleted file's copies stayed"
        assert base_ids(live, "settings.json") <= set(os.listdir(chunks)), "a kept file's copies stay"
        sizes.append(tree_bytes(chunks))
    assert sizes[-1] == sizes[0] < 64 << 10, sizes

    report = json.loads(live.run("status", "--json", expect=0).stdout)["local_state"]
    state = live.state_dir
    live_bytes = tree_bytes(claude)
    assert report == {"bytes": tree_bytes(state), "chunks_bytes": tree_bytes(chunks),
                      "sqlite_base_bytes": 0, "maps_bytes": 0, "pages_bytes": tree_bytes(state / "pages"),
                      "spool_bytes": 0, "live_trees_bytes": live_bytes,
                      "share_of_live_trees": round(tree_bytes(state) / live_bytes, 4)}
    assert report["pages_bytes"] > 0
    text = live.run("status", expect=0).stdout
    assert f"local state: {report['bytes']:,} bytes (chunks {report['chunks_bytes']:,}," in text


def test_the_chunk_copies_stay_within_their_limit_dropping_the_least_recently_used(tmp_path):
    """Three files of 400 KiB under a 1 MiB limit: a's and b's rewrites keep copies, a's
    next rewrite is a delta of its copy (which marks it used), and c's rewrite makes a
    third copy: the least recently used one, b's, is dropped, and the rest fit."""
    live = Live(tmp_path / "a", tmp_path / "store", env={"JOURNAL_CHUNK_COPIES_LIMIT": "1MiB"})
    claude = live.local / "agent-state" / TREE
    claude.mkdir(parents=True)
    chunks = live.state_dir / "chunks"
    body = {name: bytearray(os.urandom(400 << 10)) for name in ("a", "b", "c")}

    def rewrite(name: str, whole: bool) -> None:
        if whole:
            body[name] = bytearray(os.urandom(400 << 10))
        else:
            body[name][:8] = os.urandom(8)
        (claude / f"{name}.json").write_bytes(bytes(body[name]))
        live.checkpoint()

    for name in body:
        (claude / f"{name}.json").write_bytes(bytes(body[name]))
    live.checkpoint()
    rewrite("a", whole=True)
    copy_a = chunk_ids(live, "a.json")
    rewrite("b", whole=True)
    copy_b = chunk_ids(live, "b.json")
    rewrite("a", whole=False)
    assert live.entries(TREE)["a.json"].bases[0].id in copy_a, "a delta of a's copy"
    assert set(os.listdir(chunks)) == copy_a | copy_b
    rewrite("c", whole=True)
    assert set(os.listdir(chunks)) == copy_a | chunk_ids(live, "c.json")
    assert tree_bytes(chunks) <= 1 << 20


def test_a_chunk_copies_limit_that_is_no_size_is_refused_naming_where_it_was_set(bare_live):
    (bare_live.local / "agent-state" / TREE).mkdir(parents=True)
    for value in ("lots", "-1", "2TiB"):
        proc = bare_live.run("checkpoint", env={"JOURNAL_CHUNK_COPIES_LIMIT": value}, expect=2)
        line = one_line_error(proc)
        assert f"chunk_copies_limit {value!r} (JOURNAL_CHUNK_COPIES_LIMIT) must be a size" in line, line
    assert not bare_live.state_dir.exists(), "nothing was made"

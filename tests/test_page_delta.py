"""Index pages stored as deltas against the page they replace (journal/checkpoint/page_delta.py)."""

from __future__ import annotations

import json
import shutil

import msgspec
import pytest

from journal.errors import CorruptObject
from journal.format.codec import PLAIN
from journal.format.model import BlobRef, Page, decode, encode
from journal.format.objects import FLAG_BASE_AT, BaseAt, BaseRef, FLAG_DELTA, HEADER, KIND_PAGE, encode_record, parse_header
from journal.repository.repository import pack_key
from journal.verify import verify

SESSIONS = "agent-state/claude/projects/-home-node-work"


def sessions_tree(live, n: int = 40):
    root = live.local / SESSIONS
    root.mkdir(parents=True)
    for i in range(n):
        (root / (f"s{i:03d}.jsonl" if n <= 1000 else f"s{i:04d}.jsonl")).write_bytes(b'{"type":"user","text":"hello %d"}\n' % i)
    return root


def pages(live, tree: str = "claude"):
    """(ref, flags, base, page) for every index page of ``tree`` in the newest manifest."""
    repo = live.repo()
    manifest, _ = repo.load_manifest(repo.manifest_seqs()[-1])
    out, stack = [], [manifest.trees[tree].root]
    while stack:
        ref = stack.pop()
        data = repo.store.get(pack_key(ref.pack), ref.offset, ref.offset + ref.length)
        flags = parse_header(data, key="page").flags
        payload, base = repo.read_page(ref)
        page = decode(payload, Page)
        out.append((ref, flags, base, page))
        stack.extend(c.ref if c.ref.pack else msgspec.structs.replace(c.ref, pack=ref.pack) for c in page.children)
    return out


def append(path, n: int) -> None:
    with open(path, "ab") as fh:
        fh.write(b'{"type":"assistant","text":"reply %d"}\n' % n)


def test_a_changed_leaf_is_a_small_delta_and_restores_exactly(bare_live, tmp_path):
    live = bare_live
    root = sessions_tree(live)
    live.checkpoint()
    whole = {ref.id: ref.length for ref, flags, _, _ in pages(live) if not flags & FLAG_DELTA}

    append(root / "s007.jsonl", 1)
    before = live.store.put_bytes
    live.checkpoint()

    # the leaf holding the entry and the root above it both changed: both are deltas,
    # each naming its whole base by position (format 6); the leaf's is under half its
    # base's size, and even the small root's is smaller than its base
    after = pages(live)
    changed = {page.level: (ref, flags, base) for ref, flags, base, page in after if ref.id not in whole}
    assert sorted(changed) == [0, 1] and len(after) > 2
    for ref, flags, base in changed.values():
        assert flags == FLAG_DELTA | FLAG_BASE_AT and base.id in whole and ref.length < whole[base.id]
    leaf, _, leaf_base = changed[0]
    assert leaf.length * 2 <= whole[leaf_base.id]
    assert live.store.put_bytes - before < 1300
    assert verify(live.repo(), full=True).ok
    out = tmp_path / "out"
    assert live.run("restore", "--to", str(out)).returncode == 0
    assert (out / "claude" / "projects" / "-home-node-work" / "s007.jsonl").read_bytes() == \
        (root / "s007.jsonl").read_bytes()


def test_deltas_stay_one_deep_and_a_drifting_page_gets_a_new_whole_page(bare_live):
    live = bare_live
    root = sessions_tree(live)
    live.checkpoint()
    repo = live.repo()
    seen = {ref.id for ref, _, _, _ in pages(live)}
    leaf_deltas = []   # per checkpoint: was each new leaf page stored as a delta?
    for i in range(60):
        append(root / f"s{i % 40:03d}.jsonl", i)
        live.checkpoint()
        now = pages(live)
        for ref, flags, base, _ in now:
            if flags & FLAG_DELTA:
                repo.read_blob(base, KIND_PAGE)  # a base is whole: it reads without a base
        leaf_deltas += [bool(flags & FLAG_DELTA) for ref, flags, _, page in now if page.level == 0 and ref.id not in seen]
        seen |= {ref.id for ref, _, _, _ in now}
    assert True in leaf_deltas
    # as a leaf drifts from its base, a delta stops paying and a whole page is written again
    assert False in leaf_deltas[1:], leaf_deltas


def test_a_delta_over_a_delta_is_refused(bare_live):
    live = bare_live
    root = sessions_tree(live)
    live.checkpoint()
    append(root / "s001.jsonl", 1)
    live.checkpoint()
    ref, _, base, page = next(p for p in pages(live) if p[1] & FLAG_DELTA)
    repo = live.repo()
    # a hand-made page delta whose "base" is itself a delta
    payload = encode(msgspec.structs.replace(page, entries=page.entries[:-1]))
    pid, record = encode_record(KIND_PAGE, payload, base=repo.read_page(ref)[0], names=BaseRef(encode(ref)))
    path = live.store_path / "packs" / "ff" / ("ff" * 32)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(record)
    with pytest.raises(CorruptObject, match="without its base"):
        repo.read_page(BlobRef(pid, "ff" * 32, 0, len(record), len(payload)))


def test_a_corrupt_base_page_is_found_by_verify(bare_live):
    live = bare_live
    root = sessions_tree(live)
    live.checkpoint()
    append(root / "s002.jsonl", 1)
    live.checkpoint()
    _, _, base, _ = next(p for p in pages(live) if p[1] & FLAG_DELTA)
    path = live.store_path / pack_key(base.pack)
    data = bytearray(path.read_bytes())
    data[base.offset + HEADER.size + 4] ^= 0xFF
    path.write_bytes(bytes(data))

    result = verify(live.repo())
    assert not result.ok and any(f.kind == "corrupt-page" for f in result.findings)


def test_gc_keeps_the_base_of_a_kept_delta(bare_live):
    live = bare_live
    root = sessions_tree(live)
    live.checkpoint()
    for i in range(3):
        append(root / "s003.jsonl", i)
        live.checkpoint()
    assert any(flags & FLAG_DELTA for _, flags, _, _ in pages(live))

    for _ in range(2):  # mark, then sweep
        proc = live.run("gc", "--keep-last", "1", "--grace", "0s")
        assert proc.returncode == 0, proc.stderr
    assert live.repo().manifest_seqs() == [4]
    assert verify(live.repo(), full=True).ok
    for ref, flags, base, _ in pages(live):
        if flags & FLAG_DELTA:
            assert (live.store_path / pack_key(base.pack)).exists()


def test_a_lost_local_page_cache_reads_the_base_from_the_store(bare_live):
    live = bare_live
    root = sessions_tree(live)
    live.checkpoint()
    append(root / "s004.jsonl", 1)
    live.checkpoint()
    shutil.rmtree(live.local / ".journal" / "pages")

    append(root / "s004.jsonl", 2)
    live.checkpoint()

    assert any(flags & FLAG_DELTA for _, flags, _, _ in pages(live))
    assert (live.local / ".journal" / "pages").is_dir()
    assert verify(live.repo(), full=True).ok


def _delta_fixture(live):
    """A store with one page delta; returns (repo, the delta's ref, its base ref, the
    whole pages of the first checkpoint, the new page's payload)."""
    root = sessions_tree(live)
    live.checkpoint()
    first = [p for p in pages(live)]
    append(root / "s005.jsonl", 1)
    live.checkpoint()
    ref, _, base, page = next(p for p in pages(live) if p[1] & FLAG_DELTA and p[3].level == 0)
    return live.repo(), ref, base, first, encode(page)


def _put_record(live, record: bytes) -> str:
    pack = "ee" * 32
    path = live.store_path / "packs" / "ee" / pack
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(record)
    return pack


def test_a_format_3_delta_naming_its_base_as_json_still_reads(bare_live):
    live = bare_live
    repo, ref, base, _, payload = _delta_fixture(live)
    pid, record = encode_record(KIND_PAGE, payload, base=repo.read_blob(base, KIND_PAGE), names=BaseRef(encode(base)))
    assert parse_header(record, key="x").flags == FLAG_DELTA
    pack = _put_record(live, record)
    got, got_base = repo.read_page(BlobRef(pid, pack, 0, len(record), len(payload)))
    assert got == payload and got_base == base


def test_a_base_position_naming_other_bytes_is_refused(bare_live):
    """The position carries no id: a delta decoded against another whole page (or a
    delta, or bytes past the pack's end) must fail, never yield a page."""
    live = bare_live
    repo, ref, base, first, payload = _delta_fixture(live)
    other = next(r for r, flags, _, _ in first if r.id != base.id and not flags)
    delta_base = next(r for r, flags, _, _ in pages(live) if flags & FLAG_DELTA)
    cases = {"another whole page": (other, "hash mismatch|zstd"),
             "a delta": (delta_base, "without its base"),
             "past the pack's end": (BlobRef("", base.pack, base.offset + 10 ** 6, base.length, 0), "too short")}
    for name, (at, match) in cases.items():
        pid, record = encode_record(KIND_PAGE, payload, base=repo.read_blob(base, KIND_PAGE),
                                    names=BaseAt(at.pack, at.offset, at.length))
        pack = _put_record(live, record)
        with pytest.raises(CorruptObject, match=match):
            repo.read_page(BlobRef(pid, pack, 0, len(record), len(payload)))


def test_a_torn_base_position_is_refused(bare_live):
    live = bare_live
    repo, ref, base, _, payload = _delta_fixture(live)
    pid, record = encode_record(KIND_PAGE, payload, base=repo.read_blob(base, KIND_PAGE),
                                names=BaseAt(base.pack, base.offset, base.length))
    n = HEADER.size
    torn = record[:n] + (43).to_bytes(2, "big") + record[n + 2:n + 2 + 43] + record[n + 2 + 44:]
    torn = torn[:16] + (len(torn) - n).to_bytes(8, "big") + torn[24:]   # stored_size matches the record
    pack = _put_record(live, torn)
    with pytest.raises(CorruptObject, match="names its base in 43 bytes"):
        repo.read_page(BlobRef(pid, pack, 0, len(torn), len(payload)))


def test_a_delta_page_is_never_made_the_base_of_another(bare_live):
    """Whatever the local state says, a page read from the store to serve as a base must
    be whole: a delta offered as a base makes the new page whole, never a delta of a
    delta (which no reader would accept)."""
    from journal.repository.blob_cache import BlobCache
    from journal.checkpoint.page_delta import IndexWriter

    live = bare_live
    repo, ref, base, first, payload = _delta_fixture(live)
    shutil.rmtree(live.local / ".journal" / "pages", ignore_errors=True)   # nothing local: read the store
    pages = BlobCache(live.cfg.state_dir, repo, "pages", KIND_PAGE)
    with pytest.raises(CorruptObject, match="without its base"):
        pages.read(ref)

    class Pack:
        codec = PLAIN

        def add_record(self, pid, record, size):
            self.record = record
            return BlobRef(pid, "", 0, len(record), size)

    pack = Pack()
    page = decode(payload, Page)
    changed = encode(msgspec.structs.replace(page, entries=page.entries[:-1]))
    IndexWriter(pack, pages)._add(changed, ref)   # offered a delta as the base
    assert parse_header(pack.record, key="new").flags == 0


def test_identical_pages_in_two_trees_keep_their_own_bases_through_gc(bare_live, tmp_path):
    """Two trees may build byte-identical pages (directory entries carry no mtime): one
    tree stores its page as a delta, the other whole. Each tree's cache must record the
    base of its own record only; otherwise, once the first tree moves on and gc sweeps
    that base, the second tree's next page is made a delta of a deleted base."""
    live = bare_live
    a = live.local / "agent-state" / "gemini-home" / ".gemini"
    b = live.local / "oc-home" / ".openclaw"
    name = "dir-{:02d}-with-a-longish-name"
    (a / "z").mkdir(parents=True)
    for i in range(1, 40):
        (b / name.format(i)).mkdir(parents=True)
    live.checkpoint()
    (a / "z").rmdir()
    for i in range(1, 41):
        (a / name.format(i)).mkdir()
    (b / name.format(40)).mkdir()
    live.checkpoint()                       # both trees now hold the same directories
    for d in b.iterdir():
        d.rmdir()
    (b / "q").mkdir()
    live.checkpoint()                       # the second tree moves on
    for _ in range(2):
        proc = live.run("gc", "--keep-last", "1", "--grace", "0s")
        assert proc.returncode == 0, proc.stderr
    (a / name.format(41)).mkdir()
    live.checkpoint()                       # the first tree changes
    assert verify(live.repo(), full=True).ok
    out = tmp_path / "out"
    proc = live.run("restore", "--to", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert not [t["fallbacks"] for t in json.loads(proc.stdout)["trees"] if t["fallbacks"]]
    assert sorted(p.name for p in (out / "gemini").iterdir()) == sorted(p.name for p in a.iterdir())


def _counting_commit(monkeypatch):
    """Counts what a checkpoint's commit does to build its indexes: full builds, the
    pages of the last index it decodes (by level), and pages it reads from the store."""
    from journal.checkpoint import commit
    from journal.repository.repository import Repository

    seen = {"full": 0, "decoded": [], "store": 0}
    real_build, real_decode, real_read = commit.build_index, commit.decode_page, Repository.read_blob

    def build(*args, **kwargs):
        seen["full"] += 1
        return real_build(*args, **kwargs)

    def decode_page(payload, where):
        page = real_decode(payload, where)
        seen["decoded"].append(page.level)
        return page

    def read_blob(self, ref, kind=None):
        seen["store"] += kind == KIND_PAGE
        return real_read(self, ref, kind)

    monkeypatch.setattr(commit, "build_index", build)
    monkeypatch.setattr(commit, "decode_page", decode_page)
    monkeypatch.setattr(Repository, "read_blob", read_blob)
    return seen


def test_a_one_change_tick_of_a_large_tree_updates_its_index_from_one_leaf_read_locally(bare_live, tmp_path,
                                                                                        monkeypatch):
    """3,000 transcripts (three index levels), one appended to on each of three ticks: each
    commit updates the last index (no full build), decoding its inner pages and the one
    leaf the changed path is in, all from the local copies (no page read from the
    store), whether that leaf was stored whole or as a delta; the result restores
    exactly and verifies."""
    live = bare_live
    root = sessions_tree(live, 3000)
    live.checkpoint()
    levels = max(page.level for _, _, _, page in pages(live)) + 1
    assert levels >= 3, "the tree must have inner pages for this test to mean anything"
    seen = _counting_commit(monkeypatch)
    for tick, name in enumerate(("s0007.jsonl", "s2500.jsonl", "s0008.jsonl"), 1):
        append(root / name, tick)
        seen.update(full=0, decoded=[], store=0)
        result = live.checkpoint()
        assert sum(t.changed for t in result.trees) == 1
        assert (seen["full"], seen["store"]) == (0, 0), (tick, seen)
        assert sorted(seen["decoded"]) == [0] + sorted(p.level for _, _, _, p in pages(live) if p.level), tick
    assert verify(live.repo(), full=True).ok
    out = tmp_path / "out"
    assert live.run("restore", "--to", str(out)).returncode == 0
    for name in ("s0007.jsonl", "s2500.jsonl", "s0008.jsonl", "s0009.jsonl"):
        assert (out / "claude" / "projects" / "-home-node-work" / name).read_bytes() == (root / name).read_bytes()


def test_a_last_index_unreadable_locally_and_in_the_store_is_built_whole(bare_live, tmp_path, monkeypatch):
    """The local page copies lost: the update reads the last index's pages from the store
    (and keeps them). Lost too from the store (its index pack truncated): the commit
    builds the index whole, as a first checkpoint does, and the new checkpoint restores."""
    live = bare_live
    root = sessions_tree(live, 300)
    live.checkpoint()
    seen = _counting_commit(monkeypatch)
    shutil.rmtree(live.local / ".journal" / "pages")
    append(root / "s004.jsonl", 1)
    live.checkpoint()
    assert seen["full"] == 0 and seen["store"] >= 2 and (live.local / ".journal" / "pages").is_dir()

    shutil.rmtree(live.local / ".journal" / "pages")
    index_pack = pages(live)[0][0].pack
    path = live.store_path / pack_key(index_pack)
    path.write_bytes(path.read_bytes()[:40])
    seen.update(full=0, store=0)
    append(root / "s005.jsonl", 2)
    result = live.checkpoint()
    assert result.seq == 3 and seen["full"] == 1 and seen["store"] >= 1
    out = tmp_path / "out"
    assert live.run("restore", "--to", str(out)).returncode == 0
    assert (out / "claude" / "projects" / "-home-node-work" / "s005.jsonl").read_bytes() == \
        (root / "s005.jsonl").read_bytes()

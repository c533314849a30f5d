"""The on-disk format, pinned by the golden store under tests/golden/ (docs/design.md §3-9, §18).

The golden store was written by ``tools/make_golden.py``. These tests restore it with
the current code, decode it with a reader written from the documented format
(``tests/helpers/format_reader.py`` and here: struct + zstandard + json, no journal
imports), and check that the current writer still produces the same logical content.
A format change must fail here; it comes with regenerated golden data and a new
version in docs/design.md §18.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys

import pytest

from conftest import golden_cli
from helpers.format_reader import (FLAG_BASE_AT, FLAG_DELTA, FLAG_ENTRY_BASES, HEADER, KIND_CHUNK, KIND_DBPAGE,
                                   KIND_MANIFEST, KIND_PAGE, KIND_PAGEMAP, KIND_SEGMENT, StoreFiles, decode_record,
                                   read_header)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
GOLDEN = os.path.join(HERE, "golden")
GOLDEN_STORE = os.path.join(GOLDEN, "store")
GOLDEN_TREE = os.path.join(GOLDEN, "tree")
TREE_NAME = "codex"

MANIFEST_FIELDS = {
    "version": int, "seq": int, "parent": (int, type(None)), "parent_id": (str, type(None)),
    "created": str, "created_ns": int, "host": str, "pid": int, "writer": str,
    "trees": dict, "packs": list, "added_bytes": int, "added_objects": int,
}
#: Manifest fields that differ on every run of make_golden (see its docstring).
VARYING = ("created", "created_ns", "host", "pid", "writer", "parent_id")


# --- an independent reader of the documented format ---------------------------------

#: Format 2-6: the kinds a delta may be (a dbpage, an index page, a JSONL segment, a chunk).
DELTA_KINDS = (KIND_SEGMENT, KIND_PAGE, KIND_DBPAGE, KIND_CHUNK)
ANCHOR_MIN = DICT_TAIL = 64 << 10   # §6: segment anchors and the dictionary they lend


def read_record(data: bytes, base: bytes | None = None) -> tuple[dict, bytes | None]:
    """(header, payload) of one whole record, checked as §4 says a reader must, with the
    flags formats 1-7 give each kind. A delta needs its base's payload; without it the
    payload is None (not decoded here)."""
    head, payload = decode_record(data, base)
    assert head["kind"] in (KIND_CHUNK, KIND_SEGMENT, KIND_PAGE, KIND_MANIFEST, KIND_PAGEMAP, KIND_DBPAGE)
    flags = head["flags"] & ~FLAG_ENTRY_BASES if head["kind"] == KIND_PAGE else head["flags"]
    assert flags == 0 or (flags == FLAG_DELTA and head["kind"] in DELTA_KINDS) \
        or (flags == FLAG_DELTA | FLAG_BASE_AT and head["kind"] == KIND_PAGE)
    return head, payload


def split_pack(data: bytes) -> list[tuple[int, dict, bytes]]:
    """Every (offset, header, payload) of a pack: records back to back, nothing else."""
    out, offset = [], 0
    while offset < len(data):
        head = read_header(data[offset:offset + HEADER.size])
        end = offset + HEADER.size + head["stored_size"]
        out.append((offset, *read_record(data[offset:end])))
        offset = end
    assert offset == len(data)
    return out


class Reader(StoreFiles):
    """Reads a store directory by the documented layout."""

    def __init__(self, root: str):
        super().__init__(root)
        self.page_layouts: list[list[str]] = []   # key order of every page read

    def manifest(self, seq: int) -> tuple[dict, dict, bytes]:
        head, payload = read_record(self.raw(f"manifests/{seq:012d}"))
        return head, json.loads(payload), payload

    def blob(self, ref: list, parent_pack: str = "", base: bytes | None = None) -> tuple[dict, bytes]:
        blob_id, _pack, _offset, _length, size = ref
        data = self.stored(ref, parent_pack)
        head, payload = read_record(data, base)
        if payload is None and "base_ref" in head:  # an index page delta: its base is a whole page
            base_head, base_payload = self.blob(head["base_ref"])
            assert not base_head["flags"] & FLAG_DELTA, "a delta's base is never itself a delta"
            head, payload = read_record(data, base_payload)
        assert payload is not None, f"a delta read without its base: {ref}"
        assert blob_id is None or (head["sha256"] == blob_id and len(payload) == size)
        return head, payload

    def entry_blobs(self, entry: dict) -> list[tuple[dict, bytes]]:
        """Every blob of an entry in order; a JSONL segment delta is decoded against the
        last 64 KiB of its anchor: the nearest earlier segment that is the first one or
        holds at least 64 KiB (§6)."""
        out, tail = [], None
        bases = entry.get("bases") or [None] * len(entry.get("refs", []))  # format 6: a file's delta chunks
        for i, ref in enumerate(entry.get("refs", [])):
            anchor = entry["kind"] == "jsonl" and (i == 0 or ref[4] >= ANCHOR_MIN)
            base = tail if entry["kind"] == "jsonl" and not anchor else None
            if bases[i] is not None:
                base_head, base = self.blob(bases[i])
                assert base_head["flags"] == 0, "a chunk's base is a whole chunk"
            head, payload = self.blob(ref, base=base)
            if anchor:
                assert not head["flags"], "an anchor segment is stored whole"
                tail = payload[-DICT_TAIL:]
            out.append((head, payload))
        return out

    def entries(self, root_ref: list | None) -> list[dict]:
        """Every entry under a root page, in path order (§5: empty child pack = same pack)."""
        if root_ref is None:
            return []
        out, stack = [], [root_ref]
        while stack:
            ref = stack.pop()
            head, payload = self.blob(ref)
            assert head["kind"] == KIND_PAGE
            page = json.loads(payload)
            assert page["version"] == 1
            self.page_layouts.append(list(page))
            out.extend(page["entries"])
            stack.extend(reversed([[c[1][0], c[1][1] or ref[1], *c[1][2:]] for c in page["children"]]))
        return out

    def file_bytes(self, entry: dict) -> bytes:
        return b"".join(payload for _, payload in self.entry_blobs(entry))


def logical_view(root: str) -> dict:
    """What a store means, minus per-run fields and compressed sizes (so a zstd
    upgrade that changes frame bytes is not mistaken for a format change)."""
    reader = Reader(root)
    raw = reader.raw("config")
    config = json.loads(raw)
    if "checksum" in config:  # format 7 (§3): the SHA-256 of the config without its last member, the checksum
        assert list(config)[-1] == "checksum", list(config)
        digest = hashlib.sha256(raw[:raw.rindex(b',"checksum":')] + b"}").hexdigest()
        assert config.pop("checksum") == digest, "the config's checksum does not match the rest of it"
    view = {"config": {k: v for k, v in config.items() if k not in ("store_id", "created")}, "manifests": {}}
    for name in sorted(os.listdir(os.path.join(root, "manifests"))):
        head, man, _ = reader.manifest(int(name))
        trees = {}
        for tree, info in man["trees"].items():
            entries = []
            for e in reader.entries(info["root"]):
                refs = [(head["kind"], r[0], r[4]) for r, (head, _) in zip(e.get("refs", []), reader.entry_blobs(e))]
                entries.append({**{k: v for k, v in e.items() if k != "refs"}, "refs": refs, "order": list(e)})
            trees[tree] = {"files": info["files"], "bytes": info["bytes"], "entries": entries,
                           "root": list(info), "pages": reader.page_layouts}
            reader.page_layouts = []
        stable = {k: v for k, v in man.items() if k not in VARYING and k not in ("trees", "packs", "added_bytes")}
        view["manifests"][name] = {**stable, "kind": head["kind"], "npacks": len(man["packs"]), "trees": trees,
                                   "order": list(man)}
    view["config_order"] = list(config)
    return view


# --- the golden store, and the CLI on it ---------------------------------------------

@pytest.fixture
def golden_store(tmp_path) -> str:
    """A private copy: running commands must never touch the committed fixture."""
    dst = tmp_path / "golden-store"
    shutil.copytree(GOLDEN_STORE, dst, symlinks=True)
    return str(dst)


@pytest.fixture(scope="module")
def listing() -> list[dict]:
    with open(os.path.join(GOLDEN, "tree.json")) as fh:
        data = json.load(fh)
    assert data["tree"] == TREE_NAME
    return data["entries"]


def by_path(listing: list[dict]) -> dict[str, dict]:
    """The listing in the shape ``describe`` returns."""
    return {e["path"]: {k: v for k, v in e.items() if k != "path"} for e in listing}


def describe(root: str) -> dict[str, dict]:
    """path -> what a restore must reproduce (kind, mode, mtime, bytes or target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            st = os.lstat(full)
            item = {"mode": stat.S_IMODE(st.st_mode)}
            if stat.S_ISLNK(st.st_mode):
                item.update(kind="symlink", mtime_ns=st.st_mtime_ns, target=os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                item.update(kind="dir")
            else:
                with open(full, "rb") as fh:
                    data = fh.read()
                item.update(kind="file", mtime_ns=st.st_mtime_ns, size=len(data),
                            sha256=hashlib.sha256(data).hexdigest())
            out[rel] = item
    return out


# --- the tests -----------------------------------------------------------------------

def test_restore_of_golden_store_rebuilds_golden_tree_byte_for_byte(tmp_path, golden_store, listing):
    out = tmp_path / "out"
    proc = golden_cli(tmp_path, golden_store).run("restore", "--to", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    restored = out / TREE_NAME
    assert sorted(os.listdir(out)) == [".journal-export", TREE_NAME]   # the export's marker (design §12)
    want = by_path(listing)
    assert describe(str(restored)) == want
    for path, item in want.items():
        golden_path = os.path.join(GOLDEN_TREE, path)
        if item["kind"] == "file":
            assert (restored / path).read_bytes() == open(golden_path, "rb").read(), path
        elif item["kind"] == "symlink":
            assert os.readlink(restored / path) == os.readlink(golden_path)


def test_golden_tree_checkout_matches_its_listing(listing):
    """tests/golden/tree as committed (git keeps no empty dir, mode or mtime) holds the listed bytes."""
    for e in listing:
        full = os.path.join(GOLDEN_TREE, e["path"])
        if e["kind"] == "file":
            data = open(full, "rb").read()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (e["size"], e["sha256"]), e["path"]
        elif e["kind"] == "symlink":
            assert os.readlink(full) == e["target"]
    kinds = {e["kind"] for e in listing}
    assert kinds == {"file", "symlink", "dir"}
    agents = next(e for e in listing if e["path"] == "AGENTS.md")
    assert not open(os.path.join(GOLDEN_TREE, "AGENTS.md"), "rb").read().endswith(b"\n"), agents


def test_verify_full_on_golden_store_is_clean(tmp_path, golden_store):
    proc = golden_cli(tmp_path, golden_store).run("verify", "--full", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is True and result["findings"] == []
    assert result["manifests"] == 2 and result["packs"] == 4


def test_log_lists_both_golden_checkpoints_newest_first(tmp_path, golden_store):
    proc = golden_cli(tmp_path, golden_store).run("log", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    entries = json.loads(proc.stdout)
    assert [e["seq"] for e in entries] == [2, 1]
    assert all(e["error"] is None and e["trees"] == [TREE_NAME] for e in entries)


def test_golden_store_layout_is_config_manifests_and_hash_named_packs():
    keys = []
    for dirpath, _, filenames in os.walk(GOLDEN_STORE):
        keys += [os.path.relpath(os.path.join(dirpath, f), GOLDEN_STORE).replace(os.sep, "/") for f in filenames]
    assert "config" in keys
    for key in keys:
        assert re.fullmatch(r"config|manifests/\d{12}|packs/[0-9a-f]{2}/[0-9a-f]{64}", key), key
        if key.startswith("packs/"):
            data = Reader(GOLDEN_STORE).raw(key)
            name = key.rsplit("/", 1)[1]
            assert hashlib.sha256(data).hexdigest() == name and key.split("/")[1] == name[:2]
            assert split_pack(data), key
    config = json.loads(Reader(GOLDEN_STORE).raw("config"))
    assert config["format"] == "journal-store" and config["version"] == 1
    assert re.fullmatch(r"[0-9a-f]{32}", config["store_id"]) and isinstance(config["created"], str)


@pytest.mark.parametrize("seq", [1, 2])
def test_golden_manifest_record_header_and_documented_fields(seq):
    reader = Reader(GOLDEN_STORE)
    raw = reader.raw(f"manifests/{seq:012d}")
    assert raw[:4] == b"JRNL" and raw[4] == 1 and raw[5] == KIND_MANIFEST
    assert raw[6:8] == b"\0\0"
    head, man, payload = reader.manifest(seq)
    assert head["stored_size"] == len(raw) - 56
    for field, types in MANIFEST_FIELDS.items():
        assert field in man and isinstance(man[field], types), field
    assert set(man) == set(MANIFEST_FIELDS)
    assert man["version"] == 1 and man["seq"] == seq
    assert list(man["trees"]) == [TREE_NAME]
    tree = man["trees"][TREE_NAME]
    assert set(tree) == {"root", "files", "bytes"} and len(tree["root"]) == 5
    for pack in man["packs"]:
        assert os.path.isfile(os.path.join(GOLDEN_STORE, "packs", pack[:2], pack))
    assert man["added_objects"] == len(man["packs"]) + 1
    if seq == 1:
        assert (man["parent"], man["parent_id"]) == (None, None)
    else:
        first_payload = reader.manifest(1)[2]
        assert man["parent"] == 1 and man["parent_id"] == hashlib.sha256(first_payload).hexdigest()
    assert payload == json.dumps(man, separators=(",", ":")).encode(), "fields in a fixed order, compact JSON"


def test_golden_index_pages_hold_the_documented_entries(listing):
    reader = Reader(GOLDEN_STORE)
    want_by_path = {e["path"]: e for e in listing}
    _, man1, _ = reader.manifest(1)
    _, man2, _ = reader.manifest(2)
    entries = reader.entries(man2["trees"][TREE_NAME]["root"])
    assert [e["path"] for e in entries] == sorted(want_by_path)
    for e in entries:
        want = want_by_path[e["path"]]
        assert set(e) <= {"path", "kind", "mode", "mtime_ns", "size", "refs", "target"}
        assert e["mode"] == want["mode"]
        if want["kind"] == "dir":
            assert e["kind"] == "dir" and "refs" not in e and e.get("mtime_ns", 0) == 0
        elif want["kind"] == "symlink":
            assert (e["kind"], e["target"], e["mtime_ns"]) == ("symlink", want["target"], want["mtime_ns"])
        else:
            kind = "jsonl" if e["path"].endswith(".jsonl") else "file"
            assert (e["kind"], e["size"], e["mtime_ns"]) == (kind, want["size"], want["mtime_ns"])
            data = reader.file_bytes(e)
            assert hashlib.sha256(data).hexdigest() == want["sha256"]
            blob_kind = KIND_SEGMENT if kind == "jsonl" else KIND_CHUNK
            assert all(reader.blob(r)[0]["kind"] == blob_kind for r in e["refs"])
    rollout2 = next(e for e in entries if e["kind"] == "jsonl")
    rollout1 = next(e for e in reader.entries(man1["trees"][TREE_NAME]["root"]) if e["kind"] == "jsonl")
    assert len(rollout1["refs"]) == 1 and len(rollout2["refs"]) == 2
    assert rollout2["refs"][0] == rollout1["refs"][0], "the appended rollout reuses checkpoint 1's segment"
    assert all(reader.blob(r)[1].endswith(b"\n") for r in rollout2["refs"])
    assert rollout2["refs"][1][1] in man2["packs"] and rollout2["refs"][0][1] in man1["packs"]


def test_current_writer_reproduces_the_golden_format(tmp_path, listing):
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    from tools.make_golden import build_golden

    store_dir, tree = build_golden(str(tmp_path / "work"))
    assert describe(tree) == by_path(listing), "make_golden's tree no longer matches tests/golden/tree.json"
    assert logical_view(store_dir) == logical_view(GOLDEN_STORE), (
        "the current code writes a different format than tests/golden/store; if that is deliberate, "
        "regenerate with tools/make_golden.py and add a format version to docs/design.md §18")


def test_current_writer_stores_an_appended_segment_as_a_delta_of_its_anchor(tmp_path):
    """Format 4 (§6): checkpoint 2's appended lines are a delta against the first segment,
    and the reader above, which knows only the documented format, decodes them."""
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    from tools.make_golden import build_golden

    store_dir, tree = build_golden(str(tmp_path / "work"))
    reader = Reader(store_dir)
    _, man, _ = reader.manifest(2)
    rollout = next(e for e in reader.entries(man["trees"][TREE_NAME]["root"]) if e["kind"] == "jsonl")
    blobs = reader.entry_blobs(rollout)
    assert [head["flags"] for head, _ in blobs] == [0, FLAG_DELTA]
    with open(os.path.join(tree, rollout["path"]), "rb") as fh:
        assert b"".join(payload for _, payload in blobs) == fh.read()


def test_a_rewritten_file_is_stored_as_delta_chunks_the_documented_reader_decodes(tmp_path):
    """Format 6 (§6): from its second rewrite on, a small file's changed chunk is a delta of
    the previous version's whole chunk, which the entry names in ``bases``; the reader
    above, which knows only the documented format, rebuilds every version."""
    from journal.checkpoint.run import checkpoint
    from journal.config import Config, TreeConfig
    from journal.store.local import LocalStore

    tree, store_dir = tmp_path / "codex", str(tmp_path / "store")
    tree.mkdir()
    cfg = Config(store=store_dir, local=str(tmp_path), state_dir=str(tmp_path / "state"), interval=15.0,
                 trees=(TreeConfig(name=TREE_NAME, path=str(tree)),))
    versions = []
    for n in range(4):
        data = json.dumps({"projects": {f"/home/node/p{i}": {"cost": i * 3, "turns": n if i == 7 else 1}
                                        for i in range(300)}, "lastSession": n}).encode()
        (tree / "state.json").write_bytes(data)
        versions.append(data)
        checkpoint(cfg, LocalStore(store_dir))
    reader = Reader(store_dir)
    forms = []
    for seq, data in enumerate(versions, 1):
        _, man, _ = reader.manifest(seq)
        entry = next(e for e in reader.entries(man["trees"][TREE_NAME]["root"]) if e["path"] == "state.json")
        assert reader.file_bytes(entry) == data
        forms.append(([head["flags"] for head, _ in reader.entry_blobs(entry)], bool(entry.get("bases"))))
    assert forms == [([0], False), ([0], False), ([FLAG_DELTA], True), ([FLAG_DELTA], True)]
    # the page holding an entry with bases is marked, so older readers refuse it
    _, man, _ = reader.manifest(4)
    root = man["trees"][TREE_NAME]["root"]
    data = reader.raw(f"packs/{root[1][:2]}/{root[1]}")[root[2]:root[2] + root[3]]
    assert read_header(data)["flags"] & FLAG_ENTRY_BASES


def test_the_design_lists_every_format_up_to_the_one_this_code_writes():
    """docs/design.md §18 has one row per format, 1 to ``FORMAT``: a format change that
    raises ``FORMAT`` without its row, or adds a row without raising it, fails here."""
    from journal.format.model import FORMAT

    with open(os.path.join(REPO, "docs", "design.md"), encoding="utf-8") as fh:
        design = fh.read()
    section = design[design.index("## 18. Format versions"):]
    rows = [int(n) for n in re.findall(r"^\| (\d+) \|", section, re.MULTILINE)]
    assert rows == list(range(1, FORMAT + 1))

"""Browsing history without restoring it: ``journal ls``, ``cat``, ``diff`` and ``find``
(``journal/browse/``), through the real CLI and, where the store reads are counted,
in-process over a counting store (``test_gc.CountingStore``) or on moto's S3 server
(its request log). What each command may read is docs/design.md §19.
"""

from __future__ import annotations

import datetime
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

import journal.browse.ls as ls_module
from journal.browse.cat import cat
from journal.browse.diff import diff
from journal.browse.find import _Walker, find, find_paths
from journal.browse.ls import list_path
from journal.browse.view import View
from journal.browse.where import parse_where
from journal.cli.app import EXIT_FALLBACK
from journal.browse.errors import BadBrowsePath
from journal.format.index import iter_pages
from journal.format.model import KIND_SQLITE
from journal.format.pagemap import load_snapshot
from journal.repository.repository import pack_key
from journal.repository.repository import Repository, manifest_key
from journal.report import Collector
from journal.store import open_store

from conftest import Live, copy_fixtures, live_maker, peak_rss, scratch_dir
from test_cli import one_line_error
from test_gc import CountingStore

pytest_plugins = ["tests.s3server"]

SESSIONS = "codex-home/sessions/2026/02/23"
ROLLOUT = "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"


# --------------------------------------------------------------------------- helpers


def run_json(live: Live, *args: str):
    proc = live.run(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def write(path: Path, data: bytes, mtime: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))


def counted(live: Live, op: str = "ls") -> tuple[View, CountingStore]:
    """A view of ``live``'s store whose every store call is recorded."""
    store = CountingStore(open_store(str(live.store_path)))
    return View(Repository.open(store), op, Collector()), store


class Reads:
    """The store reads of one command, by what they read."""

    def __init__(self, store: CountingStore, data: set[str]):
        keys = [key for key, _start, _end in store.gets]
        self.manifests = [k for k in keys if k.startswith("manifests/")]
        self.data = [k for k in keys if k in data]
        self.index = [k for k in keys if k.startswith("packs/") and k not in data]
        self.ranges = [(k, s, e) for k, s, e in store.gets if k.startswith("packs/")]
        self.lists = list(store.lists)


def data_packs(repo: Repository) -> set[str]:
    """The keys of every pack holding blobs of files (chunks, segments, page maps and
    database pages), as opposed to index pages."""
    out: set[str] = set()
    for seq in repo.manifest_seqs():
        manifest, _ = repo.load_manifest(seq)
        for tree in manifest.trees.values():
            for _, page in iter_pages(tree.root, lambda r: repo.read_page(r)[0]):
                for entry in page.entries:
                    refs = list(entry.refs) + [b for b in entry.bases if b is not None]
                    if entry.kind == KIND_SQLITE:
                        snap = load_snapshot(entry.refs, repo.read_blob)
                        refs += [loc.rec for loc in snap.pages] + [loc.rec for loc in snap.base.values()]
                    out.update(pack_key(ref.pack) for ref in refs)
    return out


def index_pages(repo: Repository, seq: int, tree: str) -> list:
    manifest, _ = repo.load_manifest(seq)
    return [ref for ref, _ in iter_pages(manifest.trees[tree].root, lambda r: repo.read_page(r)[0])]


def time_between(live: Live, older: int, newer: int, zone: bool = True) -> str:
    """An ISO-8601 time after checkpoint ``older`` was made and before ``newer`` was."""
    repo = live.repo()
    ns = (repo.load_manifest(older)[0].created_ns + repo.load_manifest(newer)[0].created_ns) // 2
    when = datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc)
    return (when if zone else when.replace(tzinfo=None)).isoformat()


def many_files(live: Live, dirs: int = 40, files: int = 50) -> None:
    """A codex tree of ``dirs`` directories of ``files`` small files each: dozens of index pages."""
    for d in range(dirs):
        for f in range(files):
            write(live.local / "codex-home" / f"d{d:02d}" / f"f{f:03d}.txt", f"{d}/{f}\n".encode(), 10**18 + f)


def module_live(tmp_path_factory, name: str, build: Callable[[Live], object]):
    """For a module-scoped fixture to ``yield from``: a container and its store (on
    tmpfs when possible) made by ``build(live)``, whose result it yields. Its tests only
    read them, so at the end every file must be as ``build`` left it (browsing writes
    nothing, docs/design.md §19)."""
    with scratch_dir(tmp_path_factory.mktemp(name)) as base:
        live = Live(base / "a", base / "store")
        made = build(live)
        before = Live.snapshot(base)
        yield made
        assert Live.snapshot(base) == before, f"the {name} store or tree changed: its tests must only read it"


#: A binary file's bytes: every byte value, a NUL, no final newline.
BINARY = bytes(range(256)) * 4096 + b"\x00tail without newline"


def _shared(live: Live) -> Live:
    home = live.local / "codex-home"
    copy_fixtures(live.local)
    write(home / "bin" / "data.bin", BINARY)
    write(home / "big.bin", os.urandom(4 << 20))
    os.symlink("../elsewhere/target.txt", home / "link")
    live.checkpoint()
    write(home / "late.jsonl", b"{}\n")
    write(home / "notes.txt", b"notes\n" * 1000)
    with open(live.local / SESSIONS / ROLLOUT, "ab") as fh:
        fh.write(live.gemini_record(1))
    live.checkpoint()
    return live


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[Live]:
    """A container and its store for the tests that only read them, made once: the real
    fixtures and, in checkpoint 1, ``codex/bin/data.bin`` (``BINARY``), ``codex/big.bin``
    (4 MiB, random) and a symlink ``codex/link``; checkpoint 2 adds ``codex/late.jsonl``
    and ``codex/notes.txt`` and appends a record to the rollout."""
    yield from module_live(tmp_path_factory, "shared", _shared)


def _wide(live: Live) -> Live:
    many_files(live)
    live.checkpoint()
    for i in range(4):
        write(live.local / "codex-home" / "d03" / "f001.txt", b"v" * (i + 2))
        live.checkpoint()
    return live


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> Iterator[Live]:
    """A store for the counting tests that only read it, made once: ``many_files``
    (2,000 files in 40 directories: dozens of index pages) in checkpoint 1, then
    ``codex/d03/f001.txt`` rewritten by each of checkpoints 2 to 5."""
    yield from module_live(tmp_path_factory, "wide", _wide)


@pytest.fixture
def make_live(root):
    """conftest's ``make_live``, on tmpfs when possible (``root``): these tests make
    many small stores, and fsync costs nothing there."""
    return live_maker(root)


# --------------------------------------------------------------------------- naming paths


@pytest.mark.parametrize("command, bad, why", [
    (["ls"], "codex/../etc", "'..' component"),
    (["cat"], "/codex/x", "an absolute path"),
    (["diff", "1", "1"], "codex//x", "absolute"),
    (["ls"], "Codex/x", "is not a tree name"),
    (["cat"], "codex/./x", "'.' or '..'"),
])
def test_a_malformed_tree_path_is_a_one_line_error_exit_2(shared, command, bad, why):
    """Each path through the CLI once (each command at least once); through every
    command's own check (``parse_where``, called before the store is opened) in-process."""
    proc = shared.run(*command, bad)

    assert proc.returncode == 2
    line = one_line_error(proc)
    assert why in line and f"{command[0]}: " in line
    for op in ("ls", "cat", "diff"):
        with pytest.raises(BadBrowsePath) as refused:
            parse_where(bad, op)
        assert why in str(refused.value) and str(refused.value).startswith(f"{op}: ")


@pytest.mark.parametrize("command", [["ls"], ["cat"], ["diff", "1", "1"]])
def test_an_unknown_tree_is_a_one_line_error_naming_the_trees_there(shared, command):
    proc = shared.run(*command, "gemini/x")

    assert proc.returncode == 2
    line = one_line_error(proc)
    assert f"{command[0]}: gemini" in line and f"no such tree in checkpoint {1 if command[0] == 'diff' else 2}" in line
    assert command[0] == "diff" or "(it holds claude, codex, openclaw)" in line


def test_a_trailing_slash_names_the_same_directory():
    assert parse_where("codex/sessions/", "ls") == parse_where("codex/sessions", "ls") == ("codex", "sessions")
    assert parse_where("codex", "ls") == ("codex", "")
    assert parse_where(None, "ls") == (None, "")


# --------------------------------------------------------------------------- ls


def test_ls_lists_the_trees_then_a_directory_sorted_by_name(shared):
    manifest, _ = shared.repo().load_manifest(2)
    live_dir = shared.local / SESSIONS

    top = run_json(shared, "ls")
    listing = run_json(shared, "ls", "codex/sessions/2026/02/23")

    assert top["seq"] == 2 and [(e["name"], e["kind"], e["size"], e["files"]) for e in top["entries"]] == [
        (name, "tree", tree.bytes, tree.files) for name, tree in sorted(manifest.trees.items())]
    names = sorted(p.name for p in live_dir.iterdir())
    assert [e["name"] for e in listing["entries"]] == names
    for e in listing["entries"]:
        st = (live_dir / e["name"]).stat()
        assert (e["kind"], e["size"], e["mtime_ns"], e["path"]) == (
            "jsonl", st.st_size, st.st_mtime_ns, f"codex/sessions/2026/02/23/{e['name']}")


def test_ls_of_a_file_lists_the_file_and_of_a_missing_path_is_exit_2(shared):
    one = run_json(shared, "ls", f"codex/sessions/2026/02/23/{ROLLOUT}")
    missing = shared.run("ls", "codex/sessions/2027")

    assert [e["name"] for e in one["entries"]] == [ROLLOUT]
    assert missing.returncode == 2
    assert "codex/sessions/2027: not in checkpoint 2; `journal ls codex/sessions`" in one_line_error(missing)


def test_ls_at_takes_a_sequence_number_or_a_time_as_restore_does(shared):
    first = time_between(shared, 1, 2)

    by_seq = run_json(shared, "ls", "--at", "1", "codex")
    by_time = run_json(shared, "ls", "--at", first, "codex")
    newest = run_json(shared, "ls", "codex")
    before = shared.run("ls", "--at", "2000-01-01T00:00:00", "codex")
    nonsense = shared.run("ls", "--at", "yesterday", "codex")

    assert by_seq["seq"] == by_time["seq"] == 1 and newest["seq"] == 2
    assert "late.jsonl" not in [e["name"] for e in by_seq["entries"]]
    assert "late.jsonl" in [e["name"] for e in newest["entries"]]
    assert before.returncode == 2 and "ls: no checkpoint at or before --at 2000-01-01" in one_line_error(before)
    assert nonsense.returncode == 2 and "is neither a sequence number nor an ISO-8601 time" in nonsense.stderr


def test_ls_long_names_the_checkpoint_that_last_changed_each_entry(bare_live):
    home = bare_live.local / "codex-home"
    for name in ("a", "b", "c"):
        write(home / name, name.encode(), 10**18)
    bare_live.checkpoint()                              # 1
    write(home / "b", b"bb", 10**18 + 1)
    bare_live.checkpoint()                              # 2
    write(home / "d", b"d", 10**18)
    bare_live.checkpoint()                              # 3
    write(home / "c", b"cc", 10**18 + 1)
    bare_live.checkpoint()                              # 4
    os.chmod(home / "a", 0o600)
    bare_live.checkpoint()                              # 5: a mode change is a change
    write(home / "b", b"bb", 10**18 + 1)                # the same bytes and mtime again: no change
    bare_live.checkpoint()

    listing = run_json(bare_live, "ls", "--long", "codex")
    top = run_json(bare_live, "ls", "--long")
    text = bare_live.run("ls", "--long", "codex").stdout

    assert {e["name"]: (e["changed"], e["changed_exact"]) for e in listing["entries"]} == {
        "a": (5, True), "b": (2, True), "c": (4, True), "d": (3, True)}
    assert [(e["name"], e["changed"]) for e in top["entries"]] == [("codex", 5)]
    assert "-rw-------" in text and "-rw-r--r--" in text


def test_ls_long_looks_back_a_bounded_number_of_manifests(bare_live, monkeypatch):
    home = bare_live.local / "codex-home"
    write(home / "still", b"still")
    for i in range(6):
        write(home / "busy", b"x" * (i + 1))
        bare_live.checkpoint()
    monkeypatch.setattr(ls_module, "LOOKBACK", 2)
    view, store = counted(bare_live)

    listing = list_path(view, parse_where("codex", "ls"), long=True)

    got = {i.name: (i.changed, i.changed_exact) for i in listing.entries}
    assert got == {"busy": (6, True), "still": (4, False)}   # unchanged in 4-6: "at or before 4"
    assert len(Reads(store, set()).manifests) == 3           # the listed one and LOOKBACK more


def test_ls_reads_the_manifest_and_the_pages_of_that_directory_only(wide):
    repo = wide.repo()
    pages = index_pages(repo, 5, "codex")
    data = data_packs(repo)
    view, store = counted(wide)

    listing = list_path(view, parse_where("codex/d17", "ls"))

    reads = Reads(store, data)
    assert [e.name for e in listing.entries] == [f"f{f:03d}.txt" for f in range(50)]
    assert reads.manifests == [manifest_key(5)] and reads.lists == ["manifests/"]
    assert reads.data == []
    assert len(pages) > 30 and len(reads.index) <= 6, (len(pages), reads.index)


def test_ls_of_a_trees_root_skips_the_pages_inside_its_subdirectories(bare_live):
    many_files(bare_live, dirs=8, files=400)
    bare_live.checkpoint()
    pages = index_pages(bare_live.repo(), 1, "codex")
    view, store = counted(bare_live)

    listing = list_path(view, parse_where("codex", "ls"))

    assert [e.name for e in listing.entries] == [f"d{d:02d}" for d in range(8)]
    assert len(pages) > 40 and len(Reads(store, set()).index) < len(pages) // 3, len(Reads(store, set()).index)


# --------------------------------------------------------------------------- cat


def test_cat_writes_a_transcript_and_a_binary_file_byte_for_byte(shared):
    jsonl = subprocess.run([sys.executable, "-m", "journal", "cat", f"codex/sessions/2026/02/23/{ROLLOUT}"],
                           env={**os.environ, **shared.env}, capture_output=True)
    binary = subprocess.run([sys.executable, "-m", "journal", "cat", "codex/bin/data.bin"],
                            env={**os.environ, **shared.env}, capture_output=True)

    assert (jsonl.returncode, binary.returncode) == (0, 0)
    assert jsonl.stdout == (shared.local / SESSIONS / ROLLOUT).read_bytes()
    assert binary.stdout == BINARY


def test_cat_of_a_transcript_writes_its_complete_lines_only(live):
    chat = live.local / SESSIONS / ROLLOUT
    complete = chat.read_bytes()
    with open(chat, "ab") as fh:
        fh.write(b'{"torn": ')
    live.checkpoint()

    out = subprocess.run([sys.executable, "-m", "journal", "cat", f"codex/sessions/2026/02/23/{ROLLOUT}"],
                         env={**os.environ, **live.env}, capture_output=True)

    assert out.returncode == 0 and out.stdout == complete


def test_cat_of_a_symlink_a_directory_or_a_missing_path_says_what_it_is(shared):
    link = shared.run("cat", "codex/link")
    folder = shared.run("cat", "codex/sessions")
    missing = shared.run("cat", "codex/nope.txt")
    tree = shared.run("cat", "codex")

    assert link.returncode == folder.returncode == missing.returncode == tree.returncode == 2
    assert "codex/link: a symlink to '../elsewhere/target.txt' in checkpoint 2, not a file" in one_line_error(link)
    assert "codex/sessions: a directory in checkpoint 2, not a file" in one_line_error(folder)
    assert "codex/nope.txt: not in checkpoint 2" in one_line_error(missing)
    assert "names a tree, not a file" in one_line_error(tree)
    assert link.stdout == folder.stdout == ""


def test_cat_with_json_fails_with_the_json_error_object(shared):
    proc = shared.run("cat", "codex/nope.txt", "--json")

    assert proc.returncode == 2
    assert json.loads(proc.stdout) == {"error": one_line_error(proc)[len("journal: error: "):],
                                       "kind": "BadBrowsePath", "exit": 2}


def _database(path: Path, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO t (body) VALUES (?)", [(f"row {i} " + "x" * (i % 300),) for i in range(rows)])
    con.commit()
    con.close()


def test_cat_of_a_database_writes_a_sqlite_file_that_passes_integrity_check(bare_live, tmp_path):
    db = bare_live.local / "opencode-share" / "opencode.db"
    _database(db, 3000)
    bare_live.checkpoint()
    _database(db, 500)                                   # a delta over the full snapshot
    bare_live.checkpoint()
    out = tmp_path / "copy.db"
    temp = tmp_path / "temp"                             # its $TMPDIR: the rebuild goes there, then away
    temp.mkdir()

    with open(out, "wb") as fh:
        proc = subprocess.run([sys.executable, "-m", "journal", "cat", "opencode/opencode.db"],
                              env={**os.environ, **bare_live.env, "TMPDIR": str(temp)}, stdout=fh,
                              stderr=subprocess.PIPE)

    assert proc.returncode == 0, proc.stderr
    con = sqlite3.connect(out)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (3500,)
    con.close()
    assert list(temp.iterdir()) == []


def test_cat_of_a_damaged_snapshot_writes_the_older_one_exit_3(bare_live, tmp_path):
    db = bare_live.local / "opencode-share" / "opencode.db"
    _database(db, 2000)
    bare_live.checkpoint()
    _database(db, 100)
    bare_live.checkpoint()
    newest = bare_live.entries("opencode")["opencode.db"]
    assert len(newest.refs) > 1                        # a full map and a delta map
    bare_live.corrupt_blob(newest.refs[-1])
    out = tmp_path / "copy.db"

    with open(out, "wb") as fh:
        proc = subprocess.run([sys.executable, "-m", "journal", "cat", "opencode/opencode.db"],
                              env={**os.environ, **bare_live.env}, stdout=fh, stderr=subprocess.PIPE, text=True)

    assert proc.returncode == EXIT_FALLBACK
    assert "the copy in checkpoint 2 is damaged" in proc.stderr and "written from checkpoint 1" in proc.stderr
    con = sqlite3.connect(out)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (2000,)
    con.close()


def test_an_empty_store_lists_nothing_and_has_no_file_to_cat(bare_live):
    bare_live.run("init")

    top = bare_live.run("ls")
    one = bare_live.run("cat", "codex/x")

    assert top.returncode == 0 and top.stdout == "no checkpoint in the store yet\n"
    assert one.returncode == 2 and "cat: the store holds no checkpoint yet" in one_line_error(one)


def test_cat_streams_a_large_file_in_bounded_memory(root, tmp_path):
    """A 128 MiB file (a few bytes in every MiB, the rest holes: each chunk its own
    blob, compressed to a few bytes, so memory is all that is measured) comes out whole
    while the process stays under 64 MiB of RSS: holding half the file would break the
    bound. The copy goes to ``tmp_path``: it is dense, and ``root`` may be a tmpfs."""
    live = Live(root / "a", root / "store")
    big = live.local / "codex-home" / "big.bin"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:
        for mib in range(128):
            fh.seek(mib << 20)
            fh.write(mib.to_bytes(4, "big") * 4)
        fh.truncate(128 << 20)
    live.checkpoint()
    out = tmp_path / "out.bin"

    rc, peak = peak_rss([sys.executable, "-m", "journal", "cat", "codex/big.bin"], live.env, out)

    assert rc == 0
    assert peak <= 64 << 20, f"peak RSS {peak >> 20} MiB for a 128 MiB file"
    assert out.stat().st_size == big.stat().st_size
    with open(big, "rb") as want, open(out, "rb") as got:
        while block := want.read(1 << 22):
            assert got.read(1 << 22) == block


def test_cat_reads_only_the_packs_holding_that_file(shared):
    repo = shared.repo()
    entry = shared.entries("codex")["notes.txt"]
    view, store = counted(shared, "cat")

    with open(os.devnull, "wb") as sink:
        result = cat(view, parse_where("codex/notes.txt", "cat"), sink)

    reads = Reads(store, data_packs(repo))
    assert result.bytes == 6000 and result.seq == 2
    assert set(reads.data) == {pack_key(r.pack) for r in entry.refs}
    assert reads.manifests == [manifest_key(2)]


def test_cat_of_a_damaged_copy_falls_back_to_the_older_one_exit_3(live):
    notes = live.local / "codex-home" / "notes.txt"
    write(notes, b"first version\n")
    live.checkpoint()
    write(notes, b"second version, longer\n")
    live.checkpoint()
    live.corrupt_blob(live.entries("codex")["notes.txt"].refs[0])

    proc = live.run("cat", "codex/notes.txt")

    assert proc.returncode == EXIT_FALLBACK
    assert proc.stdout == "first version\n"
    assert "cat: codex/notes.txt: the copy in checkpoint 2 is damaged" in proc.stderr
    assert "FALLBACK" in proc.stderr and "written from checkpoint 1" in proc.stderr


def test_cat_with_no_good_copy_is_an_error_naming_the_path(live):
    live.checkpoint()
    live.corrupt_blob(live.entries("codex")[f"sessions/2026/02/23/{ROLLOUT}"].refs[0])

    proc = live.run("cat", f"codex/sessions/2026/02/23/{ROLLOUT}")

    assert proc.returncode == 1
    assert proc.stdout == ""
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"journal: error: cat: codex/sessions/2026/02/23/{ROLLOUT}: no good copy")
    assert "journal verify --full" in line and "INCOMPLETE" not in line


def test_cat_continues_a_transcript_from_an_older_copy_that_begins_with_what_was_written(bare_live):
    chat = bare_live.local / "codex-home" / "chat.jsonl"
    first = b"".join(bare_live.gemini_record(i) for i in range(40))
    write(chat, first)
    bare_live.checkpoint()
    with open(chat, "ab") as fh:
        fh.write(bare_live.gemini_record(40))
    bare_live.checkpoint()
    refs = bare_live.entries("codex")["chat.jsonl"].refs
    assert len(refs) == 2 and refs[0] == bare_live.entries("codex", 1)["chat.jsonl"].refs[0]
    bare_live.corrupt_blob(refs[1])

    proc = subprocess.run([sys.executable, "-m", "journal", "cat", "codex/chat.jsonl"],
                          env={**os.environ, **bare_live.env}, capture_output=True)

    assert proc.returncode == EXIT_FALLBACK
    assert proc.stdout == first                      # checkpoint 1's copy, whole: never a mix
    assert b"written from checkpoint 1" in proc.stderr


def test_cat_says_the_output_is_incomplete_when_no_older_copy_continues_it(bare_live):
    big = bare_live.local / "codex-home" / "big.bin"
    write(big, os.urandom(3 << 20))
    bare_live.checkpoint()
    write(big, os.urandom(3 << 20))
    bare_live.checkpoint()
    refs = bare_live.entries("codex")["big.bin"].refs
    bare_live.corrupt_blob(refs[2])

    proc = subprocess.run([sys.executable, "-m", "journal", "cat", "codex/big.bin"],
                          env={**os.environ, **bare_live.env}, capture_output=True)

    assert proc.returncode == 1
    assert len(proc.stdout) == 2 << 20 and proc.stdout == big.read_bytes()[:2 << 20]
    assert b"the output is INCOMPLETE: 2,097,152 bytes were written" in proc.stderr


def test_cat_into_a_closed_pipe_stops_quietly(shared):
    proc = subprocess.run(f"{sys.executable} -m journal cat codex/big.bin | head -c 10 | wc -c",
                          shell=True, env={**os.environ, **shared.env}, capture_output=True, text=True)

    assert proc.stdout.strip() == "10"
    assert proc.stderr == ""


# --------------------------------------------------------------------------- diff


def test_diff_lists_added_removed_and_changed_paths_with_sizes_and_lines(live):
    home = live.local / "codex-home"
    write(home / "old.txt", b"old\n")
    write(home / "kind", b"a file\n")
    live.checkpoint()
    (home / "old.txt").unlink()
    write(home / "new.txt", b"new file\n")
    (home / "kind").unlink()
    os.symlink("new.txt", home / "kind")
    lines = b"".join(live.gemini_record(i) for i in range(3))
    with open(live.local / SESSIONS / ROLLOUT, "ab") as fh:
        fh.write(lines)
    live.checkpoint()

    changes = run_json(live, "diff", "1", "2")
    text = live.run("diff", "1", "2").stdout

    by_path = {c["path"]: c for c in changes}
    assert by_path["codex/new.txt"] == {"path": "codex/new.txt", "change": "added", "kind": "file", "size": 9,
                                        "size_change": 9, "a": 1, "b": 2}
    assert by_path["codex/old.txt"] == {"path": "codex/old.txt", "change": "removed", "kind": "file", "size": 4,
                                        "size_change": -4, "a": 1, "b": 2}
    assert by_path["codex/kind"]["old_kind"] == "file" and by_path["codex/kind"]["kind"] == "symlink"
    chat = by_path[f"codex/sessions/2026/02/23/{ROLLOUT}"]
    assert (chat["change"], chat["size_change"], chat["lines_added"]) == ("changed", len(lines), 3)
    assert [c["path"] for c in changes] == sorted(by_path)
    assert "checkpoint 1 -> 2: 1 added, 1 removed, 2 changed" in text and "(+3 lines)" in text


def test_diff_under_a_path_lists_only_that_path(shared):
    changes = run_json(shared, "diff", "1", "2", "codex/sessions")

    assert [c["path"] for c in changes] == [f"codex/sessions/2026/02/23/{ROLLOUT}"]


def test_diff_marks_a_rewritten_transcript_and_counts_no_lines_for_it(live):
    live.checkpoint()
    chat = live.local / SESSIONS / ROLLOUT
    chat.write_bytes(b'{"rewound": true}\n' + chat.read_bytes()[:1000].rsplit(b"\n", 1)[0] + b"\n")
    live.checkpoint()

    (change,) = [c for c in run_json(live, "diff", "1", "2") if c["path"].endswith(ROLLOUT)]

    assert change["rewritten"] is True and "lines_added" not in change


def test_diff_counts_the_pages_a_database_changed_in_place(bare_live):
    """Rows updated in place keep a database's size: the size change says +0, the pages
    changed say what did (from the two snapshots' page maps)."""
    db = bare_live.local / "opencode-share" / "opencode.db"
    _database(db, 3000)
    bare_live.checkpoint()
    con = sqlite3.connect(db)
    con.execute("UPDATE t SET body = upper(body) WHERE id % 500 = 0")
    con.commit()
    con.close()
    bare_live.checkpoint()

    (change,) = run_json(bare_live, "diff", "1", "2")
    text = bare_live.run("diff", "1", "2").stdout.splitlines()
    quiet = bare_live.run("diff", "1", "2", "--no-lines").stdout.splitlines()
    pages = len(load_snapshot(bare_live.entries("opencode")["opencode.db"].refs, bare_live.repo().read_blob).pages)

    assert change["size_change"] == 0 and 1 <= change["pages_changed"] <= 8 and change["pages"] == pages
    assert text[1] == f"M {0:>+15,}  opencode/opencode.db  ({change['pages_changed']} of {pages} pages changed)"
    assert quiet[1] == f"M {0:>+15,}  opencode/opencode.db"


def test_diff_reads_only_the_pages_that_differ_and_no_data_pack(wide):
    repo = wide.repo()
    pages = index_pages(repo, 2, "codex")
    view, store = counted(wide, "diff")

    result = diff(view, "1", "2")

    reads = Reads(store, data_packs(repo))
    assert [(c.path, c.change) for c in result.changes] == [("codex/d03/f001.txt", "changed")]
    assert sorted(reads.manifests) == [manifest_key(1), manifest_key(2)]
    assert reads.data == []
    assert len(pages) > 30 and len(reads.index) <= 8, (len(pages), len(reads.index))


def test_diff_counts_lines_from_the_new_segments_only(bare_live):
    chat = bare_live.local / "codex-home" / "chat.jsonl"
    write(chat, b"".join(bare_live.gemini_record(i) for i in range(2000)))
    bare_live.checkpoint()
    with open(chat, "ab") as fh:
        fh.write(bare_live.gemini_record(2000) + bare_live.gemini_record(2001))
    bare_live.checkpoint()
    repo = bare_live.repo()
    old, new = bare_live.entries("codex", 1)["chat.jsonl"], bare_live.entries("codex")["chat.jsonl"]
    fresh = [r for r in new.refs if r not in old.refs]
    view, store = counted(bare_live, "diff")
    quiet, quiet_store = counted(bare_live, "diff")

    counted_lines = diff(view, "1", "2").changes
    no_lines = diff(quiet, "1", "2", lines=False).changes

    assert [(c.lines_added, c.rewritten) for c in counted_lines] == [(2, False)]
    assert [c.lines_added for c in no_lines] == [None]
    data = data_packs(repo)
    read = [(k, s) for k, s, _e in Reads(store, data).ranges if k in data]
    anchor_or_new = {(pack_key(r.pack), r.offset) for r in new.refs[new.refs.index(fresh[0]) - 1:]}
    assert read and set(read) <= anchor_or_new
    assert Reads(quiet_store, data).data == []


def test_diff_takes_times_and_either_order(shared):
    created = time_between(shared, 1, 2, zone=False)   # no zone: read as UTC
    rollout = f"codex/sessions/2026/02/23/{ROLLOUT}"

    forward = run_json(shared, "diff", created, "2")
    backward = run_json(shared, "diff", "2", "1")

    assert [(c["path"], c["change"]) for c in forward] == [
        ("codex/late.jsonl", "added"), ("codex/notes.txt", "added"), (rollout, "changed")]
    assert [(c["path"], c["change"], c["a"], c["b"]) for c in backward] == [
        ("codex/late.jsonl", "removed", 2, 1), ("codex/notes.txt", "removed", 2, 1), (rollout, "changed", 2, 1)]


def test_diff_json_names_each_change_as_it_always_has():
    """Diff's kinds are an enum now; ``--json`` shows its values (``change``), and users'
    scripts read those names: they never change."""
    import msgspec

    from journal.browse.diff import ChangeKind

    assert [k.value for k in ChangeKind] == ["added", "removed", "changed"]
    assert msgspec.json.encode([ChangeKind.ADDED]) == b'["added"]'


def test_diff_past_a_damaged_index_page_falls_back_as_restore_does(live):
    live.checkpoint()
    write(live.local / "codex-home" / "x.txt", b"x")
    live.checkpoint()
    write(live.local / "codex-home" / "y.txt", b"y")
    live.checkpoint()
    root = live.repo().load_manifest(3)[0].trees["codex"].root
    live.corrupt_blob(root)

    proc = live.run("diff", "1", "3", "--json")

    assert proc.returncode == EXIT_FALLBACK
    assert [(c["path"], c["b"]) for c in json.loads(proc.stdout)] == [("codex/x.txt", 2)]
    assert "diff: checkpoint 3 is unusable (tree codex: " in proc.stderr


# --------------------------------------------------------------------------- find


def test_find_lists_each_version_of_a_matching_path_newest_first(bare_live):
    home = bare_live.local / "codex-home"
    write(home / "keep.json", b"1", 10**18)
    write(home / "sub" / "other.txt", b"o")
    bare_live.checkpoint()                               # 1
    write(home / "keep.json", b"22", 10**18 + 1)
    bare_live.checkpoint()                               # 2
    write(home / "sub" / "other.txt", b"oo")
    bare_live.checkpoint()                               # 3
    (home / "keep.json").unlink()
    bare_live.checkpoint(allow_deletions=True)          # 4
    write(home / "keep.json", b"333", 10**18 + 2)
    bare_live.checkpoint()                               # 5

    found = run_json(bare_live, "find", "*.json")

    assert found == [{"path": "codex/keep.json", "versions": [
        {"first": 5, "last": 5, "checkpoints": 1, "kind": "file", "size": 3, "mtime_ns": 10**18 + 2},
        {"first": 4, "last": 4, "checkpoints": 1},
        {"first": 2, "last": 3, "checkpoints": 2, "kind": "file", "size": 2, "mtime_ns": 10**18 + 1},
        {"first": 1, "last": 1, "checkpoints": 1, "kind": "file", "size": 1, "mtime_ns": 10**18}]}]


def test_find_narrows_by_tree_since_and_whole_path_patterns(shared):
    everywhere = {f["path"] for f in run_json(shared, "find", "*.jsonl")}
    codex = {f["path"] for f in run_json(shared, "find", "*.jsonl", "--tree", "codex")}
    since = run_json(shared, "find", "*.jsonl", "--since", "2")
    whole = {f["path"] for f in run_json(shared, "find", "codex/sessions/*")}
    nothing = shared.run("find", "*.nope")

    stored = {f"{tree}/{path}" for tree in ("claude", "codex", "openclaw") for path in shared.entries(tree)
              if path.endswith(".jsonl")}
    assert everywhere == stored and "codex/late.jsonl" in everywhere
    assert codex == {p for p in everywhere if p.startswith("codex/")}
    assert {v["first"] for f in since for v in f["versions"]} == {2}
    assert whole and all(p.startswith("codex/sessions/") for p in whole)
    assert nothing.returncode == 0 and "no path matches '*.nope' in 2 checkpoints" in nothing.stdout


def test_find_whole_path_star_stops_at_slash_and_double_star_crosses_it(shared):
    top = {f["path"] for f in run_json(shared, "find", "codex/*")}
    deep = {f["path"] for f in run_json(shared, "find", "codex/**/*.jsonl")}

    assert "codex/late.jsonl" in top and "codex/sessions" in top
    assert all(p.count("/") == 1 for p in top), sorted(top)
    stored = {f"codex/{path}" for path in shared.entries("codex") if path.endswith(".jsonl")}
    assert deep == stored and "codex/late.jsonl" in deep and any(p.count("/") > 3 for p in deep)


def test_find_reads_every_manifest_once_and_each_page_once(wide):
    view, store = counted(wide, "find")

    result = find(view, "f001.txt")

    reads = Reads(store, set())
    assert [v.first for v in result.found[3].versions] == [5, 4, 3, 2, 1]
    assert sorted(reads.manifests) == [manifest_key(s) for s in range(1, 6)]
    assert len(reads.ranges) == len(set(reads.ranges))      # no record read twice
    distinct = {(r.pack, r.offset) for s in range(1, 6) for r in index_pages(wide.repo(), s, "codex")}
    assert len(reads.ranges) <= len(distinct) + 5              # plus at most a base per checkpoint


def test_find_holds_one_checkpoint_s_pages_per_tree_and_no_manifest_however_long_the_history(wide):
    """What find keeps of each page (its matches) goes once no later checkpoint names it:
    after the walk, the pages of the newest checkpoint's tree, not every page of the
    five checkpoints; and no manifest it read (a week's history held them all: 887 MiB)."""
    view, store = counted(wide, "find")
    find(view, "f001.txt")
    read = len(store.gets)
    view.manifest(5)
    assert len(store.gets) == read + 1
    walker = _Walker(view, lambda tree, path: path.endswith(".txt"))

    for seq in range(1, 6):
        walker.matches("codex", wide.repo().load_manifest(seq)[0].trees["codex"].root)

    newest = {ref.id for ref in index_pages(wide.repo(), 5, "codex")}
    every = {ref.id for seq in range(1, 6) for ref in index_pages(wide.repo(), seq, "codex")}
    assert set(walker.memo["codex"]) == newest and len(every) > len(newest)
    assert find_paths(view, lambda tree, path: True, ("codex",), None, entries=False).entries == {}


# --------------------------------------------------------------------------- damage


def test_ls_past_a_torn_newest_manifest_lists_the_one_before_exit_3(live):
    live.checkpoint()
    write(live.local / "codex-home" / "x.txt", b"x")
    live.checkpoint()
    key = live.store_path / manifest_key(2)
    key.write_bytes(key.read_bytes()[:-5])

    proc = live.run("ls", "codex", "--json")

    assert proc.returncode == EXIT_FALLBACK
    listing = json.loads(proc.stdout)
    assert listing["seq"] == 1 and listing["skipped"][0].startswith("checkpoint 2 is unusable (its manifest: ")
    assert "ls: checkpoint 2 is unusable" in proc.stderr and "FALLBACK" in proc.stderr


def test_ls_past_a_damaged_index_page_lists_the_one_before_exit_3(live):
    live.checkpoint()
    write(live.local / "codex-home" / "x.txt", b"x")
    live.checkpoint()
    live.corrupt_blob(live.repo().load_manifest(2)[0].trees["codex"].root)

    proc = live.run("ls", "codex")

    assert proc.returncode == EXIT_FALLBACK
    assert proc.stdout.startswith("codex at checkpoint 1 ") and "x.txt" not in proc.stdout
    assert "ls: checkpoint 2 is unusable (tree codex: verify object: " in proc.stderr


def test_find_passes_over_an_unreadable_checkpoint_exit_3(live):
    live.checkpoint()
    write(live.local / "codex-home" / "x.txt", b"x")
    live.checkpoint()
    (live.store_path / manifest_key(1)).write_bytes(b"garbage")

    proc = live.run("find", "x.txt")

    assert proc.returncode == EXIT_FALLBACK
    assert "codex/x.txt" in proc.stdout and "find: checkpoint 1 is unreadable" in proc.stderr


# --------------------------------------------------------------------------- a long history, counted


class History(NamedTuple):
    """A store of ``checkpoints`` checkpoints (a multiple of 3): a codex tree of 2,000
    small files (three index levels) and three transcripts; checkpoint n appends a line
    to transcript ``n % 3``, and every ``every``-th also adds a file under ``added/``."""

    live: Live
    checkpoints: int
    every: int

    def commands(self) -> dict:
        """The commands counted: (command line, the library call), by name."""
        n = self.checkpoints
        return {
            "ls": (["ls", "codex/sessions"], lambda v, _: list_path(v, parse_where("codex/sessions", "ls"))),
            "ls --long": (["ls", "--long", "codex/sessions"],
                          lambda v, _: list_path(v, parse_where("codex/sessions", "ls"), long=True)),
            "cat": (["cat", "codex/sessions/chat0.jsonl"],
                    lambda v, out: cat(v, parse_where("codex/sessions/chat0.jsonl", "cat"), out)),
            "diff": (["diff", str(n - 2), str(n - 1)], lambda v, _: diff(v, str(n - 2), str(n - 1))),
            "diff --no-lines": (["diff", "--no-lines", "1", str(n)], lambda v, _: diff(v, "1", str(n), lines=False)),
            "find": (["find", "chat*.jsonl"], lambda v, _: find(v, "chat*.jsonl")),
        }

    def run(self, name: str):
        """Run one of ``commands`` in-process: (its answer, its counting store)."""
        view, store = counted(self.live, name.split()[0])
        with open(os.devnull, "wb") as sink:
            return self.commands()[name][1](view, sink), store


#: `make test` counts on 30 checkpoints; the `long` run (`make test-long`) on the 300 that
#: docs/history.md (its second design cut, §19) gives the numbers of. The assertions are the same.
@pytest.fixture(scope="module", params=[pytest.param((30, 10), id="30"),
                                        pytest.param((300, 25), id="300", marks=pytest.mark.long)])
def history(request, tmp_path_factory) -> Iterator[History]:
    checkpoints, every = request.param

    def build(live: Live) -> History:
        many_files(live)
        chats = [live.local / "codex-home" / "sessions" / f"chat{i}.jsonl" for i in range(3)]
        for chat in chats:
            write(chat, b"".join(live.gemini_record(i) for i in range(20)))
        for n in range(1, checkpoints + 1):
            with open(chats[n % 3], "ab") as fh:
                fh.write(live.gemini_record(n))
            if n % every == 0:
                write(live.local / "codex-home" / "added" / f"n{n:03d}.txt", b"%d\n" % n)
            assert live.checkpoint().seq == n
        return History(live, checkpoints, every)

    yield from module_live(tmp_path_factory, "history", build)


def test_counts_on_a_store_of_many_checkpoints(history):
    """What each command reads, counted (docs/design.md §19 says what; docs/history.md, §19, the numbers)."""
    live, n = history.live, history.checkpoints
    repo = live.repo()
    data = data_packs(repo)
    levels = View(repo, "ls").load_page(repo.load_manifest(n)[0].trees["codex"].root, "root").level + 1
    got = {name: history.run(name) for name in history.commands()}
    reads = {name: Reads(store, data) for name, (_, store) in got.items()}

    assert levels == 3
    assert all(r.lists == ["manifests/"] for r in reads.values())
    listing, r = got["ls"][0], reads["ls"]
    assert [e.name for e in listing.entries] == ["chat0.jsonl", "chat1.jsonl", "chat2.jsonl"]
    assert len(r.manifests) == 1 and r.data == [] and len(r.index) <= 2 * levels      # a page and its base a level
    listing, r = got["ls --long"][0], reads["ls --long"]
    assert [e.changed for e in listing.entries] == [n, n - 2, n - 1]
    assert len(r.manifests) == 4 and r.data == []                                     # back to n - 3, no further
    chat, r = live.entries("codex")["sessions/chat0.jsonl"], reads["cat"]
    assert len(r.manifests) == 1 and set(r.data) <= {pack_key(ref.pack) for ref in chat.refs}
    assert len(r.index) <= 2 * levels
    near, r = got["diff"][0], reads["diff"]
    assert [(c.path, c.lines_added) for c in near.changes] == [(f"codex/sessions/chat{(n - 1) % 3}.jsonl", 1)]
    assert len(r.manifests) == 2 and len(r.index) <= 4 * levels and len(r.data) <= 2  # a new segment, its anchor
    far, r = got["diff --no-lines"][0], reads["diff --no-lines"]
    assert len(far.changes) == 1 + n // history.every + 3 and r.data == []   # added/, its files, 3 transcripts
    found, r = got["find"][0], reads["find"]
    assert len(found.found) == 3 and len(r.manifests) == n and r.data == []
    assert len(r.ranges) == len(set(r.ranges))                                         # each page once


def _copy_to_bucket(live: Live, bucket) -> None:
    cloud = open_store(bucket.url)
    for key in live.store.list():
        cloud.put_if_absent(key, live.store.get(key))


def test_counts_on_moto_s3(history, s3_bucket, s3_server):
    """The same store on S3, through the CLI: every request the server saw is a GET
    (one listing of manifests/, then exactly the reads counted on the local store)."""
    _copy_to_bucket(history.live, s3_bucket)
    env = {**history.live.env, **s3_server.env, "JOURNAL_STORE": s3_bucket.url}

    for name, (args, _call) in history.commands().items():
        mark = s3_bucket.mark()
        proc = subprocess.run([sys.executable, "-m", "journal", *args], env={**os.environ, **env},
                              capture_output=True)
        assert proc.returncode == 0, proc.stderr
        seen = s3_server.requests[mark:]
        _answer, store = history.run(name)

        assert all(method == "GET" for method, _path, _query in seen), (name, seen)
        assert len([r for r in seen if "list-type" in r[2]]) == 1, name
        assert len([r for r in seen if "list-type" not in r[2]]) == len(store.gets), name

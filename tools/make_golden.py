"""Regenerate ``tests/golden/``: a tiny store written by the current code, and its tree.

Usage::

    .venv/bin/python tools/make_golden.py            # rewrites tests/golden/{store,tree,tree.json}
    .venv/bin/python tools/make_golden.py --out DIR  # writes somewhere else

What it builds: one tree, ``codex`` (a Codex home in miniature), checkpointed twice
into a ``LocalStore``:

* checkpoint 1: a rollout JSONL with 6 lines, ``version.json``, ``AGENTS.md`` (no
  trailing newline), a relative symlink, an empty directory ``log/`` (mode 0700);
* checkpoint 2: 5 more lines appended to the rollout, ``version.json`` rewritten.

``tests/golden/tree`` is the live tree after checkpoint 2, which is exactly what a
restore of the store must produce. Git keeps neither empty directories nor modes nor
mtimes, so ``tests/golden/tree.json`` lists every entry (kind, mode, mtime_ns, size,
sha256 or target); ``tests/test_format.py`` checks a restore against both.

Determinism: file contents, modes and mtimes are fixed here, so every pack
(``packs/<hh>/<sha256>``, chunks, segments and index pages) is byte-identical from
run to run with the same zstandard build. These fields differ on every run:

* ``config``: ``store_id`` (a random uuid) and ``created`` (the wall clock);
* ``manifests/*``: ``created``, ``created_ns`` (wall clock), ``host``, ``pid``,
  ``writer`` (a random id per local state), and so the record bytes and blob id;
  manifest 2's ``parent_id`` is manifest 1's payload hash, so it varies too.

Everything else in a manifest (``version``, ``seq``, ``parent``, ``trees``, ``packs``,
``added_bytes``, ``added_objects``) is reproducible.

SQLite stores (``--sqlite DIR``): one tree, ``hermes``, holding ``state.db`` (page size
1024), checkpointed four times (full map; a few rows updated and one inserted; growth
and one more update; one more small update), plus ``expect.json``: per checkpoint the SHA-256 of the database a
restore must rebuild, its page count and a digest of its rows, and the SQLite version
that wrote it. ``tests/golden/sqlite-v1`` was written by the format-1 writer (whole
pages only) and ``tests/golden/sqlite-v2`` by the format-2 writer (one-page deltas); both
are frozen: they pin that old stores still read, as is ``tests/golden/sqlite-v3``
(format 5: page groups, group deltas, a recent map in the third checkpoint).
``tests/golden/sqlite-v4`` is regenerated with ``--sqlite tests/golden/sqlite-v4``
(format 6: a fourth checkpoint, whose recent map is a delta of the third's; index
page and map deltas name their base by position). The database
bytes depend on the SQLite library (its version number is in the file header), so only
a run with the recorded SQLite version reproduces the packs byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from journal.checkpoint.run import checkpoint  # noqa: E402
from journal.config import Config, TreeConfig  # noqa: E402
from journal.repository.history import ManifestCache  # noqa: E402
from journal.repository.repository import Repository  # noqa: E402
from journal.sqlite.rebuild import rebuild_db  # noqa: E402
from journal.store.local import TMP_DIR, LocalStore  # noqa: E402

TREE = "codex"
ROLLOUT = "sessions/2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
LINK = "sessions/latest-rollout"
LINK_TARGET = "2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"

#: 2026-02-23T12:19:38Z; every mtime is this plus a fixed offset.
T0 = 1_771_849_178_000_000_000
SECOND = 1_000_000_000

_SID = "019c8a70-dda7-7f33-98ea-f30553347322"
_TURN = "019c8a70-ebe7-7e83-92b2-f77ddd49c5f9"


def _line(ts: str, kind: str, payload: dict) -> bytes:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}, separators=(",", ":")).encode() + b"\n"


#: Rollout lines, shaped like a real Codex rollout (session_meta, response_item, event_msg, turn_context).
LINES_1 = [
    _line("2026-02-23T12:19:42.561Z", "session_meta", {
        "id": _SID, "timestamp": "2026-02-23T12:19:38.535Z", "cwd": "/home/node/work/demo",
        "originator": "codex_cli_rs", "cli_version": "0.104.0", "source": "cli", "model_provider": "openai"}),
    _line("2026-02-23T12:19:42.562Z", "response_item", {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files in src/."}]}),
    _line("2026-02-23T12:19:42.562Z", "event_msg", {
        "type": "task_started", "turn_id": _TURN, "model_context_window": 258400}),
    _line("2026-02-23T12:19:42.586Z", "turn_context", {
        "turn_id": _TURN, "cwd": "/home/node/work/demo", "approval_policy": "on-request",
        "sandbox_policy": {"type": "workspace-write", "network_access": False}, "model": "gpt-5-codex"}),
    _line("2026-02-23T12:19:49.357Z", "response_item", {
        "type": "reasoning", "summary": [{"type": "summary_text", "text": "Listing the directory."}],
        "content": None}),
    _line("2026-02-23T12:19:52.620Z", "response_item", {
        "type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"ls src\"}",
        "call_id": "call_UtYwHmwWekzvq83m8Rb9K8jJ"}),
]
LINES_2 = [
    _line("2026-02-23T12:19:52.689Z", "event_msg", {
        "type": "token_count", "info": {"total_token_usage": {"input_tokens": 34469, "output_tokens": 431}}}),
    _line("2026-02-23T12:19:52.901Z", "response_item", {
        "type": "function_call_output", "call_id": "call_UtYwHmwWekzvq83m8Rb9K8jJ",
        "output": "{\"output\":\"main.py\\nutil.py\\n\",\"metadata\":{\"exit_code\":0}}"}),
    _line("2026-02-23T12:19:55.120Z", "event_msg", {"type": "agent_message", "message": "src/ holds main.py and util.py."}),
    _line("2026-02-23T12:19:55.121Z", "response_item", {
        "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": "src/ holds main.py and util.py."}]}),
    _line("2026-02-23T12:19:55.300Z", "event_msg", {"type": "task_complete", "turn_id": _TURN}),
]
VERSION_1 = b'{"latest_version":"0.104.0","last_checked_at":"2026-02-23T12:00:00Z"}\n'
VERSION_2 = b'{"latest_version":"0.105.0","last_checked_at":"2026-02-23T12:19:50Z","dismissed_version":null}\n'
AGENTS_MD = b"# Agent notes\n\nRun `make test` before committing.\nNo trailing newline here."


def _put(root: str, rel: str, data: bytes, mode: int, mtime_ns: int) -> None:
    path = os.path.join(root, rel)
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def write_tree_v1(root: str) -> None:
    """The live tree as checkpoint 1 sees it."""
    for rel in ("sessions", "sessions/2026", "sessions/2026/02", "sessions/2026/02/23"):
        os.makedirs(os.path.join(root, rel), exist_ok=True)
        os.chmod(os.path.join(root, rel), 0o755)
    os.makedirs(os.path.join(root, "log"), exist_ok=True)
    os.chmod(os.path.join(root, "log"), 0o700)
    _put(root, ROLLOUT, b"".join(LINES_1), 0o644, T0 + 14 * SECOND)
    _put(root, "version.json", VERSION_1, 0o600, T0 + 2 * SECOND)
    _put(root, "AGENTS.md", AGENTS_MD, 0o644, T0 + 1 * SECOND)
    link = os.path.join(root, LINK)
    os.symlink(LINK_TARGET, link)
    os.utime(link, ns=(T0 + 3 * SECOND, T0 + 3 * SECOND), follow_symlinks=False)


def write_tree_v2(root: str) -> None:
    """Checkpoint 2's changes: the rollout grows, version.json is rewritten."""
    with open(os.path.join(root, ROLLOUT), "ab") as fh:
        fh.write(b"".join(LINES_2))
    os.utime(os.path.join(root, ROLLOUT), ns=(T0 + 17 * SECOND, T0 + 17 * SECOND))
    _put(root, "version.json", VERSION_2, 0o600, T0 + 16 * SECOND)


def build_golden(work: str) -> tuple[str, str]:
    """Build the tree and its two-checkpoint store under ``work``; returns (store, tree)."""
    tree = os.path.join(work, "local", "codex-home")
    store_dir = os.path.join(work, "store")
    os.makedirs(tree)
    os.chmod(tree, 0o755)
    cfg = Config(store=store_dir, local=os.path.join(work, "local"), state_dir=os.path.join(work, "state"),
                 interval=15.0, trees=(TreeConfig(name=TREE, path=tree),))
    write_tree_v1(tree)
    first = checkpoint(cfg, LocalStore(store_dir))
    write_tree_v2(tree)
    second = checkpoint(cfg, LocalStore(store_dir))
    if (first.seq, second.seq) != (1, 2):
        raise SystemExit(f"make_golden: expected checkpoints 1 and 2, got {first.seq} and {second.seq}")
    return store_dir, tree


DB_TREE = "hermes"
DB_NAME = "state.db"


def _note(i: int, rev: int = 0) -> tuple[int, str, str]:
    words = hashlib.sha256(f"note {i} rev {rev}".encode()).hexdigest()
    return i, f"note {i:03d} {words[:12]}", (f"body of note {i}, revision {rev}: " + words * 3)[:160]


def _db_rows_digest(path: str) -> str:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT id, title, body FROM notes ORDER BY id").fetchall()
    finally:
        con.close()
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


#: The three states of the golden database: (SQL statements, rows to insert).
DB_STEPS = (
    ("CREATE TABLE notes(id INTEGER PRIMARY KEY, title TEXT, body TEXT);"
     "CREATE INDEX notes_title ON notes(title);", [_note(i) for i in range(40)]),
    ("UPDATE notes SET body = 'rewritten three' || body WHERE id = 3;"
     "UPDATE notes SET body = 'rewritten seventeen' || body WHERE id = 17;", [_note(40)]),
    ("UPDATE notes SET title = title || ' (edited)' WHERE id = 5;", [_note(i, 1) for i in range(41, 66)]),
    # format 6: one more small change; its recent map repeats the previous one's slots
    ("UPDATE notes SET body = 'rewritten again' WHERE id = 60;", []),
)


def build_golden_sqlite(work: str) -> tuple[str, dict]:
    """Build the SQLite golden store under ``work``; returns (store, expectations)."""
    local = os.path.join(work, "local")
    tree = os.path.join(local, DB_TREE)
    store_dir = os.path.join(work, "store")
    os.makedirs(tree)
    cfg = Config(store=store_dir, local=local, state_dir=os.path.join(work, "state"), interval=15.0,
                 trees=(TreeConfig(name=DB_TREE, path=tree, sqlite=(DB_NAME,)),))
    db = os.path.join(tree, DB_NAME)
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA page_size=1024")
    con.execute("PRAGMA journal_mode=DELETE")
    expect = {"tree": DB_TREE, "db": DB_NAME, "sqlite_version": sqlite3.sqlite_version, "checkpoints": {}}
    for n, (sql, rows) in enumerate(DB_STEPS, 1):
        con.execute("BEGIN")
        for stmt in filter(None, sql.split(";")):
            con.execute(stmt)
        con.executemany("INSERT INTO notes VALUES (?, ?, ?)", rows)
        con.execute("COMMIT")
        os.utime(db, ns=(T0 + n * SECOND, T0 + n * SECOND))
        result = checkpoint(cfg, LocalStore(store_dir))
        if result.seq != n:
            raise SystemExit(f"make_golden: expected checkpoint {n}, got {result.seq}")
    con.close()
    repo = Repository.open(LocalStore(store_dir))
    for n in range(1, len(DB_STEPS) + 1):
        entry = next(e for e in ManifestCache(repo).tree(n, DB_TREE)[0] if e.path == DB_NAME)
        path = os.path.join(work, f"rebuilt-{n}.db")
        rebuild_db(entry, repo, path)
        with open(path, "rb") as fh:
            data = fh.read()
        expect["checkpoints"][str(n)] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                                         "pages": len(data) // 1024, "rows": _db_rows_digest(path)}
    return store_dir, expect


def write_golden_sqlite(out: str) -> None:
    """Write a SQLite golden store and its expect.json into ``out``."""
    with tempfile.TemporaryDirectory(prefix="make-golden-sqlite-") as work:
        store_dir, expect = build_golden_sqlite(work)
        os.makedirs(out, exist_ok=True)
        _replace_dir(store_dir, os.path.join(out, "store"), ignore=shutil.ignore_patterns(TMP_DIR))
        with open(os.path.join(out, "expect.json"), "w") as fh:
            json.dump(expect, fh, indent=1, sort_keys=True)
            fh.write("\n")


def describe_tree(root: str) -> list[dict]:
    """Every path under ``root`` (sorted), as ``tests/golden/tree.json`` lists it."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            st = os.lstat(full)
            item = {"path": rel, "mode": stat.S_IMODE(st.st_mode)}
            if stat.S_ISLNK(st.st_mode):
                item.update(kind="symlink", mtime_ns=st.st_mtime_ns, target=os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                item.update(kind="dir")
            else:
                with open(full, "rb") as fh:
                    data = fh.read()
                item.update(kind="file", mtime_ns=st.st_mtime_ns, size=len(data),
                            sha256=hashlib.sha256(data).hexdigest())
            out.append(item)
    return sorted(out, key=lambda i: i["path"])


def _replace_dir(src: str, dst: str, ignore=None) -> None:
    if os.path.lexists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True, ignore=ignore)


def main(argv: list[str] | None = None) -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(here, "tests", "golden"))
    parser.add_argument("--sqlite", metavar="DIR", help="write a SQLite golden store into DIR instead")
    args = parser.parse_args(argv)
    if args.sqlite:
        write_golden_sqlite(args.sqlite)
        print(f"make_golden: wrote {args.sqlite}/store and expect.json")
        return 0
    with tempfile.TemporaryDirectory(prefix="make-golden-") as work:
        store_dir, tree = build_golden(work)
        os.makedirs(args.out, exist_ok=True)
        _replace_dir(store_dir, os.path.join(args.out, "store"), ignore=shutil.ignore_patterns(TMP_DIR))
        _replace_dir(tree, os.path.join(args.out, "tree"))
        listing = {"tree": TREE, "entries": describe_tree(tree)}
        with open(os.path.join(args.out, "tree.json"), "w") as fh:
            json.dump(listing, fh, indent=1, sort_keys=True)
            fh.write("\n")
    print(f"make_golden: wrote {args.out}/store, tree and tree.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

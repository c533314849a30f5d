"""``journal migrate``: the upstream shell design's layout becomes each harness's first checkpoint.

Every scenario builds a real legacy layout in a temp dir: rsync-style trees under
``data/state``, a valid ``checkpoints/opencode.db``, torn raw db/WAL/SHM trios (the
WAL copied at a later moment than the db), a consistent raw trio under the old
HOME, the Codex sessions symlink into the legacy root, an existing
``*.pre-agent-state`` name, old stamps, and a real process holding transcripts open
with a torn last line. Each test compares a full listing (type, size, sha256, mode,
mtime, link target) of the legacy root, the old HOME and ``$AM_LOCAL`` before and
after: nothing outside the expected paths changes and nothing is deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Live
from journal.checkpoint.run import checkpoint
from journal.migrate.execute import execute, migrate
from journal.migrate.plan import plan_migration
from journal.report import Collector
from journal.store import open_store

ROLLOUT = "sessions/2026/03/02/rollout-2026-03-02T09-00-00-0199aaaa.jsonl"
CLOSED_ROLLOUT = "sessions/2026/03/01/rollout-2026-03-01T08-00-00-0199bbbb.jsonl"
CLAUDE_LIVE = "projects/-work-app/5b8f3c1e-live.jsonl"
LIVE_TREES = ("codex-home", "agent-state/claude", "agent-state/gemini-home", "oc-home", "opencode-share",
              "hermes", "fx-home")


# --------------------------------------------------------------------------- helpers


def line(i: int, kind: str = "response_item") -> bytes:
    return json.dumps({"timestamp": f"2026-03-02T09:{i // 60:02d}:{i % 60:02d}Z", "type": kind,
                       "payload": {"n": i, "text": "word " * (i % 9)}}).encode() + b"\n"


def write(path: Path, data: bytes | str, mtime: float | None = None, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        path.chmod(mode)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def make_db(path: Path, label: str, rows: int) -> sqlite3.Connection:
    """A WAL-mode database with ``rows`` committed rows labelled ``label``; left open."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(str(path), isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE IF NOT EXISTS message (id TEXT PRIMARY KEY, label TEXT, body TEXT)")
    con.execute("CREATE INDEX IF NOT EXISTS message_body ON message (body)")
    insert(con, label, rows)
    return con


def insert(con: sqlite3.Connection, label: str, rows: int) -> None:
    con.execute("BEGIN")
    for _ in range(rows):
        con.execute("INSERT INTO message VALUES (?, ?, ?)", (os.urandom(8).hex(), label, os.urandom(120).hex()))
    con.execute("COMMIT")


def torn_trio(dest: Path, scratch: Path) -> None:
    """db copied at one moment, its WAL and SHM at a later one (after a checkpoint moved pages)."""
    con = make_db(scratch, "torn", 200)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(scratch, dest)
    insert(con, "torn", 2000)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    insert(con, "torn", 300)
    shutil.copyfile(f"{scratch}-wal", f"{dest}-wal")
    shutil.copyfile(f"{scratch}-shm", f"{dest}-shm")
    con.close()


def consistent_trio(dest: Path, label: str, rows: int) -> None:
    """A raw trio copied while no one writes: recoverable, with committed rows only in its WAL."""
    scratch = dest.parent / ".scratch" / dest.name
    con = make_db(scratch, label, rows)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    insert(con, label + "-wal", 7)   # only in the WAL
    for suffix in ("", "-wal", "-shm"):
        shutil.copyfile(f"{scratch}{suffix}", f"{dest}{suffix}")
    con.close()
    shutil.rmtree(scratch.parent)


def backup_copy(dest: Path, scratch: Path, label: str, rows: int) -> None:
    """What the shell design's ``sqlite3 db .backup`` left under ``checkpoints/``."""
    con = make_db(scratch, label, rows)
    dest.parent.mkdir(parents=True, exist_ok=True)
    out = sqlite3.connect(str(dest))
    con.backup(out)
    out.close()
    con.close()


def labels(db: Path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(con.execute("SELECT label, count(*) FROM message GROUP BY label").fetchall())
    finally:
        con.close()


def listing(*roots: Path) -> dict[str, tuple]:
    """Every path under ``roots``: type, and for files size, sha256, mode, mtime; link targets."""
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                if os.path.islink(path):
                    out[path] = ("link", os.readlink(path))
                elif os.path.isdir(path):
                    out[path] = ("dir", st.st_mode)
                else:
                    with open(path, "rb") as fh:
                        digest = hashlib.sha256(fh.read()).hexdigest()
                    out[path] = ("file", st.st_size, digest, st.st_mode, st.st_mtime_ns)
    return out


class Legacy(Live):
    """A container with a legacy deployment beside it: ``data/state`` (the legacy root),
    ``data/home`` (the old HOME), ``local``, ``store`` and a ``scratch`` dir, all under
    ``root``; its own HOME is ``root/h``."""

    def __init__(self, root: Path):
        super().__init__(root / "h", root / "store", local=root / "local")
        self.root = root
        self.legacy = root / "data" / "state"
        self.old_home = root / "data" / "home"
        self.scratch = root / "scratch"
        for d in (self.legacy, self.old_home, self.scratch):
            d.mkdir(parents=True, exist_ok=True)
        self.holder: subprocess.Popen | None = None

    def areas(self) -> dict[str, tuple]:
        return listing(self.legacy, self.old_home, self.local)

    def migrate(self, **kw):
        """``migrate`` of the library, from the legacy root."""
        return migrate(self.cfg, open_store(self.store_url), str(self.legacy), reporter=Collector(), **kw)

    def migrate_cli(self, *args: str) -> subprocess.CompletedProcess:
        """``journal migrate`` from the legacy root and the old HOME."""
        return self.run("migrate", "--legacy-root", str(self.legacy), "--old-home", str(self.old_home), *args)

    def hold_open(self, *paths: Path) -> None:
        """A real writer: appends complete lines and a torn last line to each path, holds them open."""
        script = (
            "import sys, json\n"
            "fhs = [open(p, 'ab') for p in sys.argv[1:]]\n"
            "for fh in fhs:\n"
            "    for i in range(5):\n"
            "        fh.write(json.dumps({'type': 'event_msg', 'n': i}).encode() + b'\\n')\n"
            "    fh.write(b'{\"type\": \"response_item\", \"torn')\n"
            "    fh.flush()\n"
            "print('ready', flush=True)\n"
            "sys.stdin.read()\n")
        self.holder = subprocess.Popen([sys.executable, "-c", script, *map(str, paths)], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
        assert self.holder.stdout.readline().strip() == "ready"

    def release(self) -> None:
        if self.holder is not None:
            self.holder.stdin.close()
            self.holder.wait(timeout=10)
            self.holder = None


def build_legacy(lay: Legacy) -> None:
    """The full legacy deployment every test starts from (see the module docstring)."""
    old, new = time.time() - 86400, time.time() - 3600
    s, h, loc = lay.legacy, lay.old_home, lay.local
    # Codex: closed and open rollouts, history, config; SQLite caches stay quarantined.
    write(s / "codex" / CLOSED_ROLLOUT, b"".join(line(i) for i in range(30)), mtime=old)
    write(s / "codex" / ROLLOUT, line(0, "session_meta"), mtime=new)
    write(s / "codex" / "history.jsonl", b"".join(line(i) for i in range(3)))
    write(s / "codex" / "config.toml", 'model = "gpt-5"\n', mtime=old)
    write(s / "codex" / "auth.json", '{"token": "legacy"}', mode=0o600)
    write(s / "codex" / "logs_2.sqlite", b"SQLite format 3\0cache")
    write(s / "codex" / "db-backups" / "am-quarantine" / "goals_1.sqlite", b"quarantined")
    # Claude, OpenClaw, fx: plain trees.
    write(s / "claude" / ".claude.json", '{"numStartups": 4}')
    write(s / "claude" / "projects" / "-work-app" / "0a1b-old.jsonl", b"".join(line(i) for i in range(12)))
    write(s / "openclaw-backup" / "agents" / "main" / "sessions" / "s1.jsonl", line(1) + line(2))
    write(s / "openclaw-backup" / "agents" / "main" / "sessions" / "sessions.json", "{}")
    write(s / "fx" / "sessions" / "f1" / "events.jsonl", line(5))
    write(s / "fx" / "settings.json", "{}")
    write(s / "fx" / "session.lock", "4242")
    # Gemini: the legacy tree and the old HOME; the legacy settings are newer.
    write(s / "gemini" / "settings.json", '{"theme": "legacy"}', mtime=new)
    write(s / "gemini" / "tmp" / "p1" / "chats" / "session-a.jsonl", line(7))
    write(h / ".gemini" / "settings.json", '{"theme": "old-home"}', mtime=old)
    write(h / ".gemini" / "tmp" / "p0" / "chats" / "session-old.jsonl", line(8) + line(9))
    # opencode: a valid checkpoints/ copy, a torn raw trio, files; a real old-HOME dir.
    write(s / "opencode" / "auth.json", '{"opencode": 1}')
    write(s / "opencode" / "storage" / "session" / "ses_1.json", '{"id": "ses_1"}')
    backup_copy(s / "opencode" / "checkpoints" / "opencode.db", lay.scratch / "oc-ck.db", "checkpoint", 40)
    torn_trio(s / "opencode" / "opencode.db", lay.scratch / "oc-raw.db")
    write(h / ".local" / "share" / "opencode" / "storage" / "session" / "ses_0.json", '{"id": "ses_0"}')
    write(h / ".local" / "share" / "opencode.pre-agent-state" / "marker", "an earlier rollback copy")
    # Hermes: only a torn raw trio in the legacy root; a consistent trio in the old HOME.
    write(s / "hermes" / "config.yaml", "model: hermes-4\n")
    write(s / "hermes" / "memories" / "user.md", "likes tea\n")
    torn_trio(s / "hermes" / "state.db", lay.scratch / "h-raw.db")
    write(h / ".hermes" / "skills" / "deploy.md", "# deploy\n")
    consistent_trio(h / ".hermes" / "state.db", "old-home", 25)
    # A directory journal does not know.
    write(s / "workspaces-index" / "notes.txt", "not agent state")
    # The local side: Codex with the old sessions symlink and a newer local config; a
    # live Claude tree; the shell design's stamps and invalid databases.
    write(loc / "codex-home" / "config.toml", 'model = "local-newer"\n')
    (loc / "codex-home" / "sessions").symlink_to(s / "codex" / "sessions")
    write(loc / "agent-state" / "claude" / CLAUDE_LIVE, line(100))
    write(loc / "agent-state-stamps" / "codex", "")
    write(loc / "agent-state-invalid" / "opencode.db.20260101T000000Z.77" / "opencode.db", b"garbage")
    shutil.rmtree(lay.scratch)


@pytest.fixture
def lay(tmp_path):
    layout = Legacy(tmp_path)
    build_legacy(layout)
    yield layout
    layout.release()


def holding(lay: Legacy) -> tuple[Path, Path]:
    """Start the writer on the open rollout (through the symlink) and the live Claude transcript."""
    rollout = lay.local / "codex-home" / ROLLOUT
    claude = lay.local / "agent-state" / "claude" / CLAUDE_LIVE
    lay.hold_open(rollout, claude)
    return rollout, claude


def under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def steps(report, op: str) -> list:
    return [r for r in report.results if r.step.op == op]


def assert_nothing_lost(before: dict, after: dict, renamed: dict[str, str], changed: set[str]) -> None:
    """Every path of ``before`` is still there, identical, under its new name when renamed,
    except the paths in ``changed``."""
    for path, what in before.items():
        if path in changed:
            continue
        moved = path
        for old, new in renamed.items():
            if path == old or path.startswith(old + "/"):
                moved = new + path[len(old):]
        assert after.get(moved) == what, f"{path} changed or vanished"


# --------------------------------------------------------------------------- the full migration


def test_migration_imports_every_legacy_tree_and_changes_nothing_else(lay):
    rollout, claude = holding(lay)
    before = lay.areas()

    report = lay.migrate()

    assert report.ok, (report.problems, [r for r in report.results if r.outcome == "failed"])
    assert set(report.plan.imports) == {"codex", "claude", "gemini", "openclaw", "opencode", "hermes", "fx"}
    after = lay.areas()
    opencode_home = str(lay.old_home / ".local" / "share" / "opencode")
    hermes_home = str(lay.old_home / ".hermes")
    [oc_rename] = [r for r in steps(report, "rename") if r.step.path == opencode_home]
    renamed = {opencode_home: oc_rename.step.target, hermes_home: hermes_home + ".pre-agent-state"}
    sessions_link = str(lay.local / "codex-home" / "sessions")
    assert_nothing_lost(before, after, renamed, changed={sessions_link})
    # The legacy root and Gemini's old HOME are exactly as they were.
    assert {p: w for p, w in after.items() if p.startswith(str(lay.legacy))} == \
        {p: w for p, w in before.items() if p.startswith(str(lay.legacy))}
    assert {p: w for p, w in after.items() if p.startswith(str(lay.old_home / ".gemini"))} == \
        {p: w for p, w in before.items() if p.startswith(str(lay.old_home / ".gemini"))}
    # Everything new is inside a live tree or journal's own state directory.
    allowed = [str(lay.local / t) for t in LIVE_TREES + ("agent-state/gemini-home/.gemini", ".journal")]
    allowed += list(renamed.values())
    new = set(after) - set(before)
    assert all(under(p, allowed) for p in new), sorted(p for p in new if not under(p, allowed))
    assert under(str(lay.local / "agent-state/gemini-home/.gemini/settings.json"), new)


def test_each_tree_is_published_as_its_first_checkpoint_with_the_legacy_content(lay):
    report = lay.migrate()

    assert report.ok, report.problems
    assert lay.repo().manifest_seqs() == [report.seq] == [1]
    codex = lay.entries("codex")
    assert lay.stored_bytes("codex", CLOSED_ROLLOUT) == (lay.legacy / "codex" / CLOSED_ROLLOUT).read_bytes()
    assert "logs_2.sqlite" not in codex and not any(p.startswith("db-backups") for p in codex)
    assert lay.stored_bytes("claude", "projects/-work-app/0a1b-old.jsonl") == \
        (lay.legacy / "claude" / "projects/-work-app/0a1b-old.jsonl").read_bytes()
    assert "agents/main/sessions/s1.jsonl" in lay.entries("openclaw")
    assert "session.lock" not in lay.entries("fx") and "sessions/f1/events.jsonl" in lay.entries("fx")
    assert "storage/session/ses_0.json" in lay.entries("opencode")      # from the old HOME
    assert "skills/deploy.md" in lay.entries("hermes")                   # from the old HOME
    assert (lay.local / "hermes" / "memories" / "user.md").read_text() == "likes tea\n"


def test_a_local_file_is_never_replaced_by_its_legacy_copy(lay):
    report = lay.migrate()

    local = lay.local / "codex-home" / "config.toml"
    assert local.read_text() == 'model = "local-newer"\n'
    assert (lay.legacy / "codex" / "config.toml").read_text() == 'model = "gpt-5"\n'
    [kept] = [r for r in steps(report, "keep-local") if r.step.path == str(local)]
    assert "legacy copy stays in place" in kept.step.reason
    assert lay.stored_bytes("codex", "config.toml") == b'model = "local-newer"\n'


def test_gemini_old_home_is_imported_and_kept_in_place_newest_copy_winning(lay):
    before = listing(lay.old_home / ".gemini")

    report = lay.migrate()

    gemini = lay.local / "agent-state" / "gemini-home" / ".gemini"
    assert (gemini / "tmp/p0/chats/session-old.jsonl").read_bytes() == line(8) + line(9)   # old HOME only
    assert (gemini / "tmp/p1/chats/session-a.jsonl").read_bytes() == line(7)               # legacy only
    assert (gemini / "settings.json").read_text() == '{"theme": "legacy"}'                 # the newer copy
    assert listing(lay.old_home / ".gemini") == before
    [kept] = [r for r in steps(report, "leave") if r.step.path == str(lay.old_home / ".gemini")]
    assert "rollback copy" in kept.step.reason
    assert set(lay.entries("gemini")) >= {"settings.json", "tmp/p0/chats/session-old.jsonl"}


# --------------------------------------------------------------------------- SQLite


def test_a_valid_checkpoints_copy_is_preferred_and_the_torn_trio_is_never_opened(lay):
    raw = lay.legacy / "opencode" / "opencode.db"
    before = listing(lay.legacy / "opencode")

    report = lay.migrate()

    live = lay.local / "opencode-share" / "opencode.db"
    assert labels(live) == {"checkpoint": 40}
    [install] = [r for r in steps(report, "install-db") if r.step.tree == "opencode"]
    assert install.step.source == str(lay.legacy / "opencode" / "checkpoints" / "opencode.db")
    assert install.step.kind == "checkpoint-copy" and install.outcome == "done"
    [unused] = [r for r in steps(report, "unused-db") if r.step.tree == "opencode"]
    assert unused.step.path == str(raw) and "left untouched" in unused.step.reason
    assert listing(lay.legacy / "opencode") == before          # no -journal, no rewritten -shm
    assert lay.entries("opencode")["opencode.db"].kind == "sqlite"


def test_a_torn_trio_is_reported_and_left_untouched_and_the_next_copy_is_used(lay):
    torn = lay.legacy / "hermes" / "state.db"
    before = listing(lay.legacy / "hermes")

    report = lay.migrate()

    [reject] = [r for r in steps(report, "reject-db") if r.step.tree == "hermes"]
    assert reject.step.path == str(torn) and reject.step.kind == "raw-trio"
    assert "quick_check" in reject.step.reason or "malformed" in reject.step.reason
    assert reject.step.reason.endswith("left untouched")
    assert listing(lay.legacy / "hermes") == before
    # The old HOME's consistent trio is recovered privately, WAL rows included.
    live = lay.local / "hermes" / "state.db"
    assert labels(live) == {"old-home": 25, "old-home-wal": 7}
    assert not Path(f"{live}-wal").exists()
    export = lay.root / "export"
    assert lay.run("restore", "--to", str(export)).returncode == 0
    assert labels(export / "hermes" / "state.db") == {"old-home": 25, "old-home-wal": 7}


def test_only_a_torn_trio_fails_the_migration_and_installs_nothing(tmp_path):
    lay = Legacy(tmp_path)
    write(lay.legacy / "hermes" / "config.yaml", "model: x\n")
    torn_trio(lay.legacy / "hermes" / "state.db", lay.scratch / "raw.db")
    before = lay.areas()

    proc = lay.run("migrate", "--legacy-root", str(lay.legacy))

    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "problem: migrate: tree hermes: no legacy copy of state.db passes quick_check" in proc.stdout
    assert "migration INCOMPLETE" in proc.stderr
    assert not (lay.local / "hermes" / "state.db").exists()
    assert (lay.local / "hermes" / "config.yaml").read_text() == "model: x\n"
    after = lay.areas()
    assert_nothing_lost(before, after, {}, set())
    assert {p for p in after if p.startswith(str(lay.legacy))} == {p for p in before if p.startswith(str(lay.legacy))}


def test_a_valid_local_database_is_kept(lay):
    con = make_db(lay.local / "opencode-share" / "opencode.db", "local", 3)
    con.close()
    digest = hashlib.sha256((lay.local / "opencode-share" / "opencode.db").read_bytes()).hexdigest()

    report = lay.migrate()

    assert report.ok, report.problems
    live = lay.local / "opencode-share" / "opencode.db"
    assert hashlib.sha256(live.read_bytes()).hexdigest() == digest and labels(live) == {"local": 3}
    assert [r.step.path for r in steps(report, "keep-local-db")] == [str(live)]
    assert not [r for r in steps(report, "install-db") if r.step.tree == "opencode"]


# --------------------------------------------------------------------------- Codex symlink and renames


def test_the_codex_sessions_symlink_is_unlinked_only_at_the_local_path(lay):
    target = lay.legacy / "codex" / "sessions"
    before = listing(target)

    report = lay.migrate()

    link = lay.local / "codex-home" / "sessions"
    [unlink] = steps(report, "unlink-symlink")
    assert unlink.step.path == str(link) and unlink.step.target == str(target) and unlink.outcome == "done"
    assert link.is_dir() and not link.is_symlink()
    assert (link / CLOSED_ROLLOUT.split("/", 1)[1]).read_bytes() == (lay.legacy / "codex" / CLOSED_ROLLOUT).read_bytes()
    assert listing(target) == before


def test_a_codex_symlink_pointing_outside_the_legacy_root_is_left_alone(lay):
    link = lay.local / "codex-home" / "sessions"
    link.unlink()
    elsewhere = lay.root / "elsewhere"
    elsewhere.mkdir()
    link.symlink_to(elsewhere)

    report = lay.migrate()

    assert link.is_symlink() and os.readlink(link) == str(elsewhere)
    assert not steps(report, "unlink-symlink")
    assert any(r.step.path == str(link) and r.step.op == "keep-local" for r in report.results)


def test_old_opencode_and_hermes_homes_are_renamed_and_a_taken_name_gets_a_timestamp(lay):
    oc = lay.old_home / ".local" / "share" / "opencode"
    taken = lay.old_home / ".local" / "share" / "opencode.pre-agent-state"
    oc_before, taken_before = listing(oc), listing(taken)

    report = lay.migrate()

    assert report.ok, report.problems
    assert not oc.exists() and listing(taken) == taken_before
    [oc_new] = [p for p in (lay.old_home / ".local" / "share").iterdir()
                if p.name.startswith("opencode.pre-agent-state.")]
    assert oc_new.name[len("opencode.pre-agent-state."):].endswith("Z")
    assert {p.replace(str(oc_new), str(oc)): w for p, w in listing(oc_new).items()} == oc_before
    hermes = lay.old_home / ".hermes"
    assert not hermes.exists() and (lay.old_home / ".hermes.pre-agent-state" / "skills" / "deploy.md").exists()
    assert {r.step.path: r.outcome for r in steps(report, "rename")} == {str(oc): "done", str(hermes): "done"}


def test_old_directories_are_not_renamed_when_the_migration_has_problems(tmp_path):
    lay = Legacy(tmp_path)
    write(lay.old_home / ".hermes" / "config.yaml", "x: 1\n")
    torn_trio(lay.old_home / ".hermes" / "state.db", lay.scratch / "raw.db")

    report = lay.migrate()

    assert not report.ok
    [rename] = steps(report, "rename")
    assert rename.outcome == "skipped" and (lay.old_home / ".hermes" / "state.db").exists()


# --------------------------------------------------------------------------- open transcripts


def test_every_open_transcript_is_captured_and_verified_before_success(lay):
    rollout, claude = holding(lay)
    legacy_rollout = lay.legacy / "codex" / ROLLOUT

    report = lay.migrate()

    assert report.ok and report.verified, report.problems
    assert {(c.tree, c.rel) for c in report.captures} == {("codex", ROLLOUT), ("claude", CLAUDE_LIVE)}
    for cap, source in ((c, legacy_rollout if c.tree == "codex" else claude) for c in report.captures):
        data = source.read_bytes()
        complete = data[: data.rindex(b"\n") + 1]
        assert data.endswith(b'"torn') and cap.ok and cap.complete == len(complete)
        assert lay.stored_bytes(cap.tree, cap.rel) == complete
    # The local copy of the open rollout holds only complete lines.
    assert (lay.local / "codex-home" / ROLLOUT).read_bytes() == \
        legacy_rollout.read_bytes()[: legacy_rollout.read_bytes().rindex(b"\n") + 1]
    [verify] = steps(report, "verify")
    assert verify.outcome == "done" and "2 open transcript(s)" in verify.detail


def test_an_open_transcript_is_captured_even_when_nothing_is_imported(tmp_path):
    lay = Legacy(tmp_path)
    claude = write(lay.local / "agent-state" / "claude" / CLAUDE_LIVE, line(1))
    lay.hold_open(claude)
    try:
        report = lay.migrate()
    finally:
        lay.release()

    assert report.ok and report.plan.imports == () and report.verified
    assert [c.rel for c in report.captures] == [CLAUDE_LIVE]
    assert lay.stored_bytes("claude", CLAUDE_LIVE) == claude.read_bytes()[: claude.read_bytes().rindex(b"\n") + 1]


# --------------------------------------------------------------------------- dry run, second run, rollback


def test_migrate_json_names_each_action_and_outcome_as_it_always_has():
    """Migrate's actions and outcomes are enums now; ``--json`` and ``--dry-run`` show
    their values, and users' scripts read those names: they never change."""
    from journal.migrate.execute import Outcome
    from journal.migrate.plan import Action

    assert [a.value for a in Action] == [
        "import-tree", "skip-tree", "unlink-symlink", "create-dir", "copy", "copy-symlink", "unchanged",
        "keep-local", "install-db", "reject-db", "unused-db", "keep-local-db", "move-invalid-db", "checkpoint",
        "verify", "rename", "leave"]
    assert [o.value for o in Outcome] == ["done", "skipped", "failed", "planned", "noted"]


def test_dry_run_prints_the_full_plan_and_changes_nothing(lay):
    holding(lay)
    before = lay.areas()

    proc = lay.run("migrate", "--legacy-root", str(lay.legacy), "--dry-run")
    as_json = lay.run("migrate", "--legacy-root", str(lay.legacy), "--dry-run", "--json")

    assert proc.returncode == 0, proc.stderr
    assert lay.areas() == before and not lay.store_path.exists()
    out = proc.stdout
    for expected in ("unlink-symlink", "reject-db", "install-db", "unused-db", "keep-local", "rename",
                     "checkpoint", "verify", "leave", str(lay.legacy / "workspaces-index"),
                     str(lay.local / "agent-state-stamps"), "open     transcript"):
        assert expected in out, expected
    assert "dry run: would import" in out
    plan = json.loads(as_json.stdout)
    assert plan["dry_run"] is True and {r["outcome"] for r in plan["results"]} == {"planned"}
    copies = {r["step"]["path"] for r in plan["results"] if r["step"]["op"] == "copy"}
    assert str(lay.local / "codex-home" / CLOSED_ROLLOUT) in copies


def test_a_second_run_is_a_no_op_and_says_so(lay):
    first = lay.run("migrate", "--legacy-root", str(lay.legacy))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "migration complete" in first.stdout
    before, store_before = lay.areas(), listing(lay.store_path)

    second = lay.run("migrate", "--legacy-root", str(lay.legacy))

    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing to migrate" in second.stdout
    assert "skip-tree" in second.stdout and "already has tree codex" in second.stdout
    assert lay.areas() == before and listing(lay.store_path) == store_before


def test_a_tree_already_in_the_store_is_not_imported(lay):
    (lay.local / "codex-home" / "sessions").unlink()
    checkpoint(lay.cfg, open_store(str(lay.store_path)))   # the store gets claude and codex from local
    claude_before = listing(lay.local / "agent-state" / "claude")

    report = lay.migrate()

    assert report.ok, report.problems
    assert "claude" not in report.plan.imports and "codex" not in report.plan.imports
    assert listing(lay.local / "agent-state" / "claude") == claude_before
    assert "projects/-work-app/0a1b-old.jsonl" not in lay.entries("claude")


def test_a_missing_legacy_root_is_a_one_line_error(tmp_path):
    lay = Legacy(tmp_path)
    proc = lay.run("migrate", "--legacy-root", str(tmp_path / "nope"))

    assert proc.returncode == 2
    assert proc.stderr.startswith("journal: error: migrate: legacy root") and "Traceback" not in proc.stderr


def test_restore_to_exports_the_migrated_store_as_a_plain_tree_for_rollback(lay):
    assert lay.migrate().ok
    export = lay.root / "rollback"

    proc = lay.run("restore", "--to", str(export))

    assert proc.returncode == 0, proc.stderr
    assert (export / "codex" / CLOSED_ROLLOUT).read_bytes() == (lay.legacy / "codex" / CLOSED_ROLLOUT).read_bytes()
    assert (export / "claude" / ".claude.json").read_text() == '{"numStartups": 4}'
    assert labels(export / "opencode" / "opencode.db") == {"checkpoint": 40}


def test_a_machine_without_local_state_is_told_to_restore_first(lay, tmp_path):
    other = Legacy(tmp_path / "other")
    other.env["JOURNAL_STORE"] = lay.env["JOURNAL_STORE"]
    write(other.local / "agent-state" / "claude" / "x.jsonl", line(1))
    checkpoint(other.cfg, open_store(str(lay.store_path)))   # another container's history
    before = lay.areas()

    proc = lay.run("migrate", "--legacy-root", str(lay.legacy))

    assert proc.returncode == 1
    assert "run `journal restore` first" in proc.stderr and "Traceback" not in proc.stderr
    assert lay.areas() == before


# --------------------------------------------------------------------------- what each message promises holds


def test_a_second_run_while_a_legacy_transcript_is_still_open_is_a_no_op_that_says_what_is_at_risk(lay):
    """The old design's writer still holds the rollout in the legacy root: the first run
    imported codex, so the second has nothing to do; it must not call codex "not
    imported", and it says that lines written there now stay in the legacy root."""
    lay.hold_open(lay.local / "codex-home" / ROLLOUT)   # through the sessions symlink: the legacy file
    first = lay.run("migrate", "--legacy-root", str(lay.legacy))
    assert first.returncode == 0 and "migration complete" in first.stdout, first.stdout + first.stderr

    second = lay.run("migrate", "--legacy-root", str(lay.legacy))

    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing to migrate" in second.stdout and "INCOMPLETE" not in second.stderr + second.stdout
    assert "tree codex is not imported" not in second.stdout and "problem:" not in second.stdout
    warning = next(ln for ln in second.stdout.splitlines() if ln.startswith("warning: migrate: "))
    assert str(lay.legacy / "codex" / ROLLOUT) in warning and "tree codex was imported by an earlier run" in warning
    assert str(lay.local / "codex-home") in warning


@pytest.mark.parametrize("vanished", [False, True], ids=["parent-missing", "store-vanished"])
def test_a_dry_run_refuses_a_store_the_real_run_could_not_create(lay, vanished):
    if vanished:  # this machine checkpointed to a store that is gone now
        (lay.local / "codex-home" / "sessions").unlink()
        checkpoint(lay.cfg, open_store(str(lay.store_path)))
        shutil.rmtree(lay.store_path)
        store = lay.store_path
    else:
        store = lay.root / "unmounted" / "journal"
    before = lay.areas()

    env = {**lay.env, "JOURNAL_STORE": str(store)}
    runs = [subprocess.run([sys.executable, "-m", "journal", "migrate", "--legacy-root", str(lay.legacy), *dry],
                           env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, timeout=120)
            for dry in (("--dry-run",), ())]

    for proc in runs:
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
        line = proc.stderr.strip()
        assert line.startswith("journal: error: ") and "\n" not in line
        assert ("checkpointed up to 1" if vanished else f"{store.parent} does not exist") in line
    assert runs[0].stderr == runs[1].stderr and lay.areas() == before and not store.exists()


def test_a_skipped_rename_says_what_a_later_run_does_and_it_does(tmp_path):
    """A copy failed, so no checkpoint was committed: a later run imports the tree again
    and renames the old directory once its checkpoint verifies, as the message says."""
    lay = Legacy(tmp_path)
    write(lay.old_home / ".hermes" / "config.yaml", "x: 1\n")
    memory = write(lay.old_home / ".hermes" / "memories" / "user.md", "likes tea\n")
    plan = plan_migration(lay.cfg, open_store(str(lay.store_path)), str(lay.legacy))
    memory.unlink()
    memory.symlink_to(lay.old_home / ".hermes" / "config.yaml")   # no longer the regular file the plan saw

    report = execute(plan, lay.cfg, open_store(str(lay.store_path)))

    [rename] = steps(report, "rename")
    assert report.seq is None and rename.outcome == "skipped" and "committed no checkpoint" in rename.detail
    assert "a later `journal migrate` imports this tree again and renames it" in rename.detail
    memory.unlink()
    memory.write_text("likes tea\n")
    again = lay.migrate()
    assert again.ok and "hermes" in again.plan.imports and [r.outcome for r in steps(again, "rename")] == ["done"]
    assert (lay.old_home / ".hermes.pre-agent-state" / "memories" / "user.md").read_text() == "likes tea\n"


def test_a_skipped_rename_after_a_committed_checkpoint_says_to_rename_by_hand_and_a_later_run_leaves_it(tmp_path):
    lay = Legacy(tmp_path)
    write(lay.old_home / ".hermes" / "config.yaml", "x: 1\n")
    write(lay.legacy / "gemini" / "settings.json", "{}")
    (lay.local / "agent-state" / "gemini-home").mkdir(parents=True)
    (lay.local / "agent-state" / "gemini-home" / ".gemini").symlink_to(lay.scratch)  # a plan problem

    report = lay.migrate()

    [rename] = steps(report, "rename")
    assert not report.ok and report.seq == 1 and rename.outcome == "skipped"
    assert "is in checkpoint 1 now, so a later run neither imports nor renames it" in rename.detail
    assert str(lay.old_home / ".hermes.pre-agent-state") in rename.detail
    again = lay.migrate()
    assert "hermes" not in again.plan.imports and not steps(again, "rename")
    assert (lay.old_home / ".hermes").is_dir()

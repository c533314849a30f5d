"""Bad input and hostile states at the command line, from a user's point of view.

Every test runs the real ``journal`` CLI in a subprocess against real files and a real
local store (and real SQLite where a database is involved); nothing is mocked. The
rules checked are the project's: bad input gives ONE line on stderr (``journal: error:
...``) naming the file and the fix, a non-zero exit and no traceback; nothing local is
deleted or overwritten by surprise; ``--json`` prints valid JSON on stdout; restore
never reports success when anything is incomplete; dry runs change nothing; warnings
go to stderr, not stdout.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from conftest import Live, no_traceback, one_line_error, run_journal, sigint_as_at_a_terminal, wait_for

from journal.local.tree_tmp import PREFIX as TMP_PREFIX

CLAUDE_JSONL = "agent-state/claude/projects/p/session.jsonl"
CODEX_JSONL = "codex-home/sessions/2026/02/23/rollout-a.jsonl"
CODEX_CONFIG = "codex-home/config.toml"
OPENCLAW_JSONL = "oc-home/.openclaw/agents/main/sessions/s.jsonl"


# --------------------------------------------------------------------------- helpers


def json_error(proc) -> dict:
    """The error object of a failed ``--json`` command (asserts the shape the README
    promises): stdout is one JSON object with ``error``, ``kind`` and ``exit``, ``exit``
    is the exit status, and ``error`` is the one line on stderr."""
    line = one_line_error(proc)
    doc = json.loads(proc.stdout)   # raises unless stdout is exactly one JSON document
    assert isinstance(doc, dict) and {"error", "kind", "exit"} <= set(doc), proc.stdout
    assert doc["exit"] == proc.returncode != 0, (doc, proc.returncode)
    assert line == f"journal: error: {doc['error']}", (line, doc)
    return doc


def jsonl(n: int, tag: str) -> bytes:
    return b"".join(json.dumps({"i": i, "tag": tag, "text": "lorem ipsum " * 5}).encode() + b"\n"
                    for i in range(n))


def snapshot_files(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` (outside journal's own dirs) with its bytes."""
    out = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in (".journal",) or path.is_symlink() or not path.is_file():
            continue
        out[str(rel)] = path.read_bytes()
    return out


def store_bytes(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def populate(b: Live) -> None:
    """Three harness trees (claude, codex, openclaw) with a few small files."""
    b.write(CLAUDE_JSONL, jsonl(30, "claude"))
    b.write(CODEX_JSONL, jsonl(40, "codex"))
    b.write(CODEX_CONFIG, b'model = "gpt-5"\n')
    b.write(OPENCLAW_JSONL, jsonl(20, "openclaw"))


@pytest.fixture
def box(tmp_path) -> Live:
    """A container whose three trees were checkpointed twice (seq 1 and 2; in this
    process, as the CLI's checkpoint does: the tests run the CLI on what follows)."""
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    assert b.checkpoint().seq == 1
    b.first = snapshot_files(b.local)   # what checkpoint 1 holds
    with open(b.local / CLAUDE_JSONL, "ab") as fh:
        fh.write(jsonl(3, "more"))
    assert b.checkpoint().seq == 2
    return b


# --------------------------------------------------------------------------- --json on errors


STORE_COMMANDS = [
    ("checkpoint",),
    ("log",),
    ("verify",),
    ("restore",),
    ("gc", "--keep-last", "1", "--dry-run"),
]


@pytest.mark.parametrize("args", STORE_COMMANDS, ids=lambda a: a[0])
def test_json_output_is_valid_json_even_when_the_command_fails(tmp_path, args):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    b.store_path.write_text("not a store\n")  # JOURNAL_STORE names a regular file

    proc = b.run(*args, "--json")

    doc = json_error(proc)  # a script calling `journal ... --json` must always get JSON
    assert (doc["kind"], doc["exit"]) == ("NotAStore", 1) and str(b.store_path) in doc["error"], doc


def test_json_output_is_valid_json_on_a_config_error(tmp_path):
    b = Live(tmp_path / "a", tmp_path / "store")
    config = tmp_path / "bad.toml"
    config.write_text("store = 5\n")

    proc = b.run("trees", "--json", "--config", str(config))

    doc = json_error(proc)
    assert (doc["kind"], doc["exit"]) == ("ConfigError", 2) and str(config) in doc["error"], doc


@pytest.mark.parametrize("args, names", [
    (("log", "--json", "-n", "abc"), "'abc'"),
    (("checkpoint", "--json", "--jsno"), "--jsno"),
    (("restore", "--json", "--at"), "--at"),
    (("verify", "extra", "--json"), "extra"),
    (("gc", "--json", "--keep-last", "-1"), "--keep-last"),
], ids=["bad-value", "unknown-flag", "missing-value", "extra-argument", "out-of-range"])
def test_a_usage_error_with_json_still_prints_the_json_error_object(tmp_path, args, names):
    """click refuses these before the command runs; a script asked for JSON all the same."""
    b = Live(tmp_path / "a", tmp_path / "store")

    proc = b.run(*args)

    doc = json_error(proc)
    assert (doc["kind"], doc["exit"]) == ("UsageError", 2) and names in doc["error"], doc


def test_json_after_the_double_dash_belongs_to_cmd(tmp_path):
    b = Live(tmp_path / "a", tmp_path / "store")

    proc = b.run("supervise", "--interval", "abc", "--", "true", "--json")

    assert proc.returncode == 2 and proc.stdout == ""
    assert "--interval" in one_line_error(proc)


def test_checkpoint_json_reports_the_committed_seq_when_one_database_fails(tmp_path):
    """A checkpoint that commits every other file but refuses one bad SQLite database
    exits 1 (right) and says "checkpoint N committed the rest" on stderr, but
    ``--json`` prints nothing: a script cannot learn which checkpoint was committed."""
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    db = b.local / "hermes" / "state.db"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    con.execute("create table t(x)")
    con.executemany("insert into t values (?)", [(i,) for i in range(5000)])
    con.commit()
    con.close()
    b.write("hermes/notes.txt", b"note\n")
    b.checkpoint_ok()
    data = bytearray(db.read_bytes())
    data[4096 * 2 + 100:4096 * 2 + 400] = b"\xff" * 300  # a b-tree page: quick_check fails
    db.write_bytes(bytes(data))
    with open(b.local / "hermes" / "notes.txt", "ab") as fh:
        fh.write(b"more\n")

    proc = b.run("checkpoint", "--json")

    assert proc.returncode == 1
    assert "committed the rest" in proc.stderr
    committed = b.log()[0]["seq"]
    assert committed == 2
    assert json.loads(proc.stdout)["seq"] == committed


# --------------------------------------------------------------------------- store location problems


@pytest.mark.parametrize("args", [("init",), ("checkpoint",), ("log",), ("verify",), ("restore",),
                                  ("gc", "--keep-last", "1"), ("takeover",)], ids=lambda a: a[0])
def test_store_path_that_is_a_regular_file_is_refused_and_left_alone(tmp_path, args):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    b.store_path.write_bytes(b"my notes, not a store\n")

    proc = b.run(*args)

    assert proc.returncode == 1
    line = one_line_error(proc)
    assert str(b.store_path) in line and "JOURNAL_STORE" in line
    assert b.store_path.read_bytes() == b"my notes, not a store\n"


@pytest.mark.parametrize("args", [("verify",), ("gc", "--keep-last", "1"), ("takeover",),
                                  ("restore", "--dry-run"), ("log", "--json")], ids=lambda a: a[0])
def test_missing_store_is_a_one_line_error_and_is_not_created(tmp_path, args):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)

    proc = b.run(*args)

    assert proc.returncode == 1
    assert "journal init" in one_line_error(proc)
    assert not b.store_path.exists()


@pytest.mark.parametrize("args", [("checkpoint",), ("restore",), ("init",),
                                  ("supervise", "--", sys.executable, "-c", "open(MARK, 'w')")],
                         ids=lambda a: a[0])
def test_a_store_whose_parent_directory_is_missing_is_never_created(tmp_path, args):
    """``JOURNAL_STORE=/data/journal`` with no ``/data`` (a volume that is not mounted, a
    typo): a fresh container would otherwise create the store on its own disk, restore
    "nothing" and start the agent on empty state, checkpointing where nothing lasts."""
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    store = tmp_path / "unmounted" / "journal"
    mark = tmp_path / "cmd-ran"
    proc = b.run(*(a.replace("MARK", repr(str(mark))) for a in args), env={"JOURNAL_STORE": str(store)})
    assert proc.returncode != 0
    line = one_line_error(proc) if args[0] != "supervise" else proc.stderr
    assert str(store.parent) in line and "does not exist" in line, line
    assert not store.parent.exists()
    assert not mark.exists()


def test_empty_journal_store_variable_is_refused_not_silently_replaced_by_a_default(tmp_path):
    """``JOURNAL_STORE=`` (set, but empty: a typo'd ``ENV JOURNAL_STORE=$UNSET``) falls back
    to ``~/.local/share/journal/store`` on the container's own disk: checkpoints report
    success while nothing is durable. ``open_store`` has an error for an empty URL, but
    ``load_config`` never lets it see one."""
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)

    proc = b.run("checkpoint", env={"JOURNAL_STORE": ""})

    assert proc.returncode != 0
    assert "JOURNAL_STORE" in one_line_error(proc)
    assert not (b.home / ".local" / "share" / "journal").exists()


def test_checkpoint_does_not_silently_start_a_new_store_where_the_known_one_vanished(box):
    """The store this machine published to (e.g. an unmounted /data) is gone: checkpoint
    creates a brand-new empty store at the same path and reports success, so every later
    checkpoint lands on local disk. The local state knows a different store id; it
    should refuse and name the path (is the volume mounted?)."""
    shutil.rmtree(box.store_path)
    box.write(CODEX_CONFIG, b'model = "changed"\n')

    proc = box.run("checkpoint")

    assert proc.returncode != 0
    assert str(box.store_path) in one_line_error(proc)
    assert not box.store_path.exists()


def seal(body: bytes) -> bytes:
    """A config as journal writes it (design §3): its JSON, then the checksum of that JSON."""
    return body[:-1] + b',"checksum":"' + hashlib.sha256(body).hexdigest().encode() + b'"}'


@pytest.mark.parametrize("sealed", [True, False], ids=["with-checksum", "without-checksum"])
def test_store_whose_config_says_a_future_version_is_refused(box, sealed):
    """StoreInfo.version is never checked: a store written by a newer journal (version 99)
    is opened, and written to, by this one. (A newer journal seals its config with a
    checksum; one written before the checksum existed has none.)"""
    config = box.store_path / "config"
    info = json.loads(config.read_bytes())
    del info["checksum"]
    info["version"] = 99
    body = json.dumps(info, separators=(",", ":")).encode()
    config.write_bytes(seal(body) if sealed else body)
    before = sorted(p.name for p in (box.store_path / "manifests").iterdir())
    box.write(CODEX_CONFIG, b'model = "changed"\n')

    proc = box.run("checkpoint")

    assert proc.returncode != 0
    assert "version" in one_line_error(proc)
    assert sorted(p.name for p in (box.store_path / "manifests").iterdir()) == before


def test_damaged_store_config_error_names_the_config_object(box):
    """A store full of manifests and packs whose ``config`` object is torn is reported as
    "not empty and is not a journal store; point JOURNAL_STORE at an empty directory":
    the wrong diagnosis and the wrong fix. It should name <store>/config."""
    config = box.store_path / "config"
    config.write_bytes(config.read_bytes()[:20])

    proc = box.run("log")

    assert proc.returncode == 1
    assert str(config) in one_line_error(proc)


def test_a_flipped_character_of_the_config_is_blamed_on_the_config_not_the_local_state(box):
    """One character of the store id in ``config`` changed: the next checkpoint said the
    local state was "missing or unreadable" and suggested a restore."""
    config = box.store_path / "config"
    raw = config.read_bytes()
    at = raw.index(b'"store_id":"') + 12
    config.write_bytes(raw[:at] + (b"0" if raw[at:at + 1] != b"0" else b"1") + raw[at + 1:])
    box.write(CODEX_CONFIG, b'model = "changed"\n')
    before = store_bytes(box.store_path)

    for args in (("checkpoint",), ("restore",), ("log",), ("gc", "--keep-last", "1")):
        line = one_line_error(box.run(*args))
        assert f"{config} fails its checksum" in line and "backup" in line, line
        assert "local state" not in line, line
    assert store_bytes(box.store_path) == before


def test_takeover_on_a_store_without_checkpoints_does_not_say_to_run_init(tmp_path):
    b = Live(tmp_path / "a", tmp_path / "store")
    assert b.run("init").returncode == 0

    proc = b.run("takeover")

    assert proc.returncode == 1
    line = one_line_error(proc)
    assert "`journal init`" not in line, line  # the store exists; init cannot help


# --------------------------------------------------------------------------- local paths that are files


@pytest.mark.parametrize("command,var", [("checkpoint", "JOURNAL_STATE_DIR"), ("takeover", "JOURNAL_STATE_DIR"),
                                         ("restore", "AM_LOCAL"), ("restore", "JOURNAL_STATE_DIR")])
def test_state_dir_that_is_a_regular_file_is_a_clear_error(box, tmp_path, command, var):
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"keep me\n")
    box.write(CODEX_CONFIG, b'model = "changed"\n')

    proc = box.run(command, env={var: str(blocker)})

    assert proc.returncode != 0
    assert str(blocker) in one_line_error(proc)
    assert blocker.read_bytes() == b"keep me\n"


def test_restore_into_a_tree_root_that_is_a_regular_file_fails_cleanly(box):
    codex = box.local / "codex-home"
    shutil.rmtree(codex)
    codex.write_bytes(b"precious\n")

    proc = box.run("restore")

    no_traceback(proc)
    assert proc.returncode == 1
    assert str(codex) in proc.stdout + proc.stderr
    assert codex.read_bytes() == b"precious\n"


def test_restore_to_below_a_regular_file_is_a_one_line_error(box, tmp_path):
    blocker = tmp_path / "export"
    blocker.write_bytes(b"not a dir\n")

    proc = box.run("restore", "--to", str(blocker / "sub"))

    assert proc.returncode != 0
    assert str(blocker) in one_line_error(proc)
    assert blocker.read_bytes() == b"not a dir\n"


def test_restore_to_a_regular_file_is_a_one_line_error(box, tmp_path):
    target = tmp_path / "export"
    target.write_bytes(b"not a dir\n")

    proc = box.run("restore", "--to", str(target))

    assert proc.returncode == 2
    assert str(target) in one_line_error(proc)  # click prints a 3-line usage block instead
    assert target.read_bytes() == b"not a dir\n"


def test_restore_replace_without_to_is_a_one_line_error(box):
    before = snapshot_files(box.local)

    proc = box.run("restore", "--replace")

    assert proc.returncode == 2
    assert "add --to DIR" in one_line_error(proc)
    assert snapshot_files(box.local) == before


def test_checkpoint_with_a_missing_local_root_creates_nothing(tmp_path):
    b = Live(tmp_path / "a", tmp_path / "store", make_local=False)

    proc = b.run("checkpoint")

    assert proc.returncode == 2
    assert "AM_LOCAL" in one_line_error(proc)
    assert not b.local.exists() and not b.store_path.exists()


def test_restore_dry_run_creates_nothing_on_a_fresh_machine(box, tmp_path):
    fresh = Live(tmp_path / "fresh", box.store_path, make_local=False)

    proc = fresh.run("restore", "--dry-run")

    assert proc.returncode == 0, proc.stderr
    assert "would restore" in proc.stdout
    assert not fresh.local.exists(), sorted(str(p) for p in fresh.local.rglob("*"))


# --------------------------------------------------------------------------- restore --at


@pytest.mark.parametrize("at", ["0", "2000-01-01T00:00:00"])
def test_restore_at_before_the_first_checkpoint_is_an_error_not_success(box, at):
    """`--at` that selects no checkpoint prints "nothing to restore: the store has no
    checkpoint of a configured tree" and "restore complete", exit 0."""
    before = snapshot_files(box.local)

    proc = box.run("restore", "--at", at)

    assert proc.returncode != 0, proc.stdout
    assert "--at" in one_line_error(proc)
    assert snapshot_files(box.local) == before


def test_restore_at_zero_on_a_fresh_machine_does_not_let_checkpoint_drop_stored_trees(box, tmp_path):
    """A fresh container runs `journal restore --at 0` (exit 0, "restore complete"); the
    local state is saved as complete with no trees, so its next checkpoint publishes a
    manifest holding only what exists locally: codex and openclaw vanish from the newest
    checkpoint, and a plain `journal restore` elsewhere no longer brings them back."""
    fresh = Live(tmp_path / "fresh", box.store_path)
    fresh.run("restore", "--at", "0")
    fresh.write("agent-state/claude/other.txt", b"new\n")

    fresh.run("checkpoint")

    newest = box.log()[0]
    assert newest["error"] is None
    assert {"codex", "openclaw", "claude"} <= set(newest["trees"]), newest


# --------------------------------------------------------------------------- config values


@pytest.mark.parametrize("env,text", [
    ({"AGENT_STATE_CHECKPOINT_SECONDS": "nan"}, None),
    ({"AGENT_STATE_CHECKPOINT_SECONDS": "inf"}, None),
    ({}, "interval = nan\n"),
    ({}, "interval = inf\n"),
], ids=["env-nan", "env-inf", "file-nan", "file-inf"])
def test_non_finite_checkpoint_interval_is_refused(tmp_path, env, text):
    """A NaN interval passes `value <= 0`; the supervisor's `monotonic() >= next_tick`
    is then never true, so it never checkpoints until it stops (inf: the same)."""
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    args = ["trees"]
    if text is not None:
        config = tmp_path / "journal.toml"
        config.write_text(text)
        args += ["--config", str(config)]

    proc = b.run(*args, env=env)

    assert proc.returncode == 2, proc.stdout
    one_line_error(proc)


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_supervise_interval_flag_is_validated(tmp_path, value):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)

    proc = b.run("supervise", "--no-restore", "--interval", value, "--", "true", timeout=30)

    assert proc.returncode == 2
    assert "--interval" in one_line_error(proc)


@pytest.mark.parametrize("interval, grace", [("2", "0"), ("2s", "0s"), ("1m", "0.5")])
def test_supervise_takes_durations_as_seconds_or_with_a_unit(tmp_path, interval, grace):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)

    proc = b.run("supervise", "--no-restore", "--interval", interval, "--grace", grace, "--json", "--", "true",
                 timeout=30)

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"]["interval"] == {"2": 2, "2s": 2, "1m": 60}[interval]


@pytest.mark.parametrize("where", ["missing-dir", "a-directory"])
def test_supervise_refuses_a_metrics_file_it_could_not_write_before_starting_cmd(tmp_path, where):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    target = tmp_path / "no-such-dir" / "journal.prom" if where == "missing-dir" else tmp_path
    mark = tmp_path / "cmd-ran"

    proc = b.run("supervise", "--metrics-file", str(target), "--", sys.executable, "-c",
                 f"open({str(mark)!r}, 'w')", timeout=30)

    says = f"its directory {target.parent} does not exist" if where == "missing-dir" else "is a directory"
    assert proc.returncode == 2 and says in one_line_error(proc) and not mark.exists()


def test_supervise_refuses_an_unknown_option_before_cmd(box, tmp_path):
    """`--intervl 5` (a typo) used to become the command: exit 127, agent never started,
    or worse, a real program of that name run with the rest as its arguments."""
    mark = tmp_path / "cmd-ran"

    proc = box.run("supervise", "--intervl", "5", "--", sys.executable, "-c", f"open({str(mark)!r}, 'w')")

    assert proc.returncode == 2
    assert "--intervl" in one_line_error(proc)
    assert not mark.exists()


def test_supervise_passes_cmds_own_options_to_cmd(box, tmp_path):
    """Options end at CMD, with or without `--`: CMD's options are never read as ours."""
    mark = tmp_path / "argv"
    probe = f"import sys; open({str(mark)!r}, 'w').write(' '.join(sys.argv[1:]))"

    proc = box.run("supervise", "--no-restore", sys.executable, "-c", probe, "--interval", "x", "--json")

    assert proc.returncode == 0, proc.stderr
    assert mark.read_text() == "--interval x --json"


@pytest.mark.parametrize("args", [("restore",), ("restore", "--dry-run"),
                                  ("supervise", "--", sys.executable, "-c", "open(MARK, 'w')")],
                         ids=["restore", "dry-run", "supervise"])
def test_a_store_with_trees_none_of_them_configured_here_is_an_error_not_an_empty_restore(box, tmp_path, args):
    """A Dockerfile that forgot AM_LOCAL: restore found "nothing to restore", said
    "restore complete", and supervise started the agent with no state at all."""
    mark = tmp_path / "cmd-ran"
    env = {k: v for k, v in box.env.items() if k != "AM_LOCAL"}

    proc = run_journal(*(a.replace("MARK", repr(str(mark))) for a in args), env=env)

    assert proc.returncode == 2, proc.stdout
    line = one_line_error(proc) if args[0] != "supervise" else proc.stderr
    assert "AM_LOCAL is unset" in line and "claude, codex, openclaw" in line, line
    assert not mark.exists()
    exported = run_journal("restore", "--to", str(tmp_path / "export"), env=env)   # --to needs no config
    assert exported.returncode == 0, exported.stderr
    assert snapshot_files(tmp_path / "export" / "codex") == {
        k.removeprefix("codex-home/"): v for k, v in box.first.items() if k.startswith("codex-home/")}


@pytest.mark.parametrize("shape", ["tree-is-local", "tree-is-state-dir", "tree-inside-state-dir",
                                   "state-dir-inside-a-preset", "tree-holds-the-store", "tree-inside-the-store"])
def test_a_tree_that_holds_or_lies_inside_journals_own_directories_is_refused(tmp_path, shape):
    """`path = "."` made every checkpoint commit journal's own state files again, and
    restore wrote them over the live state directory."""
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    path, env = {
        "tree-is-local": (".", {}),
        "tree-is-state-dir": (".journal", {}),
        "tree-inside-state-dir": (".journal/notes", {}),
        "state-dir-inside-a-preset": ("notes", {"JOURNAL_STATE_DIR": str(b.local / "codex-home" / "state")}),
        "tree-holds-the-store": ("notes", {"JOURNAL_STORE": str(b.local / "notes" / "store")}),
        "tree-inside-the-store": (str(b.store_path / "notes"), {}),
    }[shape]
    (b.home / ".config" / "journal").mkdir(parents=True)
    (b.home / ".config" / "journal" / "config.toml").write_text(f'[[trees]]\nname = "notes"\npath = "{path}"\n')
    mark = tmp_path / "cmd-ran"

    cmd = (sys.executable, "-c", f"open({str(mark)!r}, 'w')")
    for args in (("checkpoint",), ("restore",), ("trees",), ("supervise", "--", *cmd)):
        proc = b.run(*args, env=env)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        line = one_line_error(proc)
        assert "tree 'notes'" in line or "tree 'codex'" in line, line
        assert ("state directory" in line) == ("store" not in shape), line
    assert not mark.exists()
    assert not b.store_path.exists() and not (b.local / "notes" / "store").exists()


def test_gc_negative_keep_last_is_refused(box):
    before = store_bytes(box.store_path)

    proc = box.run("gc", "--keep-last", "-1", "--dry-run")

    assert proc.returncode == 2, proc.stdout
    assert "--keep-last" in one_line_error(proc)
    assert store_bytes(box.store_path) == before


def test_log_limit_zero_lists_nothing(box):
    proc = box.run("log", "--json", "-n", "0")

    assert proc.returncode == 2 or json.loads(proc.stdout) == [], proc.stdout


# --------------------------------------------------------------------------- stdout vs stderr


def test_restore_warnings_go_to_stderr_not_stdout(box, tmp_path):
    config = tmp_path / "codex-only.toml"
    config.write_text('presets = ["codex"]\n')

    proc = box.run("restore", "--config", str(config))

    assert proc.returncode == 0, proc.stderr
    assert "not configured here" in proc.stderr
    assert "not configured here" not in proc.stdout


# --------------------------------------------------------------------------- demo


def test_demo_dir_never_deletes_existing_local_or_store_directories(tmp_path):
    """`journal demo --dir DIR` runs `shutil.rmtree` on DIR/local and DIR/store when they
    exist: `journal demo --dir $HOME` wipes a real $HOME/local (agent state) without a word."""
    work = tmp_path / "work"
    (work / "local").mkdir(parents=True)
    (work / "local" / "precious.txt").write_bytes(b"agent state\n")
    (work / "store").mkdir()
    (work / "store" / "photo.jpg").write_bytes(b"\xff\xd8")

    proc = run_journal("demo", "--dir", str(work), env={"HOME": str(tmp_path)}, timeout=60)

    no_traceback(proc)
    assert (work / "local" / "precious.txt").read_bytes() == b"agent state\n"
    assert (work / "store" / "photo.jpg").read_bytes() == b"\xff\xd8"


def test_demo_dir_below_a_regular_file_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"x")

    proc = run_journal("demo", "--dir", str(blocker / "sub"), env={"HOME": str(tmp_path)})

    assert proc.returncode != 0
    assert str(blocker) in one_line_error(proc)


# --------------------------------------------------------------------------- empty stores


@pytest.mark.parametrize("args", [("log",), ("verify",), ("verify", "--full"), ("gc", "--keep-last", "1", "--dry-run"),
                                  ("restore", "--dry-run"), ("status",), ("trees",)], ids=" ".join)
def test_commands_on_an_empty_store_succeed_with_valid_json(tmp_path, args):
    b = Live(tmp_path / "a", tmp_path / "store")
    assert b.run("init").returncode == 0
    before = store_bytes(b.store_path)

    proc = b.run(*args, "--json")

    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    doc = json.loads(proc.stdout)
    if args == ("log",):
        assert doc == []
    assert store_bytes(b.store_path) == before


# --------------------------------------------------------------------------- damaged stores


def test_damaged_manifest_and_truncated_pack_verify_restore_and_gc_dry_run(box, tmp_path):
    """Newest manifest bit-flipped, the store's biggest pack cut short: verify
    --full names both, restore says incomplete (exit 1, JSON) and puts no partial file at
    a live path, and `gc --dry-run` changes no byte of the store."""
    manifest = box.store_path / "manifests" / "000000000002"
    data = bytearray(manifest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    manifest.write_bytes(bytes(data))
    biggest = max((p for p in (box.store_path / "packs").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    biggest.write_bytes(biggest.read_bytes()[: biggest.stat().st_size // 3])

    verify = box.run("verify", "--full", "--json")
    assert verify.returncode == 1
    found = json.loads(verify.stdout)
    kinds = {f["kind"] for f in found["findings"]}
    assert "torn-manifest" in kinds and found["ok"] is False
    assert any(biggest.name in f["key"] for f in found["findings"])

    fresh = Live(tmp_path / "fresh", box.store_path)
    restored = fresh.run("restore", "--json")
    assert restored.returncode == 1
    no_traceback(restored)
    doc = json.loads(restored.stdout)
    assert doc["complete"] is False and any(t["lost"] or t["error"] for t in doc["trees"])
    for rel, content in snapshot_files(fresh.local).items():  # all from checkpoint 1 now
        assert ".journal-tmp" not in rel and not rel.endswith(".part"), rel
        assert content == box.first[rel], f"{rel} is not the checkpointed content"
    assert not list(fresh.local.rglob(TMP_PREFIX + "*"))
    assert "restore" in one_line_error(fresh.run("checkpoint"))  # a partial view is never published

    before = store_bytes(box.store_path)
    gc = box.run("gc", "--keep-last", "1", "--grace", "0s", "--dry-run")
    no_traceback(gc)  # gc refuses a store whose kept index pages are damaged: one line, exit 1
    assert gc.returncode == 0 or "corrupt" in one_line_error(gc)
    assert store_bytes(box.store_path) == before


# --------------------------------------------------------------------------- Ctrl-C


def waits_for_flock(path: Path, pid: int) -> bool:
    """Whether ``pid`` is blocked waiting for a flock on ``path`` (from /proc/locks)."""
    st = os.stat(path)
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and fields[2] == "FLOCK" and fields[5] == str(pid) and fields[6] == want:
            return True
    return False


def test_ctrl_c_during_a_json_command_prints_the_json_error_object(tmp_path):
    """Ctrl-C while ``checkpoint --wait --json`` waits for the state lock: exit 130,
    and the script that asked for JSON gets the error object."""
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    b.checkpoint_ok()
    lock = b.local / ".journal" / "lock"
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)             # another checkpoint runs
        proc = b.popen("checkpoint", "--wait", "--json", preexec_fn=sigint_as_at_a_terminal)
        try:
            wait_for(lambda: waits_for_flock(lock, proc.pid) or proc.poll() is not None, 60,
                     "checkpoint --wait to wait for the lock")
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        os.close(fd)

    assert proc.returncode == 130, err
    assert json.loads(out) == {"error": "interrupted", "kind": "Interrupted", "exit": 130}
    assert err.strip().splitlines()[-1] == "journal: interrupted" and "Traceback" not in err


def test_sigint_during_restore_leaves_no_partial_file_and_exits_non_zero(tmp_path):
    src = Live(tmp_path / "src", tmp_path / "store")
    rng = random.Random(7)
    for d in range(30):
        for f in range(60):
            src.write(f"agent-state/claude/projects/p{d}/f{f}.bin", rng.randbytes(16_000))
    src.checkpoint_ok()
    originals = snapshot_files(src.local)
    # Ctrl-C lands part way on most attempts; on a loaded machine it may land after the
    # last file (or the restore may finish first): such an attempt is checked, then retried.
    for attempt in range(5):
        fresh = Live(tmp_path / f"fresh{attempt}", src.store_path)
        tree = fresh.local / "agent-state" / "claude"
        proc = fresh.popen("restore", preexec_fn=sigint_as_at_a_terminal)
        deadline = time.monotonic() + 30
        while not any(tree.glob(TMP_PREFIX + "*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)

        assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
        on_disk = snapshot_files(fresh.local)
        for rel, content in on_disk.items():
            assert not rel.endswith(".part") and ".journal-tmp" not in rel, rel
            assert hashlib.sha256(content).digest() == hashlib.sha256(originals[rel]).digest(), rel
        assert not any(tree.glob(TMP_PREFIX + "*"))
        if proc.returncode != 0:
            assert "restore complete" not in out + err
        if proc.returncode != 0 and len(on_disk) < len(originals):
            break  # it really was interrupted part way
    else:
        pytest.fail("Ctrl-C never landed part way through the restore in 5 attempts: make the tree bigger")
    # the partial tree is never published, and a second restore finishes the job
    refused = fresh.run("checkpoint")
    assert refused.returncode == 1 and "journal restore" in one_line_error(refused)
    again = fresh.run("restore")
    assert again.returncode == 0, again.stderr
    assert snapshot_files(fresh.local) == originals


# --------------------------------------------------------------------------- more of the same rules


def test_memory_store_url_is_refused_on_the_command_line(tmp_path):
    """memory:// is a new, empty store in every process: a checkpoint would keep nothing."""
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)

    for args in (("checkpoint",), ("supervise", "--", "true")):
        proc = b.run(*args, env={"JOURNAL_STORE": "memory://"})
        assert proc.returncode == 2
        assert "memory://" in one_line_error(proc)


def test_default_config_path_that_is_a_directory_is_an_error_not_ignored(tmp_path):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    odd = b.home / ".config" / "journal" / "config.toml"
    odd.mkdir(parents=True)

    proc = b.run("trees")

    assert proc.returncode == 2
    assert str(odd) in one_line_error(proc)


def test_a_tree_whose_root_is_a_file_fails_alone_and_the_other_trees_restore(box, tmp_path):
    codex = box.local / "codex-home"
    shutil.rmtree(codex)
    codex.write_bytes(b"precious\n")
    shutil.rmtree(box.local / "agent-state")

    proc = box.run("restore", "--json")

    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    by_name = {t["name"]: t for t in doc["trees"]}
    assert str(codex) in by_name["codex"]["error"] and doc["complete"] is False
    assert by_name["claude"]["error"] is None
    assert (box.local / CLAUDE_JSONL).read_bytes().startswith(jsonl(30, "claude"))
    assert codex.read_bytes() == b"precious\n"


def test_restore_refuses_to_replace_a_vanished_store_and_init_then_takeover_start_one_on_purpose(box):
    shutil.rmtree(box.store_path)

    proc = box.run("restore")

    assert proc.returncode == 1
    assert "`journal init`, then `journal takeover`" in one_line_error(proc) and not box.store_path.exists()
    assert box.run("init").returncode == 0
    assert box.run("checkpoint").returncode == 1   # init alone re-points nothing
    assert box.run("takeover").returncode == 0
    assert box.checkpoint_ok()["seq"] == 1  # a new history, started on purpose


def test_usage_errors_are_one_line_naming_the_help(box):
    proc = box.run("log", "--bogus")

    assert proc.returncode == 2
    assert "log --help" in one_line_error(proc)


def test_a_failed_quick_check_is_reported_in_a_bounded_line(tmp_path):
    from journal.sqlite.snapshot import CHECK_TEXT, quick_check

    db = tmp_path / "big.db"
    con = sqlite3.connect(db)
    con.execute("create table t(x, y)")
    con.execute("create index ty on t(y)")
    con.executemany("insert into t values (?, ?)", [(i, "v" * 50 + str(i)) for i in range(20_000)])
    con.commit()
    con.close()
    data = bytearray(db.read_bytes())
    for page in range(3, len(data) // 4096, 3):  # many damaged pages: many complaints
        data[page * 4096 + 200:page * 4096 + 600] = b"\x07" * 400
    db.write_bytes(bytes(data))

    problem = quick_check(str(db))

    assert problem is not None and "\n" not in problem
    assert len(problem) <= CHECK_TEXT + 60


# --------------------------------------------------------------------------- what a new operator meets first


def test_a_local_root_that_does_not_exist_is_named_not_just_no_trees(tmp_path):
    b = Live(tmp_path / "a", tmp_path / "store", make_local=False)

    proc = b.run("checkpoint", env={"AM_LOCAL": "/nonexistent"})
    trees = b.run("trees", env={"AM_LOCAL": "/nonexistent"})

    assert proc.returncode == 2
    assert "AM_LOCAL is /nonexistent, which does not exist" in one_line_error(proc)
    assert "AM_LOCAL is /nonexistent, which does not exist" in trees.stdout


def test_with_journal_store_unset_init_makes_the_default_store_and_trees_names_it(tmp_path):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    env = {k: v for k, v in b.env.items() if k != "JOURNAL_STORE"}
    default = b.home / ".local" / "share" / "journal" / "store"

    init = run_journal("init", env=env)
    trees = run_journal("trees", env=env)

    assert init.returncode == 0, init.stderr
    assert init.stdout.startswith(f"store {default} ready")
    assert f"store:     {default} (the default: JOURNAL_STORE is not set)" in trees.stdout
    assert run_journal("checkpoint", env=env).returncode == 0 and (default / "manifests").is_dir()


def test_a_vanished_store_whose_parent_is_missing_says_to_mount_it_or_fix_journal_store(box):
    """The store and its parent are gone (an unmounted volume, or JOURNAL_STORE changed):
    `journal init` would fail there too, so no command suggests it."""
    moved = box.run("checkpoint", env={"JOURNAL_STORE": str(box.home / "unmounted" / "journal")})

    line = one_line_error(moved)
    assert moved.returncode == 1 and "checkpointed up to 2" in line
    assert f"its parent directory {box.home / 'unmounted'} does not exist" in line and "fix JOURNAL_STORE" in line
    assert "journal init" not in line


@pytest.mark.parametrize("args", [("log",), ("verify",), ("gc", "--keep-last", "1"), ("ls",)], ids=lambda a: a[0])
def test_log_verify_and_gc_on_a_vanished_store_say_it_vanished_not_to_checkpoint(box, args):
    shutil.rmtree(box.store_path)

    proc = box.run(*args)

    line = one_line_error(proc)
    assert proc.returncode == 1 and "this machine has checkpointed up to 2" in line and "is the volume mounted" in line
    assert "journal checkpoint" not in line and not box.store_path.exists()


def test_the_unsupported_url_message_lists_only_what_is_supported(tmp_path):
    proc = Live(tmp_path / "a", tmp_path / "store").run("log", env={"JOURNAL_STORE": "ftp://host/x"})

    line = one_line_error(proc)
    assert proc.returncode == 2 and "unsupported store URL 'ftp://host/x'" in line
    assert "s3://bucket/prefix" in line and "memory://" not in line


@pytest.mark.parametrize("value, says", [(" ", "JOURNAL_STORE is set but blank"),
                                         ("\t", "JOURNAL_STORE is set but blank"),
                                         ("data/journal", "JOURNAL_STORE 'data/journal' is a relative path"),
                                         (" /data/journal", "JOURNAL_STORE ' /data/journal' is a relative path")],
                         ids=["space", "tab", "relative", "leading-space"])
def test_a_blank_or_relative_store_is_refused_and_nothing_is_created(tmp_path, value, says):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)

    proc = run_journal("checkpoint", env={**b.env, "JOURNAL_STORE": value}, cwd=b.home)

    assert proc.returncode == 2 and says in one_line_error(proc)
    assert sorted(p.name for p in b.home.iterdir()) == ["local"]


@pytest.mark.parametrize("which, says", [("AM_LOCAL", "the local root (AM_LOCAL)"),
                                         ("JOURNAL_STORE", "the store"),
                                         ("JOURNAL_STATE_DIR", "the state directory")])
def test_a_root_whose_name_is_not_utf8_is_refused_in_one_line(tmp_path, which, says):
    """A root the environment names with a byte that is not UTF-8 (passed through as a
    surrogate) is refused by every command in one line that shows the byte, before
    anything is written: journal keeps paths as UTF-8 (it crashed hashing the config)."""
    odd = tmp_path / os.fsdecode(b"caf\xe9")
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    env = {**b.env, which: str(odd / which.lower())}
    for command in (("checkpoint",), ("restore",), ("status",), ("supervise", "--", "true")):
        proc = run_journal(*command, env=env, cwd=b.home)
        line = one_line_error(proc)
        assert proc.returncode == 2 and f"{says} {tmp_path}/caf\\xe9/" in line and "not a UTF-8 name" in line, line
    assert not odd.exists() and not (tmp_path / "store").exists()
    assert not (b.local / ".journal").exists()


@pytest.mark.parametrize("where", ["flag", "config"])
def test_a_relative_store_from_the_flag_or_the_config_file_is_refused_naming_its_source(tmp_path, where):
    b = Live(tmp_path / "a", tmp_path / "store")
    populate(b)
    env = {k: v for k, v in b.env.items() if k != "JOURNAL_STORE"}
    config = b.home / ".config" / "journal" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('store = "rel/store"\n' if where == "config" else "")

    proc = run_journal("checkpoint", *(("--store", "rel/store") if where == "flag" else ()), env=env, cwd=b.home)

    which = "--store" if where == "flag" else f"`store` in {config}"
    assert proc.returncode == 2 and f"{which} 'rel/store' is a relative path" in one_line_error(proc)

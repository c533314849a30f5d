"""Names an agent chooses reach the terminal escaped (design §11, invariant 12).

One world is built once: a Codex tree whose transcripts, a directory and a file that
cannot be stored have names holding escape sequences (an OSC title change ended by
BEL, a CSI screen clear, a C1 CSI), a newline and bytes that are not UTF-8, and an
opencode database with such a name, all under a live root whose own directory name is
hostile too. Every command that can print a name then runs as a real process, its
warnings and failures included, and none may write a control character to stdout or
stderr other than the newline that ends a line: each name must appear escaped, as
``paths.shown`` writes it. The ``--json`` forms are checked the same way (JSON escapes
C0 controls; C1 controls and DEL must be escaped too).
"""

from __future__ import annotations

import json
import os
import sqlite3
import unicodedata
from pathlib import Path

import pytest

from conftest import Live, run_journal
from journal.paths import shown

OSC = "\x1b]0;pwned\x07x.jsonl"           # sets a terminal's title, then any text
CSI = "\x1b[2Jclear.jsonl"                 # clears the screen
C1 = "\u009b31mc1.jsonl"                   # a CSI as one C1 control
NEWLINE = "a\nforged: line.jsonl"          # would start a line of its own
DIR = "\x1b]0;dir\x07d"                    # a directory
DB = "opencode\x1b]8;;x\x07.db"            # a database, by the opencode preset's pattern
NOT_UTF8 = b"bad\xff\x1b]0;u\x07.jsonl"    # cannot be stored: a warning names it
LOCKED = "\x1b]0;locked\x07.jsonl"         # unreadable: a warning names it
ADDED = "\x1b]0;new\x07n.jsonl"            # new in checkpoint 2: a rollback to 1 takes it out
ROOT = "\x1b]0;root\x07local"              # the live root's own directory
SESSION = "s\u009b2Jx"                     # an input session (C1 passes its rule)

RECORD = b'{"type":"message","text":"hello"}\n'
SESSIONS = "codex-home/sessions"


def assert_clean(name: str, proc) -> None:
    """No control character but line ends in either stream, no forged line from
    ``NEWLINE``, and every stream valid UTF-8."""
    for stream, data in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        text = data.decode("utf-8")
        for line in text.split("\n"):
            bad = sorted({c for c in line if unicodedata.category(c) == "Cc"})
            assert not bad, f"{name}: {stream} holds raw {bad}: {line!r}"
            assert not line.startswith("forged"), f"{name}: {stream} holds a line a name's newline started: {line!r}"


def printed(proc) -> str:
    return (proc.stdout + proc.stderr).decode("utf-8")


def build_world(root: Path) -> Live:
    """The hostile world under ``root`` after its three checkpoints. ``run_cli(label,
    *args)`` runs the real CLI in it (output as bytes, the exit status ``expect``
    asserted unless None) and keeps each run in ``runs`` by its label."""
    live = Live(root / "home", root / "store", local=root / ROOT)
    runs: dict[str, object] = {}

    def run(label: str, *args: str, expect: int | None = 0, unprivileged: bool = False, stdin: str | None = None):
        proc = run_journal(*args, env=live.env, text=False, unprivileged=unprivileged, stdin=stdin)
        assert expect is None or proc.returncode == expect, \
            f"{label}: exit {proc.returncode}\n{proc.stdout!r}\n{proc.stderr!r}"
        runs[label] = proc
        return proc

    for name in (OSC, CSI, C1, NEWLINE, LOCKED, f"{DIR}/inner.jsonl"):
        live.write(f"{SESSIONS}/{name}", RECORD * 20)
    with open(os.fsencode(live.local / SESSIONS) + b"/" + NOT_UTF8, "wb") as fh:
        fh.write(RECORD)
    db = live.local / "opencode-share" / DB
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as con:
        con.execute("create table t(x)")
        con.execute("insert into t values (1)")
    con.close()
    run("checkpoint 1", "checkpoint")
    live.write(f"{SESSIONS}/{CSI}", RECORD * 5)        # shrinks: a rewrite, with a warning
    live.append(f"{SESSIONS}/{OSC}", RECORD * 3)       # grows: its new segment is damaged below
    live.write(f"{SESSIONS}/{ADDED}", RECORD)
    (live.local / SESSIONS / LOCKED).chmod(0)
    run("checkpoint 2", "checkpoint", unprivileged=True)
    live.write(f"{SESSIONS}/{C1}", RECORD * 5)         # the same warnings, as --json gives them
    run("checkpoint 3 --json", "checkpoint", "--json", unprivileged=True)
    (live.local / SESSIONS / LOCKED).chmod(0o644)
    live.runs = runs
    live.run_cli = run
    return live


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Live:
    """One hostile world for the commands that change nothing in it."""
    return build_world(tmp_path_factory.mktemp("hostile"))


def newest_ref(live: Live, name: str):
    return live.entries("codex", live.seqs()[-1])[f"sessions/{name}"].refs[-1]


def assert_messages_escaped(messages: list[str], *names: str) -> None:
    """Messages the library built (warnings, reasons) name each of ``names`` escaped and
    hold no control character: they reach ``--json`` and status files as they are."""
    assert all(m.isprintable() for m in messages), [m for m in messages if not m.isprintable()]
    for name in names:
        assert any(shown(name) in m for m in messages), (shown(name), messages)


def test_checkpoint_warnings_escape_names(world):
    for label in ("checkpoint 1", "checkpoint 2", "checkpoint 3 --json"):
        assert_clean(label, world.runs[label])
    assert shown(NOT_UTF8.decode("utf-8", "surrogateescape")) in printed(world.runs["checkpoint 1"])
    said = printed(world.runs["checkpoint 2"])
    assert f"{shown(CSI)} shrank from" in said
    assert f"cannot read {shown(str(world.local / SESSIONS / LOCKED))}" in said
    warnings = json.loads(world.runs["checkpoint 3 --json"].stdout)["warnings"]
    assert_messages_escaped(warnings, C1, str(world.local / SESSIONS / LOCKED))


#: Commands that change nothing, and the names each must print (escaped).
READ_ONLY = [
    (("status",), [NOT_UTF8.decode("utf-8", "surrogateescape")]),
    (("status", "--json"), []),
    (("trees",), [ROOT]),
    (("log",), []),
    (("log", "--json"), []),
    (("ls", "codex/sessions"), [OSC, CSI, C1, NEWLINE, DIR]),
    (("ls", "--long", "codex/sessions"), [OSC, CSI, C1, NEWLINE, DIR]),
    (("ls", "--json", "codex/sessions"), []),
    (("ls", f"codex/sessions/{DIR}"), [DIR]),
    (("ls", "opencode"), [DB]),
    (("find", "*.jsonl"), [OSC, CSI, C1, NEWLINE, DIR]),
    (("find", "--json", "*.jsonl"), []),
    (("diff", "1", "2"), [OSC, CSI, ADDED]),
    (("diff", "--json", "1", "3"), []),
    (("restore", "--dry-run"), []),
]


@pytest.mark.parametrize("args, names", READ_ONLY, ids=[" ".join(args) for args, _ in READ_ONLY])
def test_read_only_commands_escape_names(world, args, names):
    proc = world.run_cli(" ".join(args), *args)
    assert_clean(" ".join(args), proc)
    for name in names:
        assert shown(name) in printed(proc), f"{args}: {shown(name)!r} not in {printed(proc)!r}"


@pytest.mark.parametrize("target, why", [
    (f"codex/sessions/{CSI}.gone", "not in checkpoint"),
    (f"codex/sessions/{DIR}", "directory"),
])
def test_cat_errors_escape_names(world, target, why):
    proc = world.run_cli(f"cat {target!r}", "cat", target, expect=2)
    assert_clean("cat", proc)
    assert why in printed(proc) and shown(target) in printed(proc)


def test_gc_dry_run_escapes_kept_reasons(world):
    proc = world.run_cli("gc --dry-run", "gc", "--dry-run", "--keep-last", "5")
    assert_clean("gc --dry-run", proc)
    assert "  kept " in printed(proc)
    proc = world.run_cli("gc --json", "gc", "--dry-run", "--keep-last", "5", "--json")
    assert_clean("gc --dry-run --json", proc)
    assert_messages_escaped(list(json.loads(proc.stdout)["plan"]["kept_samples"].values()))


def test_inputs_escape_session_names(world):
    world.run_cli("input append", "input", "append", "--harness", "codex", "--session", SESSION, "-", stdin="hi\n")
    proc = world.run_cli("input list", "input", "list")
    assert_clean("input list", proc)
    assert shown(SESSION) in printed(proc)
    assert_clean("input list --json", world.run_cli("input list --json", "input", "list", "--json"))


def test_export_escapes_names(world, tmp_path):
    out = tmp_path / f"export{OSC}"
    assert_clean("restore --to", world.run_cli("restore --to", "restore", "--to", str(out)))
    proc = world.run_cli("restore --to --replace", "restore", "--to", str(out), "--replace")
    assert_clean("restore --to --replace", proc)
    assert f"removing {shown(str(out))}/codex" in printed(proc)


def test_rollback_dry_run_escapes_what_it_takes_out(world):
    proc = world.run_cli("restore --rollback", "restore", "--at", "1", "--rollback", "--dry-run")
    assert_clean("restore --at 1 --rollback --dry-run", proc)
    assert f"would take out sessions/{shown(ADDED)}" in printed(proc)


def test_damage_under_a_hostile_name_is_reported_escaped(tmp_path):
    """The newest copies of ``OSC`` and of the database damaged, ``OSC`` removed from
    the live tree twice: two restores fall back past its damage."""
    world = build_world(tmp_path)
    world.corrupt_blob(newest_ref(world, OSC))
    world.corrupt_blob(world.entries("opencode", world.seqs()[-1])[DB].refs[-1])
    assert_clean("verify", world.run_cli("verify", "verify", expect=None))
    for args in (("verify", "--full"), ("verify", "--full", "--json")):
        assert_clean(" ".join(args), world.run_cli(" ".join(args), *args, expect=1))
    assert f"bad-snapshot: manifest 3: opencode/{shown(DB)}: " in printed(world.runs["verify --full"])
    (world.local / SESSIONS / OSC).unlink()
    proc = world.run_cli("restore", "restore", expect=3)
    assert_clean("restore", proc)
    assert f"codex/sessions/{shown(OSC)}: copy in manifest 3 is damaged" in printed(proc)
    (world.local / SESSIONS / OSC).unlink()
    proc = world.run_cli("restore --json", "restore", "--json", expect=3)
    assert_clean("restore --json", proc)
    fallbacks = [note for tree in json.loads(proc.stdout)["trees"] for note in tree["fallbacks"]]
    assert_messages_escaped(fallbacks, f"sessions/{OSC}")
    for args in (("status",), ("status", "--json"), ("supervise", "--", "true")):
        assert_clean(" ".join(args), world.run_cli(" ".join(args), *args))


def test_migrate_dry_run_escapes_legacy_names(tmp_path):
    live = Live(tmp_path / "home", tmp_path / "store", local=tmp_path / "local")
    sessions = tmp_path / "legacy" / "codex" / "sessions"
    sessions.mkdir(parents=True)
    for name in (OSC, NEWLINE):
        (sessions / name).write_bytes(RECORD)
    with open(os.fsencode(sessions) + b"/" + NOT_UTF8, "wb") as fh:
        fh.write(RECORD)
    runs = {args: run_journal("migrate", "--legacy-root", str(tmp_path / "legacy"), "--dry-run", *args,
                              env=live.env, text=False) for args in ((), ("--json",))}
    for args, proc in runs.items():
        assert proc.returncode == 1, proc.stderr   # the name that is not UTF-8 is a problem
        assert_clean(f"migrate --dry-run {' '.join(args)}", proc)
    said = printed(runs[()])
    assert f"codex-home/sessions/{shown(OSC)} <- " in said
    assert f"problem: migrate: {sessions}/{shown(NOT_UTF8.decode('utf-8', 'surrogateescape'))}: " in said

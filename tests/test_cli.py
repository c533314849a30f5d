"""The ``journal`` command line, run as a real process: help, output, exit codes."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys

import pytest

from journal import __version__
from journal.format.model import FORMAT
from journal.cli.entry import main

from conftest import JOURNAL, clean_env, journal_script, one_line_error, sigint_as_at_a_terminal

COMMANDS = main.list_commands(None)  # those registered on first use too (``entry.LAZY``)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(run_journal, command):
    proc = run_journal(command, "--help")

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"Usage: journal {command}")  # the command a user types, also under python -m
    assert "Example:" in proc.stdout and "journal " in proc.stdout.split("Example:", 1)[1]


def test_top_level_help_lists_every_command(run_journal):
    proc = run_journal("--help")

    assert proc.returncode == 0
    assert all(f"  {command} " in proc.stdout for command in COMMANDS)


def test_commands_registered_on_first_use_are_named_with_their_modules():
    import importlib

    from journal.cli.entry import LAZY

    for module in sorted(set(LAZY.values())):   # each registers its commands
        importlib.import_module(f"journal.cli.{module}")
    lazy = {name: f"journal.cli.{module}" for name, module in LAZY.items()}
    by_module = {name: command.callback.__module__ for name, command in main.commands.items()}
    assert {name: module for name, module in by_module.items() if module != "journal.cli.commands"} == lazy


def test_a_busy_checkpoint_imports_no_other_command_module_and_no_sqlite_when_no_database_changed(live):
    live.checkpoint()
    transcript = next(p for p in sorted(live.local.rglob("*.jsonl")) if p.is_file())
    with open(transcript, "ab") as fh:
        fh.write(b'{"more": 1}\n')
    code = ("import sys; from journal.cli.entry import main\n"
            "try:\n    main(['checkpoint', '--json'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('journal.', 'sqlite3'))), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(live.env), capture_output=True, text=True,
                          timeout=60, cwd=live.home)

    assert json.loads(proc.stdout)["seq"] == 2
    loaded = proc.stderr.strip().splitlines()[-1]
    assert "'journal.cli.commands'" in loaded
    assert not any(f"'{m}'" in loaded for m in ("journal.cli.browse", "journal.cli.inputs", "journal.cli.keys",
                                                "journal.cli.migrate", "journal.sqlite.snapshot", "sqlite3")), loaded


def test_version_prints_the_package_version_and_the_store_format_it_writes(run_journal):
    proc = run_journal("--version")

    assert proc.returncode == 0
    assert proc.stdout.strip() == f"journal, version {__version__} (store format {FORMAT})"


def test_init_is_idempotent(bare_live):
    first = bare_live.run("init", "--json")
    files = {p: p.read_bytes() for p in bare_live.store_path.rglob("*") if p.is_file()}

    second = bare_live.run("init", "--json")

    assert (first.returncode, second.returncode) == (0, 0)
    assert json.loads(first.stdout)["store_id"] == json.loads(second.stdout)["store_id"]
    assert {p: p.read_bytes() for p in bare_live.store_path.rglob("*") if p.is_file()} == files
    assert [p.name for p in files] == ["config"]


def test_init_refuses_a_directory_that_is_not_a_store(bare_live):
    bare_live.store_path.mkdir()
    (bare_live.store_path / "photo.jpg").write_bytes(b"\xff\xd8")

    proc = bare_live.run("init")

    assert proc.returncode == 1
    assert "is not empty and is not a journal store" in one_line_error(proc)
    assert [p.name for p in bare_live.store_path.iterdir()] == ["photo.jpg"]


def test_trees_json_lists_the_detected_harness_trees(live):
    proc = live.run("trees", "--json")

    assert proc.returncode == 0, proc.stderr
    cfg = json.loads(proc.stdout)
    assert cfg["store"] == str(live.store_path) and cfg["local"] == str(live.local)
    assert {t["name"]: t["path"] for t in cfg["trees"]} == {
        "claude": str(live.local / "agent-state" / "claude"),
        "codex": str(live.local / "codex-home"),
        "openclaw": str(live.local / "oc-home" / ".openclaw"),
    }


def test_trees_reads_a_config_file(live):
    config = live.home / "journal.toml"
    config.write_text('presets = ["codex"]\n[[trees]]\nname = "notes"\npath = "notes"\nexclude = ["*.tmp"]\n')

    proc = live.run("trees", "--json", "--config", str(config))

    trees = {t["name"]: t for t in json.loads(proc.stdout)["trees"]}
    assert sorted(trees) == ["codex", "notes"]
    assert trees["notes"]["path"] == str(live.local / "notes") and trees["notes"]["exclude"] == ["*.tmp"]


@pytest.mark.parametrize("text", [
    'store = "/data"\n[[trees]\nname = "a"\n',    # not TOML
    "store = 5\n",                                 # wrong type
    'stor = "/data"\n',                            # unknown key
    'presets = ["codex", "vim"]\n',                # unknown preset
])
def test_malformed_config_is_a_one_line_error_naming_the_file(live, text):
    config = live.home / "journal.toml"
    config.write_text(text)

    proc = live.run("checkpoint", "--config", str(config))

    assert proc.returncode == 2
    assert str(config) in one_line_error(proc)
    assert not live.store_path.exists()


def test_missing_config_file_is_a_usage_error(live):
    proc = live.run("trees", "--config", str(live.home / "nope.toml"))

    assert proc.returncode == 2
    assert "nope.toml does not exist" in one_line_error(proc)


@pytest.mark.parametrize("at", ["yesterday", "-3", "2026-13-45"])
def test_bad_at_value_is_a_clear_error(live, at):
    live.checkpoint()

    proc = live.run("restore", "--at", at)

    assert proc.returncode == 2
    assert f"--at {at!r} is neither a sequence number nor an ISO-8601 time" in one_line_error(proc)


def test_checkpoint_json_reports_what_was_written(live):
    proc = live.run("checkpoint", "--json")

    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["seq"] == 1 and result["objects_uploaded"] == 3
    assert sorted(t["name"] for t in result["trees"]) == ["claude", "codex", "openclaw"]


def test_checkpoint_log_and_status_count_files_directories_deletions_and_bytes_alike(live):
    """One vocabulary: the files a first checkpoint changed are the files `log` lists
    (directories counted apart), the bytes and objects it uploaded are `log`'s and
    `status`'s (the manifest included), and deletions are said, in text and --json."""
    (live.local / "codex-home" / "notes.txt").write_text("scratch\n")
    first = json.loads(live.run("checkpoint", "--json").stdout)
    entries = live.entries("codex") | {f"c/{p}": e for p, e in live.entries("claude").items()} | {
        f"o/{p}": e for p, e in live.entries("openclaw").items()}
    files = sum(e.kind != "dir" for e in entries.values())
    dirs = len(entries) - files
    (live.local / "codex-home" / "notes.txt").unlink()

    text = live.run("checkpoint", "--allow-deletions")
    log = json.loads(live.run("log", "--json").stdout)
    status = json.loads(live.run("status", "--json").stdout)

    assert [sum(t[k] for t in first["trees"]) for k in ("files", "directories", "files_changed",
                                                        "directories_changed")] == [files, dirs, files, dirs]
    assert (log[1]["files"], log[1]["bytes_uploaded"], log[1]["objects_uploaded"]) == (
        files, first["bytes_uploaded"], first["objects_uploaded"])
    assert text.returncode == 0 and text.stdout.startswith(
        "checkpoint 2: 0 files and 0 directories changed, 1 file and 0 directories deleted; ")
    assert log[0]["files"] == files - 1
    last = status["last_checkpoint"]
    assert (last["seq"], last["files_deleted"], last["files"], last["bytes_uploaded"]) == (
        2, 1, files - 1, log[0]["bytes_uploaded"])
    assert f"{log[0]['bytes_uploaded']:,} bytes uploaded" in text.stdout


def test_checkpoint_without_local_state_points_at_restore(live):
    live.checkpoint()
    live.state_file.unlink()

    proc = live.run("checkpoint")

    assert proc.returncode == 1
    assert "run `journal restore` first" in one_line_error(proc)


def test_log_json_lists_checkpoints_newest_first(live):
    live.checkpoint()
    (live.local / "codex-home" / "config.toml").write_text('model = "x"\n')
    live.checkpoint()

    proc = live.run("log", "--json")
    newest = live.run("log", "--json", "-n", "1")

    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)
    assert [e["seq"] for e in entries] == [2, 1]
    assert entries[0]["files"] == entries[1]["files"] + 1 == 12
    assert entries[0]["trees"] == ["claude", "codex", "openclaw"] and entries[0]["error"] is None
    assert [e["seq"] for e in json.loads(newest.stdout)] == [2]


def test_log_marks_expired_rows_and_says_what_expired_means_once(live):
    live.checkpoint()
    for model in ("x", "y"):
        (live.local / "codex-home" / "config.toml").write_text(f'model = "{model}"\n')
        live.checkpoint()
    assert live.run("gc", "--keep-last", "1").returncode == 0

    text = live.run("log").stdout.splitlines()
    entries = json.loads(live.run("log", "--json").stdout)

    assert [e["seq"] for e in entries] == [3, 2, 1] and entries[0]["expired"] is None
    assert entries[1]["expired"] and entries[2]["expired"]
    assert [line.split()[0] for line in text[1:4]] == ["3", "2", "1"]
    assert not text[1].endswith("EXPIRED") and text[2].endswith("  EXPIRED") and text[3].endswith("  EXPIRED")
    assert len(text) == 5 and text[4].startswith("EXPIRED: a gc tombstone names the checkpoint")
    assert sum("grace period" in line for line in text) == 1


def test_log_lists_a_torn_manifest_as_unreadable(live):
    live.checkpoint()
    (live.store_path / "manifests" / "000000000001").write_bytes(b"JRNL")

    proc = live.run("log")

    assert proc.returncode == 0
    assert "UNREADABLE" in proc.stdout.splitlines()[1]


def test_log_on_a_missing_store_says_how_to_create_one(bare_live):
    proc = bare_live.run("log")

    assert proc.returncode == 1
    assert "run `journal init`" in one_line_error(proc)


def test_restore_dry_run_says_what_it_would_do(live):
    live.checkpoint()
    (live.local / "codex-home" / "sessions" / "2026" / "02" / "23" /
     "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl").unlink()

    proc = live.run("restore", "--dry-run")

    assert proc.returncode == 0, proc.stderr
    codex = next(line for line in proc.stdout.splitlines() if line.startswith("codex:"))
    assert "would restore from checkpoint 1" in codex and "1 write)" in codex
    assert proc.stdout.splitlines()[-1] == "dry run, nothing was changed: the restore would be complete"
    assert "restore complete" not in proc.stdout


def _console_script(live, *args, stdout=None):
    """The installed ``journal`` console script (``launch.main(fast_exit=True)``)."""
    import os
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(sys.executable), "journal")
    if not os.path.exists(script):
        pytest.skip("the journal console script is not installed next to this Python")
    return subprocess.run([script, *args], env=clean_env(live.env), stdout=stdout or subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def test_the_console_script_leaves_fast_with_every_line_and_the_right_status(live, tmp_path):
    """The console script skips the interpreter's teardown once a command is over: every
    line it printed is still there (to a pipe and to a file), and the exit status is the
    command's: 0, 1 for an error, 2 for a usage error."""
    assert _console_script(live, "checkpoint").returncode == 0
    out = tmp_path / "restore.txt"
    with open(out, "w") as fh:
        proc = _console_script(live, "restore", "--to", str(tmp_path / "r"), stdout=fh)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().splitlines()[-1] == "restore complete"
    listing = _console_script(live, "log", "--json")
    assert listing.returncode == 0 and json.loads(listing.stdout)[0]["seq"] == 1
    assert _console_script(live, "restore", "--bogus").returncode == 2
    bad = _console_script(live, "log", "--store", str(tmp_path / "nowhere" / "store"))
    assert bad.returncode == 1 and bad.stderr.startswith("journal: error:")


def _reader_gone() -> int:
    """The write end of a pipe whose one reader (``head -c 0``) has already exited, as
    ``| head`` has once it read what it wanted: every write to it fails with EPIPE."""
    import os
    import subprocess

    read, write = os.pipe()
    subprocess.run(["head", "-c", "0"], stdin=read, check=True)
    os.close(read)
    return write


#: Commands that print, each into a pipe whose reader went away; ``checkpoint`` (idle) is
#: answered by the launcher's fast path, the others by the click app.
PRINTING = [("trees",), ("log", "--json"), ("ls", "codex"), ("status",), ("find", "*.jsonl"), ("input", "list"),
            ("--help",), ("log", "--help"), ("checkpoint",)]


def test_a_command_whose_reader_went_away_ends_quietly_with_exit_141(live):
    """`journal log | head -1`: a closed stdout pipe ends any command as SIGPIPE ends a
    Unix tool, exit 141 and nothing on stderr (no traceback, no error line, no
    "Exception ignored" from the interpreter's final flush), from ``python -m journal``
    and from the console script alike."""
    import os
    import subprocess

    live.checkpoint()
    live.write("codex-home/later.txt", "later\n")
    live.checkpoint()
    live.run("input", "append", "--harness", "codex", "--session", "S1", "-", expect=0, stdin="hello")
    for cmd, args in [*((JOURNAL, args) for args in PRINTING), (journal_script(), ("log",)),
                      (journal_script(), ("checkpoint",))]:
        write = _reader_gone()
        proc = live.popen(*args, cmd=cmd, stdout=write)   # one at a time: two checkpoints at once, one is refused
        os.close(write)
        _, err = proc.communicate(timeout=120)
        assert (proc.returncode, err) == (141, ""), (proc.args, args)


def test_a_reader_that_stops_early_ends_the_writer_quietly(live):
    """A real pipeline: `journal input show ID | head -c 10` on an input far larger than
    the pipe holds; head gets its 10 bytes, journal exits 141 with nothing on stderr."""
    import subprocess

    text = b"0123456789" * 50_000
    added = live.run("input", "append", "--harness", "codex", "--session", "S1", "--json", "-", expect=0,
                     stdin=text.decode())
    writer = live.popen("input", "show", json.loads(added.stdout)["id"], text=False)
    head = subprocess.Popen(["head", "-c", "10"], stdin=writer.stdout, stdout=subprocess.PIPE)
    writer.stdout.close()   # head is the only reader
    out, _ = head.communicate(timeout=60)
    err = writer.stderr.read()
    writer.wait(timeout=60)

    assert out == text[:10]
    assert (writer.returncode, err) == (141, b"")


#: Imported as ``click`` ahead of the real one: it says it has been reached, then waits
#: for a signal, so a Ctrl-C lands exactly while the command line is being imported.
HOLD_IMPORT = "import os, signal\nos.write(int(os.environ['READY_FD']), b'x')\nsignal.pause()\n"


INTERRUPTED_JSON = '{\n  "error": "interrupted",\n  "kind": "Interrupted",\n  "exit": 130\n}\n'


def _ctrl_c_at_held_import(argv: list[str], live, hold) -> tuple[int, str, str]:
    """Run ``argv`` with the modules in ``hold`` ahead of the real ones (``HOLD_IMPORT``),
    and Ctrl-C it once it reached one: (exit status, stdout, stderr)."""
    import os
    import signal

    ready, ready_w = os.pipe()
    env = clean_env({**live.env, "PYTHONPATH": str(hold), "READY_FD": str(ready_w)})
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            pass_fds=(ready_w,), preexec_fn=sigint_as_at_a_terminal, cwd=live.home)
    os.close(ready_w)
    try:
        assert os.read(ready, 1) == b"x", f"{argv} never reached the held import"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(ready)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
@pytest.mark.parametrize("entry", ["python -m journal", "bin/journal"])
def test_ctrl_c_while_the_command_line_is_imported_is_one_line_and_exit_130(live, tmp_path, entry, json_flag):
    import os

    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "click.py").write_text(HOLD_IMPORT)
    start = JOURNAL if entry.startswith("python") else \
        [sys.executable, os.path.join(os.path.dirname(os.path.dirname(__file__)), "bin", "journal")]
    returncode, out, err = _ctrl_c_at_held_import([*start, "log", *json_flag], live, hold)

    assert (returncode, err, out) == (130, "journal: interrupted\n", INTERRUPTED_JSON if json_flag else "")
    if json_flag:
        assert json.loads(out) == {"error": "interrupted", "kind": "Interrupted", "exit": 130}


# --------------------------------------------------------------------------- a busy checkpoint without click

#: The console entry point (``launch.main``), writing the names of the modules it imported
#: to a file (argv[1]), one a line; the command line is the rest of argv.
LAUNCH_REPORTING_MODULES = (
    "import sys; from journal.cli import launch; report = sys.argv.pop(1); sys.argv[0] = 'journal'\n"
    "code = launch.main()\n"
    "open(report, 'w').write('\\n'.join(sorted(sys.modules)))\n"
    "sys.exit(code)")


def _launched(live, tmp_path, *args: str, env: dict[str, str] | None = None):
    """``journal ARGS`` through the launcher: (exit status, stdout, stderr, whether click was
    imported); ``_imported(tmp_path)`` is every module it imported."""
    proc = subprocess.run([sys.executable, "-c", LAUNCH_REPORTING_MODULES, str(tmp_path / "imported"), *args],
                          env=clean_env({**live.env, **(env or {})}), capture_output=True, text=True, timeout=120,
                          cwd=live.home)
    return proc.returncode, proc.stdout, proc.stderr, "click" in _imported(tmp_path)


def _imported(tmp_path) -> set[str]:
    """The modules the last ``_launched`` command imported."""
    return set((tmp_path / "imported").read_text().splitlines())


def _without_times(text: str) -> str:
    """Output with its durations and byte counts (which differ from run to run) blanked."""
    import re

    return re.sub(r"\d[\d,]*(\.\d+)?( bytes?\b|ms\b|s\b)", lambda m: "N bytes" if "byte" in m[2] else "Ns", text)


def _busy(live, n: int) -> None:
    live.append("codex-home/sessions/2026/02/23/busy.jsonl", f'{{"turn": {n:04d}}}\n')


def test_a_busy_plain_checkpoint_runs_without_click_and_prints_as_the_click_command(live, tmp_path):
    """A tick that finds work: the launcher runs the checkpoint without importing click,
    and prints what the click command prints (``--wait`` sends the same tick to click)."""
    live.checkpoint()
    _busy(live, 1)
    fast = _launched(live, tmp_path, "checkpoint")
    _busy(live, 2)
    slow = _launched(live, tmp_path, "checkpoint", "--wait")

    assert (fast[0], fast[3], slow[0], slow[3]) == (0, False, 0, True)
    assert fast[1].startswith("checkpoint 2: 1 file and 0 directories changed") and slow[1].startswith("checkpoint 3:")
    assert _without_times(fast[1].replace("checkpoint 2", "checkpoint 3")) == _without_times(slow[1])
    assert fast[2] == slow[2] == ""

    _busy(live, 3)
    fast = _launched(live, tmp_path, "checkpoint", "--json", "--allow-deletions")
    _busy(live, 4)
    slow = _launched(live, tmp_path, "checkpoint", "--json", "--allow-deletions", "--wait")
    assert (fast[0], fast[3], slow[0], slow[3]) == (0, False, 0, True)
    fast_doc, slow_doc = json.loads(fast[1]), json.loads(slow[1])
    assert (fast_doc["seq"], slow_doc["seq"]) == (4, 5)
    assert fast_doc.keys() == slow_doc.keys()
    for key in ("files_changed", "directories_changed", "files_deleted", "objects_uploaded", "trees"):
        assert fast_doc.get(key) == slow_doc.get(key), key


#: The console entry point, counting the cyclic garbage collector's runs while it works
#: and whether it is enabled again after; printed to stderr as ``gc RUNS ENABLED``.
LAUNCH_COUNTING_COLLECTIONS = (
    "import gc, sys; from journal.cli import launch; sys.argv[0] = 'journal'\n"
    "runs = []\n"
    "gc.callbacks.append(lambda phase, info: runs.append(info['generation']) if phase == 'start' else None)\n"
    "code = launch.main()\n"
    "print('gc', len(runs), gc.isenabled(), file=sys.stderr)\n"
    "sys.exit(code)")


def test_a_plain_checkpoint_runs_no_cycle_collection_and_restores_the_collector(live, tmp_path):
    """A plain ``journal checkpoint``, idle or busy, never runs the cyclic collector
    (its imports and the quiet check's snapshot made it run ~30 times for nothing to
    collect), and leaves it enabled for whatever runs after it in the process; the full
    command line (``--wait``) is untouched."""
    live.checkpoint()

    def launched(*args: str) -> tuple[int, str]:
        proc = subprocess.run([sys.executable, "-c", LAUNCH_COUNTING_COLLECTIONS, *args],
                              env=clean_env(live.env), capture_output=True, text=True, timeout=120, cwd=live.home)
        return proc.returncode, proc.stderr.strip().splitlines()[-1]

    assert launched("checkpoint") == (0, "gc 0 True")   # idle: answered from the quiet snapshot
    _busy(live, 1)
    assert launched("checkpoint") == (0, "gc 0 True")   # busy: the checkpoint without click
    _busy(live, 2)
    rc, line = launched("checkpoint", "--wait")          # click's command line collects as usual
    assert rc == 0 and line.startswith("gc ") and line != "gc 0 True" and line.endswith(" True")


#: Modules only other paths need, each imported where it is used: ``journal log``'s tombstones,
#: the history of a dropped pending manifest, base pages read back from the store, a live
#: database's check copy (restore: ``tempfile`` and ``shutil`` only once a local database
#: is there to check, ~10 ms), ``verify``'s rebuild. Each costs every command's start CPU.
#: And ``typing_extensions`` (with ``inspect``), which msgspec would take when installed, as
#: it is here (the test extra brings it): the console process imports msgspec without it.
NOT_BUSY_TICK = ("click", "dataclasses", "json", "shutil", "tempfile", "journal.repository.history",
                 "journal.format.tombstone", "journal.repository.fetch", "typing_extensions", "inspect",
                 "concurrent.futures", "logging")
NOT_RESTORE = ("dataclasses", "json", "journal.format.tombstone", "typing_extensions", "tempfile", "shutil")


def test_a_busy_checkpoint_and_a_restore_import_no_module_only_other_paths_need(live, tmp_path):
    """A busy tick that captures a changed database (its snapshot, its base copy) through
    the launcher, and ``journal restore --to`` of it, import none of ``NOT_BUSY_TICK`` and
    ``NOT_RESTORE``."""
    (live.local / "hermes").mkdir()
    with contextlib.closing(sqlite3.connect(live.local / "hermes" / "state.db", isolation_level=None)) as con:
        con.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, body TEXT)")
        con.execute("INSERT INTO m (body) VALUES ('first')")
        live.checkpoint()
        con.execute("INSERT INTO m (body) VALUES ('second')")
    _busy(live, 1)

    rc, out, err, _ = _launched(live, tmp_path, "checkpoint", "--json")
    tick = _imported(tmp_path)
    rc2, out2, err2, _ = _launched(live, tmp_path, "restore", "--to", str(tmp_path / "out"), "--json")
    restore = _imported(tmp_path)

    assert (rc, err, json.loads(out)["seq"], rc2, err2, json.loads(out2)["complete"]) == (0, "", 2, 0, "", True)
    assert {"journal.sqlite.capture", "journal.sqlite.base_copy"} <= tick and "journal.sqlite.rebuild" in restore
    assert sorted(tick & set(NOT_BUSY_TICK)) == [] and sorted(restore & set(NOT_RESTORE)) == []


def test_a_config_error_of_a_busy_checkpoint_is_the_click_commands_error_without_click(live, tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("interval = [\n")
    for flags in ((), ("--json",)):
        fast = _launched(live, tmp_path, "checkpoint", "--config", str(config), *flags)
        slow = _launched(live, tmp_path, "checkpoint", "--config", str(config), *flags, "--wait")
        assert (fast[3], slow[3]) == (False, True)
        assert fast[:3] == slow[:3] and fast[0] == 2 and fast[2].startswith("journal: error: ")
        if flags:
            assert json.loads(fast[1])["kind"] == "ConfigError"


def test_a_config_click_would_refuse_goes_to_click(live, tmp_path):
    """``--config`` naming a directory: click's usage error (exit 2), as before."""
    rc, out, err, clicked = _launched(live, tmp_path, "checkpoint", "--config", str(tmp_path))
    assert (rc, clicked) == (2, True) and "is a directory" in err
    rc, _, err, clicked = _launched(live, tmp_path, "checkpoint", env={"JOURNAL_DEBUG": "maybe"})
    assert (rc, clicked) == (2, True) and "not a valid boolean" in err


def test_a_store_error_of_a_busy_checkpoint_with_debug_and_json_is_the_click_commands(live, tmp_path):
    """What the store said in full: the ``--debug`` line and the JSON ``detail``, from
    the launcher as from click (an S3 store without credentials: exit 2, and only the
    metadata address is asked, which is closed)."""
    from s3server import free_port

    closed = f"http://127.0.0.1:{free_port()}"
    env = {"JOURNAL_STORE": "s3://bucket/journal", "NO_PROXY": "127.0.0.1,localhost",
           "AWS_METADATA_ENDPOINT": closed, "AWS_ENDPOINT_URL": closed}
    for flags, extra in zip((("--debug", "--json"), ("--debug",), ("--json",)), ({}, {}, {"JOURNAL_DEBUG": "1"})):
        fast = _launched(live, tmp_path, "checkpoint", *flags, env={**env, **extra})
        slow = _launched(live, tmp_path, "checkpoint", *flags, "--wait", env={**env, **extra})
        assert (fast[3], slow[3]) == (False, True)
        assert fast[0] == slow[0] and _without_times(fast[1] + fast[2]) == _without_times(slow[1] + slow[2]), flags
        assert fast[0] == 2 and fast[2].startswith("journal: error: store s3://bucket/journal: no S3 credentials")
        assert ("\njournal: debug: " in fast[2]) == ("--debug" in flags or "JOURNAL_DEBUG" in extra)
        if "--json" in flags:
            doc = json.loads(fast[1])
            assert (doc["kind"], doc["exit"]) == ("NoCloudCredentials", 2) and closed in doc["detail"]


def test_a_busy_checkpoint_whose_reader_went_away_ends_with_141_as_from_click(live, tmp_path):
    """A closed stdout pipe ends a busy tick with exit 141 and nothing more on stderr;
    its error (the JSON object the closed pipe refuses) ends the same from the launcher
    as from click."""
    import os

    live.checkpoint()
    ended = {}
    for args in (("checkpoint",), ("checkpoint", "--json", "--store", str(tmp_path / "no" / "store"))):
        for extra in ((), ("--wait",)):
            _busy(live, len(extra) + 2 * len(args))
            write = _reader_gone()
            proc = live.popen(*args, *extra, cmd=journal_script(), stdout=write)
            os.close(write)
            _, err = proc.communicate(timeout=120)
            ended[args, extra] = (proc.returncode, err)
    assert ended[("checkpoint",), ()] == ended[("checkpoint",), ("--wait",)] == (141, "")
    failed = [result for (args, _), result in ended.items() if len(args) > 1]
    assert failed[0] == failed[1] and failed[0][0] == 141 and failed[0][1].startswith("journal: error: ")


@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_ctrl_c_in_a_busy_checkpoint_without_click_is_what_click_prints(live, tmp_path, json_flag):
    """Ctrl-C while the tick runs (held at its first import of ``ctypes``, by the state's
    save): the blank line click writes, ``journal: interrupted``, exit 130, and with
    ``--json`` the error object, from the launcher as from click."""
    live.checkpoint()
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "ctypes.py").write_text(HOLD_IMPORT)
    results = []
    for extra in ((), ("--wait",)):
        _busy(live, len(extra))
        argv = [sys.executable, "-c", LAUNCH_REPORTING_MODULES, str(tmp_path / "imported"), "checkpoint", *json_flag,
                *extra]
        results.append((*_ctrl_c_at_held_import(argv, live, hold), "click" in _imported(tmp_path)))

    assert results == [(130, INTERRUPTED_JSON if json_flag else "", "\njournal: interrupted\n", clicked)
                       for clicked in (False, True)]

"""Errors: one hierarchy whose classes carry their exit status and are never also
``OSError`` or ``ValueError``, library messages that name no option of the command line
(the command line adds it), and every ``OSError`` of a local file named with its path
and a hint fitting its errno."""

from __future__ import annotations

import ast
import errno
import importlib
import json
import os
import pkgutil
import re
import subprocess
from pathlib import Path

import pytest

import journal
from conftest import Live, one_line_error
from journal.errors import ConfigError, JournalError, ObjectNotFound, StoreError
from journal.os_errors import describe_os_error, mount_point, naming
from journal.restore.errors import RestoreIncomplete


@pytest.mark.parametrize("code, hint", [
    (errno.ENOSPC, "free space on the filesystem mounted at {mount}"),
    (errno.EDQUOT, "free space on the filesystem mounted at {mount} or raise your disk quota there"),
    (errno.EACCES, "check the permissions of {path} and of the directories above it (journal runs as uid {uid})"),
    (errno.EPERM, "check the permissions of {path} and of the directories above it (journal runs as uid {uid})"),
    (errno.EROFS, "the filesystem mounted at {mount} is read-only; remount it read-write"),
    (errno.EIO, "the device reported an I/O error; check the disk and the kernel log (dmesg)"),
    (errno.ENAMETOOLONG, "the path is longer than the system allows (4096 bytes, or 255 for one name); shorten it"),
    (errno.ELOOP, "too many levels of symbolic links on that path; fix the links"),
    (errno.ENOTDIR, "a file stands where a directory belongs; move it aside"),
    (errno.EISDIR, "a directory stands where a file belongs; move it aside"),
    (errno.EMFILE, "too many open files; raise the limit (ulimit -n)"),
    (errno.ENOENT, "it does not exist; create it or fix the path"),
    (errno.EEXIST, "it already exists; move it aside"),
    (errno.EINVAL, "check that path"),
])
def test_an_os_error_names_the_path_and_a_hint_fitting_its_errno(tmp_path, code, hint):
    path = str(tmp_path / "store" / "packs" / "ab")
    err = OSError(code, os.strerror(code))

    with pytest.raises(OSError) as raised, naming(path):
        raise err

    mount = mount_point(str(tmp_path))
    assert describe_os_error(raised.value) == \
        f"{path}: {os.strerror(code)}; " + hint.format(mount=mount, path=path, uid=os.getuid())


def test_mount_point_is_the_top_of_the_filesystem_holding_a_path(small_tmpfs):
    disk = small_tmpfs("64k")
    (disk / "a" / "b").mkdir(parents=True)

    assert mount_point(str(disk / "a" / "b" / "not-yet")) == str(disk)
    assert mount_point(str(disk)) == str(disk)
    assert mount_point("/") == "/"


def test_a_store_on_a_read_only_bind_mount_names_that_mount_not_the_disk_under_it(tmp_path):
    """A directory bind-mounted read-only is on the same device as the filesystem it is
    a directory of: the error names the bind mount (from ``/proc/self/mountinfo``), the
    one to remount, not the top of that filesystem."""
    point = tmp_path / "bound"
    point.mkdir()
    live = Live(tmp_path / "a", point / "store")
    live.write("codex-home/a.txt", "a\n")
    live.run("init", expect=0)
    for how in (["--bind", str(point), str(point)], ["-o", "remount,ro,bind", str(point)]):
        done = subprocess.run(["mount", *how], capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(point)], capture_output=True)
            pytest.skip(f"cannot make a read-only bind mount here (needs CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        line = one_line_error(live.run("checkpoint", expect=1))
    finally:
        subprocess.run(["umount", str(point)], check=True)

    assert "Read-only file system" in line
    assert line.endswith(f"the filesystem mounted at {point} is read-only; remount it read-write"), line


def test_naming_keeps_the_file_an_error_already_names(tmp_path):
    with pytest.raises(OSError) as raised, naming(str(tmp_path / "other")):
        os.open(tmp_path / "missing" / "file", os.O_RDONLY)

    assert raised.value.filename == str(tmp_path / "missing" / "file")


def test_an_incomplete_restore_says_which_paths_are_too_long_to_create_apart_from_damage():
    both = str(RestoreIncomplete(["sessions/a.jsonl"], ["d/leaf.md"]))
    too_long = str(RestoreIncomplete([], ["d/leaf.md"]))

    assert both == ("restore: 1 file(s) have no good copy in any manifest: sessions/a.jsonl; run `journal verify "
                    "--full` to see which objects are damaged; 1 path(s) are too long to create here: d/leaf.md; "
                    "shorten the tree's directory, or export with `journal restore --to` a shorter DIR")
    assert too_long.startswith("restore: 1 path(s) are too long to create here: d/leaf.md;")
    assert "no good copy" not in too_long and "verify" not in too_long


# --------------------------------------------------------------------------- the error model

ROOT = Path(journal.__file__).resolve().parent
README = ROOT.parent / "README.md"


def error_classes() -> list[type[JournalError]]:
    """Every error class of journal: each module imported (but ``__main__``, which runs
    the command line; a module whose optional extra is missing is skipped)."""
    for info in pkgutil.walk_packages(journal.__path__, "journal."):
        if info.name != "journal.__main__":
            try:
                importlib.import_module(info.name)
            except ImportError:
                continue
    found, todo = [], [JournalError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return sorted({c for c in found if c.__module__.startswith("journal.")}, key=lambda c: c.__qualname__)


def readme_exit_codes() -> set[int]:
    """The statuses the README's exit-status table lists."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("Exit statuses:"):]
    return {int(m) for m in re.findall(r"^\| (\d+) \|", table[:table.index("\n\n", table.index("| exit"))], re.M)}


def test_every_error_class_carries_an_exit_status_the_readme_lists():
    classes = error_classes()
    listed = readme_exit_codes()

    assert len(classes) > 40 and {0, 1, 2, 3} <= listed
    for cls in classes:
        assert isinstance(cls.exit_code, int) and cls.exit_code in listed - {0}, cls
        assert cls.exit_code == (2 if issubclass(cls, ConfigError) else 1), cls


def test_no_error_is_also_an_os_error_or_a_value_error():
    """``except OSError`` is for local files and the system: a store failure or a
    missing object passes through it, never taken for a live path's error."""
    for cls in error_classes():
        assert not issubclass(cls, (OSError, ValueError)), cls
    for err in (StoreError("put object: k: refused"), ObjectNotFound("k")):
        with pytest.raises(JournalError):
            try:
                raise err
            except OSError:
                pytest.fail(f"{type(err).__name__} was caught as an OSError")


def test_a_failed_command_exits_with_its_error_class_status_and_names_it(tmp_path, run_journal):
    store = tmp_path / "store"
    store.mkdir()
    (store / "stray").write_text("not a store")
    env = {"JOURNAL_STORE": str(store), "JOURNAL_STATE_DIR": str(tmp_path / "state"), "AM_LOCAL": str(tmp_path)}

    failed = run_journal("log", "--json", env=env)            # NotAStore: 1
    usage = run_journal("gc", "--json", env=env)              # NoRetentionPolicy: 2, with the options to pass

    assert (failed.returncode, json.loads(failed.stdout)["kind"], json.loads(failed.stdout)["exit"]) == \
        (1, "NotAStore", 1)
    doc = json.loads(usage.stdout)
    assert (usage.returncode, doc["kind"], doc["exit"]) == (2, "NoRetentionPolicy", 2)
    assert "--keep-last N" in doc["error"] and doc["error"] in usage.stderr


def _cli_options() -> set[str]:
    """Every option of journal's command line (``--wait``, ``--keep-last``, ...)."""
    import click

    from journal.cli.entry import main

    found: set[str] = set()
    todo = [main]
    while todo:
        cmd = todo.pop()
        found.update(o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", ())) if o.startswith("--"))
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            todo += [cmd.get_command(ctx, name) for name in cmd.list_commands(ctx)]
    return found - {"--help"}


_OPTION = re.compile(r"(?<![\w`-])--[a-z][\w-]*")
_COMMAND = re.compile(r"`journal [^`]*`")


def _strings(node) -> list[tuple[int, str]]:
    """The text of every string in ``node`` (an f-string's literal parts joined)."""
    out, parts = [], set()
    for n in ast.walk(node):
        if isinstance(n, ast.JoinedStr):
            out.append((n.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)))
            parts.update(id(v) for v in n.values)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in parts:
            out.append((n.lineno, n.value))
    return out


def test_library_errors_name_no_option_of_the_command_that_was_run():
    """A library error names an option only inside a whole command (```journal verify
    --full```, advice wherever it is shown: a supervisor's log, ``journal status``); a
    bare one (``--wait``) presumes the command that was run, so the command line adds it
    (``cli/hints.py``). ``config.py`` resolves the command line's own ``--config`` and
    ``--store`` with the environment and the file, and says which one set a value."""
    options = _cli_options()
    errors = {c.__name__ for c in error_classes()}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("cli/") or rel == "config.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Raise)
                 or isinstance(n, ast.ClassDef) and n.name in errors]
        for node in nodes:
            doc = ast.get_docstring(node, clean=False) if isinstance(node, ast.ClassDef) else None
            for line, text in _strings(node):
                named = set(_OPTION.findall(_COMMAND.sub("", text))) & options
                if named and text != doc:
                    found.append(f"journal/{rel}:{line}: {sorted(named)}")
    assert found == [], "\n".join(found)


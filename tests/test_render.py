"""What the commands say: one counting vocabulary and one number format everywhere
(``cli/render.py``, design §10 "One vocabulary"), text that counts what ``--json``
counts, and output that says what a command did and will do.

The commands run in this process (click's ``CliRunner``): a dozen of them take well
under a second together.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner

from conftest import CodexLive
from journal.cli.entry import main

#: The nouns the commands count.
NOUNS = ("files", "directories", "bytes", "objects", "checkpoints", "manifests", "pages", "packs", "blobs",
         "errors", "warnings", "trees", "lines", "inputs", "orphans", "tombstones", "complete lines")
#: "1 files", "1 checkpoints": a plural after one.
ONE_PLURAL = re.compile(r"(?<![\d,.])\b1 (%s)\b" % "|".join(NOUNS))
#: "12345 bytes": a count of four digits or more without its thousands separators.
BARE_THOUSANDS = re.compile(r"(?<![\d,.])\d{4,} (%s)\b" % "|".join(n.rstrip("s") + "s?" for n in NOUNS))


class Cli:
    """``journal ARGS`` in this process, in ``box``'s container."""

    def __init__(self, box: CodexLive):
        self.box, self.runner = box, CliRunner()

    def __call__(self, *args: str, code: int = 0) -> str:
        got = self.runner.invoke(main, list(args), env=self.box.env, catch_exceptions=False)
        assert got.exit_code == code, f"journal {' '.join(args)} exited {got.exit_code}:\n{got.output}"
        return got.output


@pytest.fixture
def box(tmp_path) -> CodexLive:
    return CodexLive(tmp_path)


@pytest.fixture
def cli(box) -> Cli:
    return Cli(box)


def two_checkpoints(box: CodexLive, cli: Cli) -> None:
    """Checkpoint 1 holds one file of 2,500 bytes in one directory; checkpoint 2 adds a
    transcript of one line."""
    box.write("config.toml", "#" * 2499 + "\n")
    cli("checkpoint")
    box.write("sessions/s.jsonl", '{"a": 1}\n')
    cli("checkpoint")


def test_every_command_counts_with_one_vocabulary_and_one_number_format(box, cli):
    two_checkpoints(box, cli)
    said = {args: cli(*args.split()) for args in (
        "checkpoint", "log", "ls --at 1", "ls codex", "diff 1 2", "find *.toml", "restore --dry-run",
        "restore", "verify", "verify --full", "gc --keep-last 1 --dry-run", "gc --keep-last 1 --grace 0",
        "log", "status", "trees")}

    for args, text in said.items():
        assert "(s)" not in text, (args, text)
        assert not ONE_PLURAL.search(text), (args, text)
        assert not BARE_THOUSANDS.search(text), (args, text)
    assert "idle: nothing changed in 1 tree;" in said["checkpoint"]
    assert re.search(r"\b2,500 +1 file +codex/", said["ls --at 1"]), said["ls --at 1"]
    assert "keep 1 checkpoint: 2" in said["gc --keep-last 1 --dry-run"]
    assert "expire 1 checkpoint: 1" in said["gc --keep-last 1 --dry-run"]


def test_restore_counts_directories_apart_from_files(box, cli):
    box.write("a/b/c/note.txt", "one file three directories down\n")
    cli("checkpoint")
    for path in sorted(box.codex.iterdir()):
        (path.unlink if path.is_file() else shutil.rmtree)(path)

    text = cli("restore")
    doc = json.loads(cli("restore", "--json"))

    (line,) = [line for line in text.splitlines() if line.startswith("codex:")]
    assert ": 1 file (1 write), 3 directories (3 write);" in line, line
    (tree,) = doc["trees"]
    assert tree["actions"] == {"same": 1} and tree["directories"] == {"same": 3}


def test_verify_full_says_in_words_what_its_json_counts(box, cli):
    two_checkpoints(box, cli)

    text = cli("verify", "--full").splitlines()[-1]
    doc = json.loads(cli("verify", "--full", "--json"))

    said = {label: int(n.replace(",", "")) for n, label in
            re.findall(r"([\d,]+) (manifests?|pages?|packs? hashed|packs?|blobs? hashed|snapshots? checked|errors?)\b",
                       text)}
    assert said == {"manifests": doc["manifests"], "pages": doc["pages"], "packs": doc["packs"],
                    "packs hashed": doc["packs_hashed"], "blobs hashed": doc["blobs"],
                    "snapshots checked": doc["snapshots"], "errors": len(doc["findings"])}, text
    assert doc["packs_hashed"] == doc["packs"] > 0 and doc["blobs"] > 0


def test_gc_labels_its_kept_packs_and_says_when_what_it_marked_goes(box, cli):
    two_checkpoints(box, cli)

    dry = cli("gc", "--keep-last", "1", "--dry-run").splitlines()
    real = cli("gc", "--keep-last", "1", "--grace", "0").splitlines()
    then = cli("gc", "--keep-last", "1", "--grace", "0").splitlines()

    kept = [i for i, line in enumerate(dry) if line.startswith("  kept packs/")]
    assert kept and dry[kept[0] - 1] == "kept packs (a sample), each with what needs it:", dry
    assert any(line.startswith("later: what this run would tombstone is deleted by a `journal gc` run at least "
                               "24h from now") for line in dry), dry
    assert any(line.startswith("later: what this run tombstoned is deleted by the next `journal gc`")
               for line in real), real
    assert any(line.startswith("delete 1 object ") for line in then), then
    assert box.repo().manifest_seqs() == [2]


def test_gc_help_says_what_gc_does_given_no_policy(cli):
    helped = " ".join(cli("gc", "--help").split())
    refused = CliRunner().invoke(main, ["gc"], env=cli.box.env)

    assert refused.exit_code == 2 and "no retention policy given" in refused.output
    assert "With no --keep-* option gc refuses" in helped
    assert "Given alone, it keeps every checkpoint" not in helped

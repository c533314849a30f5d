"""What the CLI makes of a crafted store: bounded in time and memory, one-line answers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from journal.cli.app import EXIT_FALLBACK

from .cli import run_journal
from .container import Live

#: What a command reading a crafted store may take: well over its needs on a sound store
#: (under 256 MiB), far under what an unbounded expansion or decompression takes.
CRAFTED_TIMEOUT = 60
CRAFTED_MEMORY = 512 << 20


def run_on_crafted(live: Live, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI on a crafted store, bounded in time and memory, and check it answers
    in one-line messages: no traceback, every line of stderr a message of its own."""
    proc = run_journal(*args, env=live.env, timeout=CRAFTED_TIMEOUT, memory=CRAFTED_MEMORY)
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert all(line.startswith(("journal: error: ", "warning: ", "restore")) for line in lines), proc.stderr
    assert sum(line.startswith("journal: error: ") for line in lines) <= 1, proc.stderr
    return proc


class Audit:
    """What the CLI made of a crafted store: ``verify --full --json``, ``restore`` into a
    new container (``fresh``) and ``gc --dry-run``, each run by ``run_on_crafted``."""

    def __init__(self, live: Live, make_live):
        self.fresh = make_live("fresh", fixtures=False)
        before = _files_outside(live.home.parent, self.fresh.local)
        self.verify = run_on_crafted(live, "verify", "--full", "--json")
        self.restore = run_on_crafted(self.fresh, "restore")
        self.gc = run_on_crafted(live, "gc", "--dry-run", "--keep-last", "1")
        # Nothing was written anywhere but the new container's trees and state: not the
        # store, not the other container, not beside either.
        assert _files_outside(live.home.parent, self.fresh.local) == before

    @property
    def findings(self) -> list[dict]:
        """verify's errors (the crafted objects' packs are unreferenced too: warnings)."""
        return [f for f in json.loads(self.verify.stdout)["findings"] if f["severity"] == "error"]

    def assert_falls_back(self, kind: str, detail: str, tree: str = "codex", seq: int = 2,
                          gc_blocked: bool = True) -> None:
        """verify finds what is wrong with ``tree`` in manifest ``seq`` (one finding of
        ``kind`` naming ``detail``); restore takes that tree from the manifest before
        and says so (a fallback: exit 3); gc deletes nothing while the kept manifest is
        damaged (``gc_blocked``: a page breaks the rules on its own), or goes on (pages
        that disagree with one another: gc reads each page once whatever they say of
        one another)."""
        assert self.verify.returncode == 1
        assert [(f["kind"], f["manifest"]) for f in self.findings] == [(kind, seq)], self.findings
        assert detail in self.findings[0]["detail"], self.findings
        assert self.restore.returncode == EXIT_FALLBACK, self.restore.stderr
        assert f"{tree}: restored from checkpoint {seq - 1}" in self.restore.stdout
        assert f"manifest {seq} unusable" in self.restore.stderr and detail in self.restore.stderr
        if gc_blocked:
            assert self.gc.returncode == 1 and f"gc: checkpoint {seq} (tree {tree}) needs an object" in self.gc.stderr
        else:
            assert self.gc.returncode == 0, self.gc.stderr


def _files_outside(root: Path, target: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file() and target not in p.parents}

"""``journal demo``: the whole loop on a generated tree, leaving nothing behind."""

from __future__ import annotations

import json


def test_demo_passes_and_removes_its_temp_dir(run_journal, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    proc = run_journal("demo", env={"HOME": str(tmp_path), "TMPDIR": str(tmp)}, timeout=120)
    as_json = run_journal("demo", "--json", env={"HOME": str(tmp_path), "TMPDIR": str(tmp)}, timeout=120)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "demo OK"
    assert "removed (`journal demo --dir DIR` keeps it)" in proc.stdout
    doc = json.loads(as_json.stdout)
    assert doc["ok"] and doc["checkpoints"][0]["objects_uploaded"] >= 3
    assert list(tmp.iterdir()) == []


def test_demo_dir_is_kept(run_journal, tmp_path):
    work = tmp_path / "work"

    proc = run_journal("demo", "--dir", str(work), env={"HOME": str(tmp_path)}, timeout=120)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (work / "store" / "config").is_file() and "removed" not in proc.stdout


def test_demo_counts_the_files_and_directories_it_restored_apart(tmp_path):
    from journal.cli.demo import run_demo

    result = run_demo(str(tmp_path / "work"))

    (made,) = [line for line in result.lines if line.startswith("work dir ")]
    (restored,) = [line for line in result.lines if line.startswith("restored ")]
    assert result.ok and ": 11 files in 4 trees" in made
    assert restored.startswith("restored 10 files and 12 directories from checkpoint 4 (every file but "
                               "codex-home/"), restored   # but the one file the codex preset leaves out

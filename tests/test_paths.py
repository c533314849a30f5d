"""The state directory's names (``journal/paths.py``): defined once, made nowhere else,
and each one listed in docs/design.md §10."""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path

from conftest import run_journal

from journal import paths

ROOT = Path(__file__).resolve().parent.parent
JOURNAL = ROOT / "journal"


def make_db(path: Path, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT)")
        con.executemany("INSERT OR REPLACE INTO t VALUES (?, ?)", ((f"k{i}", "v" * 200) for i in range(rows)))
    con.close()


def test_every_name_a_run_makes_in_the_state_dir_is_one_of_paths_state_names(live):
    """Checkpoints of a database and of a rewritten file, a hot restart's restore that
    moves an invalid database aside, and a supervisor: the state directory then holds
    only names from ``paths.STATE_NAMES``."""
    db = live.local / "opencode-share" / "opencode.db"
    make_db(db, 50)
    settings = live.local / "codex-home" / "settings.json"
    for turn in range(3):  # a rewritten file keeps local copies of its whole chunks
        settings.write_text('{"turn": %d, "theme": "dark"}\n' % turn)
        make_db(db, 60 + turn)
        live.checkpoint()
    db.write_bytes(b"not a database" * 300)
    assert live.restore().complete
    ran = run_journal("supervise", "--", "true", env=live.env)
    assert ran.returncode == 0, ran.stderr

    made = set(p.name for p in (live.local / ".journal").iterdir())

    assert made <= set(paths.STATE_NAMES), sorted(made - set(paths.STATE_NAMES))
    assert {paths.STATUS_FILE, paths.SUPERVISE_LOCK, paths.INVALID_DIR, paths.CHUNKS_DIR, paths.MAPS_DIR,
            paths.PAGES_DIR, paths.BASE_DIR, paths.QUIET_FILE} <= made, "the run did not exercise the names"


def test_no_module_but_paths_spells_a_state_dir_name():
    """A name in the state directory is spelled once, in ``journal/paths.py``, so the
    list the test above checks against is the whole list."""
    names = set(paths.STATE_NAMES)
    found = []
    for path in sorted(JOURNAL.rglob("*.py")):
        if path == JOURNAL / "paths.py":
            continue
        tree = ast.parse(path.read_text())
        slots = {id(c) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in n.targets)
                 for c in ast.walk(n.value)}
        found += [f"{path.relative_to(ROOT)}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and n.value in names and id(n) not in slots]
    assert found == []


def test_the_design_lists_every_state_dir_name():
    design = (ROOT / "docs" / "design.md").read_text()
    section = design[design.index("## 10. Local state"):design.index("## 11. Invariants")]
    listed = set(re.findall(r"`([a-z.-]+)/?`", section))
    assert set(paths.STATE_NAMES) <= listed, sorted(set(paths.STATE_NAMES) - listed)

"""A busy tick never takes a directory from a row another tree wrote.

Each quiet snapshot row records the tree whose walk wrote it, with that tree's rules
on what is included; a tree takes only its own rows (design §10). The case that
needs it: an inner tree reached through a symlink, whose link is then replaced by the
very directory it pointed to, so the outer tree walks into a directory for which only
the inner tree has a row, and that row (with the inner tree's excludes) still checks
equal.
"""

from __future__ import annotations

import os

from journal.local import quiet
from journal.checkpoint.run import config_key

from test_quiet import _full_walk_finds_nothing, nested_trees


def test_a_symlinked_inner_tree_root_replaced_by_its_directory_is_walked_by_the_outer_tree(bare_live):
    live = bare_live
    nested_trees(live, narrow_exclude='exclude = ["*.log"]')
    shared = live.local / "shared"
    shared.mkdir(parents=True)
    for name in ("top.txt", "other.txt"):
        (shared / name).write_text(name)
    target = live.local / "target"
    target.mkdir()
    (target / "run.log").write_text("line 1\n")
    (shared / "sub").symlink_to("../target")   # narrow walks it through the link; wide sees a link
    live.checkpoint()
    live.checkpoint()  # clean: the snapshot holds narrow's row for shared/sub (run.log excluded)
    assert "sub/run.log" not in live.entries("wide")

    (shared / "sub").unlink()
    os.rename(target, shared / "sub")  # the link becomes the very directory it pointed to
    live.checkpoint()

    assert "sub/run.log" in live.entries("wide"), sorted(live.entries("wide"))
    for _ in range(3):  # and later ticks, proven idle, keep it
        assert live.checkpoint().seq is None
    cfg = live.cfg
    assert quiet.idle_result(cfg.state_dir, str(live.state_file), config_key=config_key(cfg)) is not None
    assert "sub/run.log" in live.entries("wide")
    assert _full_walk_finds_nothing(live)

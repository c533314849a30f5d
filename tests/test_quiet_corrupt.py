"""A snapshot that decodes but holds a malformed row means "not proven" (design §10).

The file is neither fsynced nor checksummed: a row that decodes to the wrong shape (a
flipped byte inside a marshalled int or string does this, about 1 in 100 random
corruptions of a real snapshot) must count as a difference, and the snapshot is
dropped; it must never make a checkpoint fail.
"""

from __future__ import annotations

from journal.local import quiet


def _rewrite_first_row(live, make_bad) -> None:
    cfg = live.cfg
    snap = quiet.load(cfg.state_dir)
    row = snap.dirs[0]
    snap.dirs[0] = quiet.Row(*make_bad(row.abs_dir, row.names, row.sigs, row.others), row.tree)
    quiet.save(cfg.state_dir, snap)  # well-framed: the header's lengths match
    quiet._memo.clear()              # as a new process would read it


def _store_first_row(live, row) -> None:
    cfg = live.cfg
    snap = quiet.load(cfg.state_dir)
    snap.dirs[0] = row
    quiet.save(cfg.state_dir, snap)
    quiet._memo.clear()


def test_a_row_with_a_malformed_others_list_is_not_proven(live):
    live.checkpoint()
    _rewrite_first_row(live, lambda path, names, sigs, others: (path, names, sigs, [(0,)]))

    assert live.checkpoint().seq is None  # a row whose others list is malformed
    assert live.checkpoint().seq is None


def test_a_row_whose_path_holds_a_nul_is_not_proven(live):
    live.checkpoint()
    _rewrite_first_row(live, lambda path, names, sigs, others: (path + "\0", names, sigs, others))

    assert live.checkpoint().seq is None  # a row whose path holds a NUL


def test_a_stored_row_of_another_length_is_not_proven(live):
    live.checkpoint()
    first = quiet.load(live.cfg.state_dir).dirs[0]
    _store_first_row(live, tuple.__new__(quiet.Row, (first.abs_dir, first.names)))  # saved as a 2-tuple

    assert quiet.load(live.cfg.state_dir) is None  # not a snapshot this code can use
    assert live.checkpoint().seq is None           # the full walk finds nothing new
    assert quiet.load(live.cfg.state_dir) is not None and live.checkpoint().seq is None


def test_a_row_naming_its_tree_with_a_list_is_not_proven(live):
    live.checkpoint()
    first = quiet.load(live.cfg.state_dir).dirs[0]
    _store_first_row(live, quiet.Row(first.abs_dir, first.names, first.sigs, first.others, [first.tree]))

    assert live.checkpoint().seq is None  # a row that cannot be keyed by its tree
    assert live.checkpoint().seq is None

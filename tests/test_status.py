"""What ``journal status`` says of the local state (``supervise/status.py``, design §10):
its bytes, its caches', and its share of the live trees (issue 46)."""

from __future__ import annotations

import json

from conftest import Live


def test_status_reports_the_local_state_as_a_share_of_the_live_trees(live: Live):
    """Before any checkpoint the local state records no tree: no share is given. After
    one, ``--json`` gives the live trees' bytes as the local state records them (the
    checkpoint's own count of its files' bytes, ``journal log``'s ``size``) and the
    local state's bytes as a share of them; the text line ends with the percentage."""
    before = json.loads(live.run("status", "--json", expect=0).stdout)["local_state"]
    assert before["live_trees_bytes"] is None and before["share_of_live_trees"] is None
    assert "of the live trees" not in live.run("status", expect=0).stdout

    live.checkpoint_ok()

    size = json.loads(live.run("status", "--json", expect=0).stdout)["local_state"]
    newest = json.loads(live.run("log", "--json", "-n", "1", expect=0).stdout)[0]
    assert size["live_trees_bytes"] == newest["size"] > 0
    assert size["share_of_live_trees"] == round(size["bytes"] / newest["size"], 4) > 0
    text = live.run("status", expect=0).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("local state: "))
    assert line.endswith(f"; {size['share_of_live_trees']:.0%} of the live trees' {newest['size']:,} bytes"), line

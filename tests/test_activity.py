"""What every checkpoint and restore records for ``journal status``, however it runs
(``local/activity.py``): cron's checkpoints, the console's idle path, a restore by
hand, an error and the run that clears it."""

from __future__ import annotations

import json
import os

from journal.local import activity
from journal.paths import ACTIVITY_DIR, ACTIVITY_OK


def status(live) -> dict:
    proc = live.run("status", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_status_shows_checkpoints_run_from_cron(live):
    """Four `journal checkpoint` runs, no supervisor: the last one that committed, with
    its seq, time, files and bytes, and the idle runs after it as successes."""
    for _ in range(2):
        assert live.run("checkpoint").returncode == 0
    (live.local / "codex-home" / "config.toml").write_text('model = "o3"\n')
    committed = json.loads(live.run("checkpoint", "--json").stdout)
    ok = live.local / ".journal" / ACTIVITY_DIR / ACTIVITY_OK
    os.utime(ok, (1000, 1000))  # as if the last run were long ago: the idle run below moves it

    idle = live.run("checkpoint")

    assert idle.stdout.startswith("idle:")
    st = status(live)
    last = st["last_checkpoint"]
    assert (last["seq"], last["files_changed"], last["bytes_uploaded"], last["objects_uploaded"]) == (
        2, 1, committed["bytes_uploaded"], committed["objects_uploaded"])
    assert st["last_success"] > 1000 and st["lag_seconds"] is not None and st["last_error"] is None
    text = live.run("status").stdout
    assert "last checkpoint: 2 at " in text and "1 file and 0 directories changed" in text
    assert "last checkpoint: none recorded" not in text and "last error: none" in text


def test_an_error_is_shown_with_its_time_until_a_later_run_clears_it(live):
    live.checkpoint()
    (live.local / "codex-home" / "config.toml").write_text('model = "o3"\n')
    live.store_path.rename(live.store_path.with_name("unmounted"))

    failed = live.run("checkpoint")

    assert failed.returncode == 1
    err = status(live)["last_error"]
    assert err["op"] == "checkpoint" and "no journal store at" in err["message"] and err["time"] > 0
    assert err["cleared"] is False
    assert "NOT cleared" in live.run("status").stdout

    live.store_path.with_name("unmounted").rename(live.store_path)
    assert live.run("checkpoint").returncode == 0

    err = status(live)["last_error"]
    assert err["cleared"] is True and err["cleared_at"] > err["time"]
    text = live.run("status").stdout
    assert "no journal store at" in text and "cleared: a later run succeeded at" in text


def test_status_shows_whether_the_last_restore_was_complete(live, make_live):
    live.checkpoint()
    fresh = make_live("fresh", fixtures=False)

    assert fresh.run("restore", "--dry-run").returncode == 0
    assert status(fresh)["restore"] is None            # a dry run changes nothing, not even the record
    assert fresh.run("restore").returncode == 0

    rs = status(fresh)["restore"]
    assert (rs["complete"], rs["fallback"], rs["seq"]) == (True, False, 1)
    assert rs["trees"] == {"claude": 1, "codex": 1, "openclaw": 1}
    assert "last restore: complete, at " in fresh.run("status").stdout


def test_status_and_the_metrics_report_a_stale_disk_and_the_fork_that_kept_its_work(live, make_live):
    from journal.supervise.metrics import render
    from journal.supervise.status import Status

    live.checkpoint()
    other = make_live("other", fixtures=False)
    other.restore()
    other.write("codex-home/memories/other.md", "the other container\n")
    other.checkpoint()
    live.write("codex-home/memories/mine.md", "never checkpointed here\n")

    assert live.run("restore").returncode == 0
    rs = status(live)["restore"]
    text = live.run("status").stdout
    metrics = render(Status(restore=activity.read(str(live.local / ".journal")).restore)).decode()

    assert (rs["lineage"], rs["fork"]) == ("stale", 3) and "checkpoint 2 lacks" in rs["fork_note"]
    assert "FORK 3:" in text and "this disk was stale" in text, text
    assert "journal_restore_stale 1" in metrics and "journal_restore_fork_seq 3" in metrics


def test_a_record_that_cannot_be_written_never_fails_the_checkpoint(live):
    (live.local / ".journal").mkdir()
    (live.local / ".journal" / ACTIVITY_DIR).write_text("a file where the directory belongs")

    result = live.checkpoint()

    assert result.seq == 1
    assert activity.read(str(live.local / ".journal")).checkpoint is None

"""Smoke test of the benchmark (tools/bench.py, the launcher of tools/bench/; issue 4).

The benchmark is not a timed test: this runs its tiny ``--smoke`` version as a
subprocess and checks only that the JSON holds every figure, that journal's idle tick
wrote nothing and that its active ticks wrote at most 4 objects. Timing values are
never asserted, and the smoke run judges no target (no PASS/FAIL line: its figures
are too small to mean anything). It passes with or without rsync, restic and the sqlite3 CLI installed
(the bench falls back to Python copies and skips restic).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench.py"
FIGURE = ("bytes", "objects", "wall_s", "cpu_s", "maxrss_kib")
# the six of issue 4; the idle tick, the 20,000-file tick and the restore as supervise runs them; issue 6's three;
# issue 23's socket append; issue 28's three (encrypted vs plain store); issue 27's active-tick CPU and
# 20,000-file one-change tick, each both ways (the command line, as supervise runs it), and its initial
# checkpoint, 256 MiB database tick, 2 GiB checkpoint and 2 GiB restore; issue 46's verify over a week with retention,
# and for each of its two weeks the supervisor's RSS and the local state's share of the live trees, and its three
# goals over the link (an active tick within 2x the floor, from the command line and as supervise runs it, a
# restore within 0.7x restic's and 2x the floor), and its four of a large tree (peak RSS, idle tick, one-change
# tick, a restore against restic's)
TARGETS = 37


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "bench.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--smoke", "--json", str(out), "--workdir", str(tmp / "work")],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, f"bench failed:\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}"
    verdicts = [ln for ln in proc.stdout.splitlines() if ln.startswith(("PASS", "FAIL", "SKIP"))]
    assert verdicts == [], proc.stdout[-3000:]
    assert f"smoke run: the figures of {TARGETS} targets are produced; none is judged" in proc.stdout
    return json.loads(out.read_text())


def has_figure(fig: dict, where: str) -> None:
    assert isinstance(fig, dict), f"{where}: missing"
    for key in FIGURE:
        assert key in fig, f"{where}: no {key!r}"
    assert fig["wall_s"] is not None and fig["cpu_s"] is not None, where
    assert fig["maxrss_kib"] > 0, where


def test_meta_names_machine_tools_and_workload(result):
    meta = result["meta"]
    for key in ("date", "command", "args", "machine", "tools", "notes", "seconds", "rss_floor_kib"):
        assert key in meta, key
    for key in ("nproc", "mem_bytes", "disk", "python", "cpu"):
        assert key in meta["machine"], key
    assert meta["tools"]["legacy_copy"] in ("rsync", "python")
    assert meta["tools"]["legacy_sqlite"] in ("cli", "python")
    assert "restic" in meta["tools"]
    assert meta["args"]["smoke"] is True
    work = result["main"]["workload"]
    assert work["files"] > 0 and work["bytes"] > 0 and work["open_rollout_bytes"] > 0
    assert len(work["databases"]) == 2 and len(work["open_transcripts"]) == 4
    assert len(work["trees"]) == 6


def test_every_main_figure_is_there(result):
    restic = result["meta"]["tools"]["restic"] is not None
    runs = result["main"]["runs"]
    assert len(runs) == result["meta"]["args"]["runs"]
    for r, run in enumerate(runs):
        systems = ["journal", "legacy"] + (["restic"] if restic else [])
        assert ("restic" in run) == restic
        for name in systems:
            has_figure(run[name]["initial"], f"run {r} {name} initial")
            assert len(run[name]["ticks"]) == result["meta"]["args"]["ticks"]
            for t, fig in enumerate(run[name]["ticks"]):
                has_figure(fig, f"run {r} {name} tick {t}")
                assert fig["objects"] >= 1 and fig["bytes"] > 0
            has_figure(run[name]["idle"], f"run {r} {name} idle")
            has_figure(run[name]["restore"], f"run {r} {name} restore")
            assert run[name]["restore"]["files"] > 0
        assert run["journal"]["restore_in_process_s"] > 0   # None: the in-process restore was incomplete
        supervised = run["journal-supervise"]   # the same trees, checkpointed through the library in-process
        assert len(supervised["ticks"]) == len(run["journal"]["ticks"])
        for t, fig in enumerate(supervised["ticks"]):
            has_figure(fig, f"run {r} journal-supervise tick {t}")
            assert fig["objects"] >= 1 and fig["reported"]["objects"] == fig["objects"]
        assert supervised["idle"]["objects"] == 0 and supervised["restore"] is None
        for fig in run["journal"]["ticks"]:
            assert fig["reported"]["objects"] == fig["objects"]
            assert set(fig["by_kind"]) >= {"segment", "page", "manifest"}
    main = result["summary"]["main"]
    for name in ("journal", "legacy", "restic"):
        assert name in main
        if main[name] is None:
            assert name == "restic" and not restic
            continue
        for part in ("initial", "tick", "idle", "restore"):
            for key in FIGURE:
                assert key in main[name][part], (name, part, key)
        assert "objects_max" in main[name]["tick"]
        assert len(main[name]["per_tick"]) == result["meta"]["args"]["ticks"]


def test_journal_idle_tick_writes_nothing_and_active_ticks_few_objects(result):
    for run in result["main"]["runs"]:
        assert run["journal"]["idle"]["objects"] == 0
        assert run["journal"]["idle"]["bytes"] == 0
        assert all(f["objects"] <= 4 for f in run["journal"]["ticks"])
    for size in result["tree"]["sizes"]:
        for run in size["runs"]:
            for name in ("journal", "journal-supervise"):
                assert run[name]["idle"]["objects"] == 0
                assert 1 <= run[name]["change"]["objects"] <= 4


def test_tree_sqlite_and_big_file_figures(result):
    s = result["summary"]
    trees = s["tree"]["sizes"]
    assert [t["files"] for t in trees] == result["meta"]["args"]["tree_files"]
    restic = result["meta"]["tools"]["restic"] is not None
    for tree in trees:   # issue 46: each size's figures, its restore's with its peak RSS, restic's beside it
        for name in ("journal", "legacy"):
            for part in ("initial", "idle", "change"):
                for key in FIGURE:
                    assert key in tree[name][part], (name, part, key)
        has_figure(tree["journal"]["restore"], f"tree {tree['files']} restore")
        assert (tree["restic"] is not None) == restic
        assert (result["ratios"][f"tree_{tree['files']}_restore_wall_journal_over_restic"] is not None) == restic
    for size in result["tree"]["sizes"]:
        assert all(r["journal"]["files"] >= size["files"] for r in size["restores"])   # and the export's mark
    for name in ("journal", "legacy"):
        for part in ("initial", "tick"):
            for key in FIGURE:
                assert key in s["sqlite"][name][part], (name, part, key)
        assert s["sqlite"][name]["tick"]["bytes"] > 0
    assert s["sqlite"]["legacy"]["tick"]["bytes"] >= s["sqlite"]["db_bytes"]  # legacy copies the whole db
    big = s["big_file"]
    assert big["file_bytes"] == result["meta"]["args"]["big_file_mib"] << 20
    assert big["journal"]["checkpoint_maxrss_kib"] > 0 and big["journal"]["restore_maxrss_kib"] > 0
    assert all(r["journal"]["restore"]["size_ok"] for r in result["big"]["runs"])


def test_ratios_and_the_figure_of_every_target_without_a_verdict(result):
    ratios = result["ratios"]
    for key in ("tick_bytes_journal_over_legacy", "tick_bytes_journal_over_restic", "tick_wall_journal_over_legacy",
                "tick_cpu_journal_over_legacy", "idle_wall_journal_over_legacy", "restore_wall_journal_over_rsync",
                "initial_bytes_journal_over_legacy", "tree_idle_wall_journal_over_legacy",
                "tree_change_wall_journal_over_legacy", "sqlite_tick_bytes_journal_over_legacy",
                "tick_cpu_supervise_over_legacy", "tree_change_wall_supervise_over_legacy",
                "initial_wall_journal_over_legacy", "sqlite_tick_wall_journal_over_legacy",
                "big_checkpoint_wall_journal_over_legacy", "big_checkpoint_durable_journal_over_legacy",
                "big_restore_wall_journal_over_legacy", "big_restore_durable_journal_over_legacy"):
        assert key in ratios, key
    assert ratios["tick_bytes_journal_over_legacy"] > 0
    assert (ratios["tick_bytes_journal_over_restic"] is None) == (result["meta"]["tools"]["restic"] is None)
    targets = result["targets"]
    assert len(targets) == TARGETS
    for t in targets:
        assert set(t) == {"name", "detail"}, t      # the figure, no verdict
        assert t["detail"] and "n/a" not in t["detail"], t
    names = " ".join(t["name"] for t in targets)
    for word in ("active-tick bytes", "objects per active tick", "idle tick", "restore", "peak RSS", "-file idle tick",
                 "gc over", "appends restores from", "metadata objects", "socket append p99", "encrypted store",
                 "active tick, the command line: CPU",
                 "active tick, as `journal supervise` runs it (in-process): CPU",
                 "-file one-change tick, as `journal supervise`", "initial checkpoint: wall <= 1.5x legacy",
                 "transactions: tick wall <= legacy", "MiB file, checkpoint: wall <=",
                 "MiB file, restore: wall <=", "history, with retention: `verify` <= 2 s",
                 "-file tree: peak RSS <=", "-file restore --to: wall <= restic restore",
                 "over the link: an active tick as `journal supervise` runs it"):
        assert word in names, word


def test_gc_part_figures(result):
    """gc over a small store (and a tenth of it): dry run, mark, sweep; counts are exact."""
    args = result["meta"]["args"]
    assert "gc" in args["parts"]
    sizes = result["summary"]["gc"]["sizes"]
    assert [s["n_objects"] for s in sizes] == [max(100, args["gc_objects"] // 10), args["gc_objects"]]
    for s in sizes:
        where = f"gc over {s['n_objects']} objects"
        store = s["store"]
        assert store["objects"] == s["n_objects"], where
        assert store["synthetic_packs"] == store["synthetic_named"] + store["synthetic_orphans"] > 0, where
        dry, mark, sweep = s["dry_run"], s["mark"], s["sweep"]
        for name, fig in (("dry run", dry), ("mark", mark), ("sweep", sweep)):
            has_figure(fig, f"{where}: {name}")
        # a dry run changes nothing; the mark writes one tombstone and deletes nothing
        assert dry["objects_after"] == dry["objects"] == s["n_objects"], where
        assert mark["objects_after"] == mark["objects"] + 1 and mark["deleted"] == 0, where
        # every synthetic pack and expired manifest is garbage, and the dry run saw the same
        assert dry["tombstoned"] == mark["tombstoned"] >= store["synthetic_packs"] + store["expired_checkpoints"], where
        # past the grace (and a checkpoint later, for the orphans) all of it goes
        assert sweep["deleted"] == mark["tombstoned"] and sweep["tombstones_resolved"] >= 1, where
        assert sweep["objects_after"] < sweep["objects"] - store["synthetic_packs"], where
        assert s["verify_ok"], where


def test_bounded_restore_figures(result):
    args = result["meta"]["args"]
    rb = result["summary"]["gc"]["restore"]
    assert rb["appends"] == args["gc_appends"] and rb["newest_seq"] == args["gc_checkpoints"]
    for key in ("transcript", "history"):
        fig = rb[key]
        has_figure(fig, f"restore {key}")
        assert fig["same_bytes"], key
        assert fig["manifest_lists"] == 1, key
        assert fig["gets"] >= fig["metadata_gets"] >= 2, key       # at least the config and a manifest
        assert fig["by_kind"].get("manifests") == 1 and fig["by_kind"].get("page", 0) >= 1, key
    assert rb["transcript"]["objects"] <= 32
    assert rb["history"]["metadata_gets"] <= 64


def test_input_journal_figures(result):
    """Issue 23: socket latencies with 10 clients (no verdict in a smoke run), and the
    objects each input adds: one record, a claim with a client id, a marker when delivered."""
    inputs = result["summary"]["inputs"]
    for name, fig in inputs.items():
        if name.endswith(("_sessions", "_session")):
            assert fig["clients"] == 10 and fig["appends"] == 200, name
            assert 0 < fig["p50_ms"] <= fig["p99_ms"] <= fig["max_ms"], name
    assert {"disk_own_sessions", "disk_one_session", "disk_durable_write"} <= set(inputs)
    for where in ("local", "s3"):
        per = inputs[where]
        assert [per[k]["objects"] for k in ("append", "append_client_id", "delivered")] == [1, 2, 1], where
        assert 0 < per["append"]["bytes"] < per["append_client_id"]["bytes"], where
    assert inputs["s3"]["append_client_id"]["requests"]["PUT"] == 2


def test_crypto_part_figures(result):
    """Issue 28: the main workload into a plain and an encrypted store side by side; the
    same objects per tick, each tick's sealed records adding a few bytes, every figure
    and ratio there."""
    args = result["meta"]["args"]
    runs = result["crypto"]["runs"]
    assert len(runs) == args["runs"]
    for r, run in enumerate(runs):
        for name in ("plain", "encrypted"):
            has_figure(run[name]["initial"], f"crypto run {r} {name} initial")
            assert len(run[name]["ticks"]) == args["ticks"]
            for t, fig in enumerate(run[name]["ticks"]):
                has_figure(fig, f"crypto run {r} {name} tick {t}")
                assert 1 <= fig["objects"] <= 4 and fig["bytes"] > 0
            assert run[name]["idle"]["objects"] == 0 and run[name]["idle"]["bytes"] == 0
            has_figure(run[name]["restore"], f"crypto run {r} {name} restore")
            assert run[name]["restore"]["files"] == run["plain"]["restore"]["files"] > 0
            assert run[name]["restore"]["restored_bytes"] == run["plain"]["restore"]["restored_bytes"]
            assert run[name]["restore_in_process_s"] > 0 and run[name]["idle_in_process_s"] > 0
        for plain, enc in zip(run["plain"]["ticks"], run["encrypted"]["ticks"]):
            assert enc["objects"] == plain["objects"]
            assert plain["records"] >= plain["objects"] and enc["records"] == 0   # sealed records are not read
            assert set(enc["by_kind"]) == {"sealed"} and sum(enc["by_kind"].values()) == enc["bytes"]
    summary = result["summary"]["crypto"]
    for name in ("plain", "encrypted"):
        for part in ("initial", "tick", "idle", "restore"):
            for key in FIGURE:
                assert key in summary[name][part], (name, part, key)
    assert summary["tick_seal_bytes"] == summary["tick_records"] * 28 > 0
    for key in ("bytes", "objects", "wall", "cpu"):
        assert result["ratios"][f"crypto_tick_{key}_encrypted_over_plain"] > 0, key
    for key in ("initial_bytes", "initial_wall", "idle_wall", "restore_wall", "restore_cpu", "restore_in_process"):
        assert result["ratios"][f"crypto_{key}_encrypted_over_plain"] > 0, key


def test_link_part_figures(result):
    """Issue 27: over the throttled mount, each system's initial checkpoint, active
    ticks and restore (their walls are the time to durable), and journal's ratios to
    both; a machine without FUSE says why the part was skipped. Issue 46: each figure
    with the link's floor under it, a restore's from the requests and bytes served."""
    link = result["link"]
    if link.get("skipped"):
        assert link["skipped"].startswith("needs "), link["skipped"]
        return
    assert link["rate_bytes_s"] == 200e6 and link["latency_s"] == 0.003   # the smoke run's fast link
    for run in link["runs"]:
        for name in ("journal", "legacy") + (("restic",) if "restic" in run else ()):
            has_figure(run[name]["initial"], f"link {name} initial")
            assert len(run[name]["ticks"]) == 2, name
            for n, tick in enumerate(run[name]["ticks"]):
                has_figure(tick, f"link {name} tick {n}")
            assert run[name]["restore"]["wall_s"] > 0, name
            for fig in [run[name]["initial"], *run[name]["ticks"], run[name]["restore"]]:
                assert 0 < fig["floor_all_s"] <= fig["floor_one_s"], (name, fig)
            assert run[name]["restore"]["link_requests"] > 0 and run[name]["restore"]["link_bytes"] > 0, name
        assert max(t["objects"] for t in run["journal"]["ticks"]) <= 4
    for other in ("legacy", "restic"):
        for what in ("tick", "restore"):
            assert f"link_{what}_wall_journal_over_{other}" in result["ratios"]


def test_history_part_figures(result):
    """Issue 46: the smoke run's two simulated weeks (200 ticks, four days of them), with
    the daily gc of docs/deploy.md and without: every tick checkpointed through the
    supervisor's own tick in a child process, and at 1, 50 and 200 checkpoints the
    ticks, the supervisor's RSS and peak, the sizes (the local state by part, as
    `journal status` counts it) and every read command's figure."""
    history = result["summary"]["history"]
    assert history["at"] == [1, 50, 200] and set(history["policies"]) == {"deploy", "none"}
    for policy, week in history["policies"].items():
        points = week["checkpoints"]
        assert [c["n"] for c in points] == [1, 50, 200], policy
        for c in points:
            assert c["store_objects"] > 0 and c["store_bytes"] > 0 and c["state_bytes"] > 0, (policy, c["n"])
            assert 0 < c["supervisor"]["rss_kib"] <= c["supervisor"]["peak_kib"], (policy, c["n"])
            assert c["state"]["bytes"] > 0 and c["state"]["live_trees_bytes"] > 0, (policy, c["n"])
            assert c["busy"]["ticks"] >= 1 and c["busy"]["bytes"] > 0, (policy, c["n"])
            for name in ("verify", "verify --full", "log", "ls", "find", "gc --dry-run", "restore"):
                has_figure(c["commands"][name], f"history {policy} {c['n']}: {name}")
            assert c["commands"]["restore"]["restored_bytes"] > 0
        assert points[1]["quiet"]["ticks"] > points[1]["busy"]["ticks"], policy
    kept, none = history["policies"]["deploy"], history["policies"]["none"]
    assert none["checkpoints"][-1]["manifests"] == 200 and not none["gc_runs"]
    assert len(kept["gc_runs"]) == 4 and kept["checkpoints"][-1]["manifests"] < 200
    assert sum(g["deleted"] for g in kept["gc_runs"]) > 0

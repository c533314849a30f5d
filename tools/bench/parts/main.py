"""The main part: the six harness trees, an open 8 MB Codex rollout, then ``--ticks``
active ticks, one idle tick and a full restore, repeated ``--runs`` times; journal
against the legacy design and restic, interleaved (the order rotates every tick)."""

from __future__ import annotations

import os
import statistics
import time

from ..measure import KIB, MIB, copy_tree, log, rmtree, rotate, settle, tree_stats
from ..report import fmt_bytes, fmt_s, judge_ratio, med, med_fig, ratio, tick_fig
from ..systems import JournalSys, LegacySys, ResticSys, SupervisedJournal
from ..workload import MAIN_DBS, MAIN_TREES, LiveWorkload, generate_main
from .base import Part

SYSTEMS = ("journal", "journal-supervise", "legacy", "restic")


class MainPart(Part):
    name = "main"

    def run(self, args, tools, work: str) -> dict:
        tpl, local_tpl, info, workload = main_template(args, work, self.name)
        runs = []
        for r in range(args.runs):
            runs.append(self._run(args, tools, work, local_tpl, info, r))
        rmtree(tpl)
        return {"workload": workload, "runs": runs}

    def _run(self, args, tools, work: str, local_tpl: str, info: dict, r: int) -> dict:
        """Run ``r``: a fresh copy of the trees, every system's initial checkpoint, the
        active ticks, an idle tick, and a full restore by each system."""
        rd, local, live = fresh_run(args, work, local_tpl, info, self.name, r)
        systems = main_systems(tools, work, local, rd, rd)
        systems.insert(1, SupervisedJournal(tools, local, os.path.join(rd, "store-supervise"),
                                            os.path.join(rd, "home-supervise"),
                                            state_dir=os.path.join(rd, "state-supervise")))
        run = drive(systems, live, args, r)
        run["journal"]["idle_in_process_s"] = systems[0].in_process_idle()
        live.close()
        self._restores(systems, run, rd, r)
        log_run(run, r, args.runs)
        rmtree(rd)
        return run

    @staticmethod
    def _restores(systems: list, run: dict, rd: str, r: int) -> None:
        for s in rotate([s for s in systems if not isinstance(s, SupervisedJournal)], r):
            dest = os.path.join(rd, f"restore-{s.name}")
            run[s.name]["restore"] = s.restore(dest)
            rmtree(dest)
            if isinstance(s, JournalSys):
                run["journal"]["restore_in_process_s"] = s.in_process_restore(dest)
                rmtree(dest)

    def summarize(self, figures: dict, spread: dict) -> dict:
        runs = figures["runs"]
        sm: dict = {name: summarize_system(runs, name) for name in SYSTEMS}
        kinds: dict[str, list[float]] = {}
        for r in runs:
            for f in r["journal"]["ticks"]:
                for k, v in f["by_kind"].items():
                    kinds.setdefault(k, []).append(v)
        nticks = sum(len(r["journal"]["ticks"]) for r in runs)
        sm["journal"]["tick_bytes_by_kind"] = {k: sum(v) / nticks for k, v in sorted(kinds.items())}
        sm["journal"]["idle_in_process_s"] = med(r["journal"].get("idle_in_process_s") for r in runs)
        sm["journal"]["restore_in_process_s"] = med(r["journal"].get("restore_in_process_s") for r in runs)
        sm["appended_bytes_per_tick"] = statistics.mean(b for r in runs for b in r["appended_bytes"])
        spread.update(per_run_ratios(runs))
        return sm

    def targets(self, main: dict, ratios: dict, res: dict, verdicts) -> None:
        rl, rr = ratios["tick_bytes_journal_over_legacy"], ratios["tick_bytes_journal_over_restic"]
        ok_l = rl is not None and rl <= 1 / 300
        ok_r = None if rr is None else rr <= 1 / 20
        detail = (f"journal/legacy = 1/{1 / rl:.0f} (need <= 1/300)" if rl else "journal/legacy = n/a")
        if rr:
            per = [x for x in res["ratios_per_run"]["tick_bytes_journal_over_restic"] if x]
            detail += (f", journal/restic = 1/{1 / rr:.1f} (need <= 1/20; per run 1/{1 / max(per):.1f} .. "
                       f"1/{1 / min(per):.1f}, {sum(x <= 1 / 20 for x in per)} of {len(per)} runs within)")
        else:
            detail += ", restic not installed: not compared"
        verdicts.add("active-tick bytes <= 1/300 of legacy and <= 1/20 of restic", ok_l and ok_r is not False, detail)
        omax = max(f["objects"] for r in res["main"]["runs"] for f in r["journal"]["ticks"])
        verdicts.add("<= 4 objects per active tick", omax <= 4, f"journal max {omax} objects per active tick")
        for name, key, label in (("journal", "tick_cpu_journal_over_legacy", "the command line"),
                                 ("journal-supervise", "tick_cpu_supervise_over_legacy",
                                  "as `journal supervise` runs it (in-process)")):
            sc = ratios.get(key)
            if sc is not None:
                verdicts.add(f"active tick, {label}: CPU <= legacy", sc <= 1.0,
                             f"journal {main[name]['tick']['cpu_s'] * 1000:.0f} ms vs legacy "
                             f"{main['legacy']['tick']['cpu_s'] * 1000:.0f} ms = {sc:.2f}x")
        judge_ratio(verdicts, "initial checkpoint: wall <= 1.5x legacy", res, "initial_wall_journal_over_legacy", 1.5,
                    main["journal"]["initial"]["wall_s"], main["legacy"]["initial"]["wall_s"])
        idle_targets(main, ratios, res, verdicts)
        restore_targets(main, ratios, res, verdicts)

    def tables(self, main: dict, res: dict) -> list[str]:
        out = figures_table(main, res)
        out += per_tick_table(main)
        if main["journal"].get("idle_in_process_s") is not None:
            out.append(f"journal's idle tick in-process (no interpreter start, as `journal supervise` runs it): "
                       f"{fmt_s(main['journal']['idle_in_process_s'])}")
            out.append("")
        if main["journal"].get("restore_in_process_s") is not None:
            out.append(f"journal's full restore in-process (no interpreter start, as `journal supervise` restores at "
                       f"start-up): {fmt_s(main['journal']['restore_in_process_s'])}")
            out.append("")
        out.append("journal's active-tick bytes by record kind (mean per tick): " + ", ".join(
            f"{k} {fmt_bytes(v)}" for k, v in main["journal"]["tick_bytes_by_kind"].items()))
        out.append("")
        return out


def main_template(args, work: str, part: str) -> tuple[str, str, dict, dict]:
    """The main workload's template trees, generated once per part: ``(template dir,
    its live trees, the workload's info, its figures)``; the part removes the template."""
    tpl = os.path.join(work, f"tpl-{part}")
    local_tpl = os.path.join(tpl, "local")
    t0 = time.perf_counter()
    info = generate_main(local_tpl, args.seed, args.scale)
    files, size = tree_stats(local_tpl)
    log(f"{part}: generated {files} files, {size / MIB:.1f} MiB in {time.perf_counter() - t0:.1f}s")
    workload = {"files": files, "bytes": size, "trees": {}, "open_transcripts": info["open"],
                "open_rollout_bytes": os.path.getsize(os.path.join(local_tpl, info["open"]["codex"])),
                "databases": {db: os.path.getsize(os.path.join(local_tpl, db)) for db in MAIN_DBS},
                "ticks": args.ticks}
    for tree in MAIN_TREES:
        workload["trees"][tree] = dict(zip(("files", "bytes"), tree_stats(os.path.join(local_tpl, tree))))
    return tpl, local_tpl, info, workload


def fresh_run(args, work: str, local_tpl: str, info: dict, part: str, r: int) -> tuple[str, str, LiveWorkload]:
    """Run ``r``'s directory, a fresh copy of the template's live trees in it, and the
    agents that change them: ``(run dir, live trees, workload)``."""
    rd = os.path.join(work, f"{part}-run{r}")
    rmtree(rd)
    os.makedirs(rd)
    local = os.path.join(rd, "local")
    copy_tree(local_tpl, local)
    return rd, local, LiveWorkload(local, info, args.seed)


def drive(systems: list, live: LiveWorkload, args, r: int) -> dict:
    """Every system's initial checkpoint, then ``args.ticks`` active ticks of ``live``
    each followed by every system's tick, then an idle tick; the systems interleaved,
    in an order that rotates every tick (and every run ``r``). Their figures by name,
    and the bytes the agents appended each tick."""
    run: dict = {s.name: {"initial": None, "ticks": [], "idle": None, "restore": None} for s in systems}
    run["appended_bytes"] = []
    for s in rotate(systems, r):
        run[s.name]["initial"] = s.tick()
    for t in range(args.ticks):
        settle()
        before = live.appended
        live.tick(t)
        run["appended_bytes"].append(live.appended - before)
        settle()
        for s in rotate(systems, r + t + 1):
            run[s.name]["ticks"].append(s.tick())
    settle()
    for s in rotate(systems, r + args.ticks + 1):
        run[s.name]["idle"] = s.tick()
    return run


def main_systems(tools, work: str, local: str, rd: str, remote: str) -> list:
    """The systems of the main workload: their stores (journal's store, the legacy
    destination, restic's repository) under ``remote``, their local state under ``rd``."""
    systems = [JournalSys(tools, local, os.path.join(remote, "store"), os.path.join(rd, "home")),
               LegacySys(tools, work, local, os.path.join(remote, "legacy-dest"), os.path.join(rd, "legacy-state"),
                         MAIN_TREES, MAIN_DBS)]
    if tools.restic:
        systems.append(ResticSys(tools, os.path.join(remote, "restic-repo"), os.path.join(rd, "restic-cache"),
                                 [os.path.join(local, t) for t in MAIN_TREES]))
    return systems


def log_run(run: dict, r: int, runs: int) -> None:
    j = run["journal"]
    log(f"main run {r + 1}/{runs}: journal tick "
        f"{statistics.mean(f['bytes'] for f in j['ticks']) / KIB:.1f} KiB, legacy "
        f"{statistics.mean(f['bytes'] for f in run['legacy']['ticks']) / KIB:.0f} KiB"
        + (f", restic {statistics.mean(f['bytes'] for f in run['restic']['ticks']) / KIB:.0f} KiB"
           if "restic" in run else "")
        + f"; idle journal {j['idle']['wall_s'] * 1000:.0f} ms, legacy {run['legacy']['idle']['wall_s'] * 1000:.0f} ms;"
        f" restore journal {j['restore']['wall_s']:.2f}s, rsync {run['legacy']['restore']['wall_s']:.2f}s")


def summarize_system(runs: list[dict], name: str) -> dict | None:
    """One system's medians over the runs (None when a run lacks it: restic not installed)."""
    if not all(name in r for r in runs):
        return None
    per_run = [tick_fig(r[name]["ticks"]) for r in runs]
    tick = med_fig(per_run)
    tick["objects_max"] = max(p["objects_max"] for p in per_run)
    nt = len(runs[0][name]["ticks"])
    return {"initial": med_fig([r[name]["initial"] for r in runs]), "tick": tick,
            "per_tick": [med_fig([r[name]["ticks"][t] for r in runs]) for t in range(nt)],
            "idle": med_fig([r[name]["idle"] for r in runs]),
            "restore": med_fig([r[name]["restore"] for r in runs])}


def per_run_ratios(runs: list[dict]) -> dict[str, list]:
    """journal over legacy and over restic, per run: active-tick bytes, wall and CPU;
    initial bytes and wall; idle wall; restore wall."""
    def each(a, b):
        return [ratio(a(r), b(r)) for r in runs]

    def tick(n, k):
        return lambda r: tick_fig(r[n]["ticks"])[k] if n in r else None

    def fig(n, part, k):
        return lambda r: r[n][part][k] if n in r else None
    out = {}
    for k in ("bytes", "wall_s", "cpu_s"):
        for other in ("legacy", "restic"):
            out[f"tick_{k.split('_')[0]}_journal_over_{other}"] = each(tick("journal", k), tick(other, k))
    for k in ("wall_s", "cpu_s"):
        out[f"tick_{k.split('_')[0]}_supervise_over_legacy"] = each(tick("journal-supervise", k), tick("legacy", k))
    for k in ("bytes", "wall_s"):
        for other in ("legacy", "restic"):
            out[f"initial_{k.split('_')[0]}_journal_over_{other}"] = each(fig("journal", "initial", k),
                                                                           fig(other, "initial", k))
    for other in ("legacy", "restic"):
        out[f"idle_wall_journal_over_{other}"] = each(fig("journal", "idle", "wall_s"), fig(other, "idle", "wall_s"))
    out["restore_wall_journal_over_rsync"] = each(fig("journal", "restore", "wall_s"), fig("legacy", "restore", "wall_s"))
    out["restore_wall_journal_over_restic"] = each(fig("journal", "restore", "wall_s"),
                                                   fig("restic", "restore", "wall_s"))
    return out


def idle_targets(main: dict, ratios: dict, res: dict, verdicts) -> None:
    jidle = [r["journal"]["idle"] for r in res["main"]["runs"]]
    iobj = max(f["objects"] for f in jidle)
    iw = ratios["idle_wall_journal_over_legacy"]
    verdicts.add("idle tick: 0 objects, and wall <= legacy", iobj == 0 and iw is not None and iw <= 1.0,
                 f"journal {iobj} objects; wall journal {main['journal']['idle']['wall_s'] * 1000:.0f} ms vs legacy "
                 f"{main['legacy']['idle']['wall_s'] * 1000:.0f} ms = {iw:.2f}x")
    inproc = main["journal"].get("idle_in_process_s")
    if inproc is not None:
        verdicts.add("idle tick as `journal supervise` runs it (in-process): wall <= legacy",
                     inproc <= main["legacy"]["idle"]["wall_s"],
                     f"journal {inproc * 1000:.1f} ms vs legacy {main['legacy']['idle']['wall_s'] * 1000:.0f} ms")


def restore_targets(main: dict, ratios: dict, res: dict, verdicts) -> None:
    copier = res["meta"]["tools"]["legacy_copy"]
    rw = ratios["restore_wall_journal_over_rsync"]
    verdicts.add("restore <= 1.0x the `rsync -a` time", rw is not None and rw <= 1.0,
                 f"journal {main['journal']['restore']['wall_s']:.2f} s vs {copier} "
                 f"{main['legacy']['restore']['wall_s']:.2f} s = {rw:.2f}x")
    inproc = main["journal"].get("restore_in_process_s")
    if inproc is not None:
        lw = main["legacy"]["restore"]["wall_s"]
        verdicts.add("restore as `journal supervise` runs it (in-process): wall <= 1.0x the `rsync -a` time",
                     inproc <= lw, f"journal {inproc:.2f} s vs {copier} {lw:.2f} s = {inproc / lw:.2f}x")


def figures_table(main: dict, res: dict, systems: tuple[str, ...] = SYSTEMS, title: str = "main workload") -> list[str]:
    """Each system's initial checkpoint, mean active tick, idle tick and full restore."""
    out = [f"| {title} | system | bytes | objects | wall | CPU | peak RSS |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for what, key in (("initial checkpoint", "initial"), ("active tick (mean)", "tick"), ("idle tick", "idle"),
                      ("full restore", "restore")):
        for name in systems:
            f = main.get(name) and main[name][key]
            if not f:
                continue
            label = name
            if name == "legacy" and key == "restore":
                label = "rsync -a" if res["meta"]["tools"]["legacy_copy"] == "rsync" else "python copytree"
            objs = f"{f['objects']:.1f} (max {f['objects_max']})" if key == "tick" else (
                "" if f["objects"] is None else f"{f['objects']:.0f}")
            rss = "in-process" if name == "journal-supervise" else f"{f['maxrss_kib'] / KIB:.0f} MiB"
            out.append(f"| {what} | {label} | {fmt_bytes(f['bytes']) if key != 'restore' else ''} | "
                       f"{objs if key != 'restore' else ''} | {fmt_s(f['wall_s'])} | {fmt_s(f['cpu_s'])} | "
                       f"{rss} |")
    out.append("")
    return out


def per_tick_table(main: dict) -> list[str]:
    shown = [n for n in SYSTEMS if main.get(n)]
    out = ["| tick | " + " | ".join(f"{n} bytes | {n} objects | {n} wall" for n in shown) + " |",
           "|---|" + "---:|" * (3 * len(shown))]
    for t in range(len(main["journal"]["per_tick"])):
        cells = []
        for n in shown:
            f = main[n]["per_tick"][t]
            cells += [fmt_bytes(f["bytes"]), f"{f['objects']:.0f}", fmt_s(f["wall_s"])]
        out.append(f"| {t + 1} | " + " | ".join(cells) + " |")
    out.append("")
    return out

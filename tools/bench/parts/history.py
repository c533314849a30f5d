"""The history part (issue 46): a simulated week of 15-second ticks at full speed,
through the supervisor's own tick, and what the read commands cost over it.

The week (``--history-ticks``, 40,320) runs twice on the main workload (at
``--history-scale``), every tick a timer tick of ``journal supervise``'s own code in a
child process of its own (``ticker.py``), so that the supervisor's memory is measured
alone; with the retention docs/deploy.md recommends, a daily
``journal gc --keep-daily 7 --keep-last 20`` with its 24 h grace, and with none. Every
tick checkpoints: every ``--history-busy-every``th tick (12: every 3 minutes) the
agents of the main part are busy (transcripts, the session index, both databases),
and on the others one event is appended to the open Codex rollout. The clock
journal's commit and gc read is the simulated one (ticks ``--history-tick-seconds``
apart, ending a day before now), so retention and the grace count simulated days,
and a command run now finds every checkpoint in its past.

At each of ``--history-at`` checkpoints (1, 1,000, 10,000 and the last; the smoke
run: 1, 50 and 200) it reports the ticks since the one before (wall, CPU and bytes,
busy and quiet ticks apart), the supervisor's RSS after the tick and its peak since
the point before, the store's size and objects, the local state's size by part (as
``journal status`` counts it) beside the live trees', and the wall, CPU and peak RSS
of `verify`, `verify --full`, `log`, `ls`, `find`, `gc --dry-run` (the same policy)
and `restore --to`, each a child process as the CLI runs it. `verify --full` is stopped after ``--history-full-limit`` seconds.
"""

from __future__ import annotations

import os
import statistics
import time

from ..measure import KIB, MIB, copy_tree, figure, log, rmtree, run_child, tree_stats
from ..report import fmt_bytes, fmt_s
from ..systems import JournalSys
from ..ticker import DAY_S, SimClock, Ticker
from ..workload import LiveWorkload, generate_main
from .base import Part
from .gc import count_keys, scratch_dir

#: docs/deploy.md's gc schedule: once a day, with the default grace.
RETENTION = ("--keep-daily", "7", "--keep-last", "20")
GRACE_S = 86400
#: The policies the week runs under: the retention above, or none.
POLICIES = ("deploy", "none")
#: Ticks at most in the window a checkpoint's tick figures are the mean of.
WINDOW = 250
#: The read commands measured at each checkpoint (``find`` matches every transcript).
COMMANDS = {"verify": ["verify"], "verify --full": ["verify", "--full"], "log": ["log"], "ls": ["ls", "codex"],
            "find": ["find", "*.jsonl"], "gc --dry-run": ["gc", "--dry-run", *RETENTION]}
#: Issue 46's targets: the supervisor's peak RSS, how far its RSS may move from its
#: value at ``FLAT_FROM`` checkpoints on, and the local state's share of the live trees.
RSS_LIMIT = 100 * MIB
FLAT = 0.20
FLAT_FROM = 1000
STATE_SHARE = 0.25


class HistoryPart(Part):
    name = "history"

    def run(self, args, tools, work: str) -> dict:
        at = sorted({n for n in args.history_at if n <= args.history_ticks} | {args.history_ticks})
        scratch = scratch_dir(args, work, 8 * args.history_ticks)
        try:
            tpl = os.path.join(scratch, "tpl")
            info = generate_main(os.path.join(tpl, "local"), args.seed, args.history_scale)
            files, size = tree_stats(os.path.join(tpl, "local"))
            out: dict = {"ticks": args.history_ticks, "tick_seconds": args.history_tick_seconds,
                         "busy_every": args.history_busy_every, "scale": args.history_scale, "at": at,
                         "files": files, "bytes": size, "fs": fs_name(scratch), "policies": {}}
            for policy in args.history_policies:
                out["policies"][policy] = Week(args, tools, scratch, tpl, info, policy).run(at)
        finally:
            rmtree(scratch)
        return out

    def summarize(self, figures: dict, spread: dict) -> dict:
        return figures

    def targets(self, h: dict, ratios: dict, res: dict, verdicts) -> None:
        kept = h["policies"].get("deploy")
        if kept:
            last = kept["checkpoints"][-1]
            wall = last["commands"]["verify"]["wall_s"]
            verdicts.add(f"history, with retention: `verify` <= 2 s after {last['n']:,} checkpoints", wall <= 2.0,
                         f"{fmt_s(wall)} over the {last['manifests']:,} checkpoints the store holds")
        for policy, week in h["policies"].items():
            rss_verdict(policy, week["checkpoints"], verdicts)
            share_verdict(policy, week["checkpoints"], verdicts)

    def tables(self, h: dict, res: dict) -> list[str]:
        out = []
        for policy, week in h["policies"].items():
            out += week_tables(h, policy, week)
        return out


class Week:
    """One policy's week: a fresh copy of the trees, its own store, state and clock."""

    def __init__(self, args, tools, scratch: str, tpl: str, info: dict, policy: str):
        self.args, self.tools, self.policy = args, tools, policy
        self.root = os.path.join(scratch, policy)
        rmtree(self.root)
        os.makedirs(self.root)
        copy_tree(os.path.join(tpl, "local"), os.path.join(self.root, "local"))
        self.sys = JournalSys(tools, os.path.join(self.root, "local"), os.path.join(self.root, "store"),
                              os.path.join(self.root, "home"))
        self.sys.init()
        self.live = LiveWorkload(self.sys.local, info, args.seed)
        self.clock = SimClock(args.history_ticks, args.history_tick_seconds)
        self.ticks: list[tuple[bool, float, float, int]] = []    # (busy, wall, CPU, bytes) per tick
        self.gcs: list[dict] = []

    def run(self, at: list[int]) -> dict:
        import journal.gc.run as gc_run
        from journal.config import load_config
        from journal.store import open_store

        cfg = load_config(env=self.sys.env)
        store = open_store(cfg.store)
        saved = gc_run.time
        gc_run.time = self.clock   # tombstones carry the simulated time (the ticker's manifests too)
        out: dict = {"checkpoints": [], "gc_runs": self.gcs}
        per_day = round(DAY_S / self.args.history_tick_seconds)
        started = time.perf_counter()
        ticker = None
        try:
            ticker = Ticker(self.sys.env, self.args.history_ticks, self.args.history_tick_seconds, self.clock.start_ns)
            for t in range(self.args.history_ticks):
                self.clock.tick = t
                last = self._tick(t, ticker)
                if self.policy == "deploy" and (t + 1) % per_day == 0:
                    self._gc(store)
                if t + 1 in at:
                    point = self._measure(t + 1, cfg, at)
                    point["supervisor"] = {"rss_kib": last["rss_kib"], "peak_kib": last["hwm_kib"],
                                           "started_kib": ticker.started["rss_kib"]}
                    ticker.reset_peak()
                    out["checkpoints"].append(point)
                    log(f"history {self.policy}: {t + 1:,} checkpoints in {time.perf_counter() - started:.0f} s")
        finally:
            gc_run.time = saved
            if ticker is not None:
                ticker.close()
            self.live.close()
            rmtree(self.root)
        return out

    def _tick(self, t: int, ticker: Ticker) -> dict:
        """One tick: the agents' work (busy or quiet), then the supervisor's timer tick."""
        busy = t == 0 or t % self.args.history_busy_every == 0
        if t:
            (self.live.tick if busy else self.live.light_tick)(t)
        got = ticker.tick(t)
        if got["seq"] != t + 1:
            raise RuntimeError(f"history: tick {t + 1} made checkpoint {got['seq']}")
        self.ticks.append((busy, got["wall_s"], got["cpu_s"], got["bytes"]))
        return got

    def _gc(self, store) -> None:
        """The daily gc of docs/deploy.md, in this process, at the simulated time."""
        from journal.gc.retention import Policy
        from journal.gc.run import gc
        from journal.repository.repository import Repository

        t0 = time.perf_counter()
        plan, done = gc(Repository.open(store), Policy(keep_daily=7, keep_last=20), GRACE_S,
                        now_ns=self.clock.time_ns())
        self.gcs.append({"tick": self.clock.tick + 1, "wall_s": round(time.perf_counter() - t0, 3),
                         "kept": len(plan.kept), "expired": len(plan.expire), "deleted": done.deleted})

    def _measure(self, n: int, cfg, at: list[int]) -> dict:
        before = max([a for a in at if a < n], default=0)
        window = self.ticks[max(before, n - WINDOW):n]
        keys = count_keys(self.sys.store)
        out = {"n": n, "manifests": keys.get("manifests", 0), "store_objects": keys["total"],
               "store_bytes": dir_bytes(self.sys.store), "state_bytes": dir_bytes(cfg.state_dir),
               "state": state_parts(cfg.state_dir),
               "live_bytes": tree_stats(self.sys.local, skip_names=(os.path.basename(cfg.state_dir),))[1],
               "busy": tick_means([w for w in window if w[0]]), "quiet": tick_means([w for w in window if not w[0]]),
               "commands": {}}
        for name, cmd in COMMANDS.items():
            out["commands"][name] = self._command(name, cmd)
        dest = os.path.join(self.root, "restored")
        child = run_child(self.tools.journal + ["restore", "--to", dest, "--json"], env=self.sys.env)
        out["commands"]["restore"] = figure(child, restored_bytes=tree_stats(dest)[1])
        rmtree(dest)
        return out

    def _command(self, name: str, cmd: list[str]) -> dict:
        limit = self.args.history_full_limit if name == "verify --full" else None
        argv = self.tools.journal + cmd
        if limit:
            argv = ["timeout", str(limit)] + argv
        child = run_child(argv, env=self.sys.env, check=False)
        if child.rc not in (0, 124 if limit else 0):
            raise RuntimeError(f"history: journal {' '.join(cmd)} exited {child.rc}:\n{child.err[-2000:]}"
                               f"\n{child.out[-1000:]}")
        return figure(child, stopped=child.rc == 124 and limit is not None)


def tick_means(ticks: list[tuple[bool, float, float, int]]) -> dict | None:
    if not ticks:
        return None
    return {"ticks": len(ticks), "wall_s": statistics.mean(w for _, w, _, _ in ticks),
            "cpu_s": statistics.mean(c for _, _, c, _ in ticks), "bytes": statistics.mean(b for _, _, _, b in ticks)}


def dir_bytes(root: str) -> int:
    """Bytes of the regular files under ``root``."""
    total = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
    return total


def fs_name(path: str) -> str:
    return "tmpfs" if os.path.realpath(path).startswith("/dev/shm") else "the work disk"


def week_tables(h: dict, policy: str, week: dict) -> list[str]:
    """One policy's three tables: ticks, the supervisor and sizes; the local state by
    part; the read commands (markdown)."""
    title = ("with retention (daily `gc --keep-daily 7 --keep-last 20`, 24 h grace)" if policy == "deploy"
             else "without retention")
    head = f"history {title}, ticks {h['tick_seconds']:g} s apart on {h['fs']}"
    out = [f"| {head} | checkpoints kept | busy tick wall / CPU / bytes | quiet tick wall / CPU / bytes | "
           "supervisor RSS (peak) | store | store objects | local state (of the live trees) | live trees |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in week["checkpoints"]:
        out.append(f"| after {c['n']:,} | {c['manifests']:,} | {_ticks(c['busy'])} | {_ticks(c['quiet'])} | "
                   f"{_rss(c.get('supervisor'))} | {fmt_bytes(c['store_bytes'])} | {c['store_objects']:,} | "
                   f"{fmt_bytes(c['state_bytes'])} ({c['state_bytes'] / max(1, c['live_bytes']):.0%}) | "
                   f"{fmt_bytes(c['live_bytes'])} |")
    out.append("")
    out.append(f"| {head}: local state by part | " + " | ".join(f"`{p}`" for p in STATE_PARTS) + " | the rest |")
    out.append("|---|" + "---:|" * (len(STATE_PARTS) + 1))
    for c in week["checkpoints"]:
        parts = c["state"]
        rest = parts["bytes"] - sum(parts[f"{p.replace('-', '_')}_bytes"] for p in STATE_PARTS)
        out.append(f"| after {c['n']:,} | " + " | ".join(fmt_bytes(parts[f"{p.replace('-', '_')}_bytes"])
                                                     for p in STATE_PARTS) + f" | {fmt_bytes(rest)} |")
    out.append("")
    names = [*COMMANDS, "restore"]
    out.append(f"| {head}: wall / CPU (peak RSS) | " + " | ".join(f"`{n}`" for n in names) + " |")
    out.append("|---|" + "---:|" * len(names))
    for c in week["checkpoints"]:
        cells = []
        for name in names:
            f = c["commands"][name]
            cells.append(f"{'stopped at ' if f.get('stopped') else ''}{fmt_s(f['wall_s'])} / {fmt_s(f['cpu_s'])} "
                         f"({f['maxrss_kib'] / KIB:.0f} MiB)")
        out.append(f"| after {c['n']:,} | " + " | ".join(cells) + " |")
    out.append("")
    if week["gc_runs"]:
        out.append("daily gc: " + "; ".join(f"after {g['tick']:,}: kept {g['kept']}, expired {g['expired']:,}, "
                                            f"deleted {g['deleted']:,} in {fmt_s(g['wall_s'])}"
                                            for g in week["gc_runs"]))
        out.append("")
    return out


#: The parts of the local state ``journal status`` names (``LocalSize``), in its words.
STATE_PARTS = ("sqlite-base", "maps", "pages", "chunks", "spool")


def state_parts(state_dir: str) -> dict:
    """The local state's bytes, and by part, as ``journal status --json`` says them."""
    import msgspec
    from journal.supervise.status import local_size

    return msgspec.to_builtins(local_size(state_dir))


def rss_verdict(policy: str, points: list[dict], verdicts) -> None:
    """The supervisor's peak RSS at most ``RSS_LIMIT`` at every point, and its RSS between
    ticks within ``FLAT`` of its value at the first point from ``FLAT_FROM`` checkpoints
    (from the second point in a shorter week)."""
    sup = [(c["n"], c["supervisor"]) for c in points if c.get("supervisor")]
    if len(sup) < 2:
        return
    peak = max(s["peak_kib"] for _, s in sup) * KIB
    flat = [(n, s["rss_kib"]) for n, s in sup if n >= FLAT_FROM] or [(n, s["rss_kib"]) for n, s in sup[1:]]
    ref = flat[0][1]
    spread = max(abs(r - ref) for _, r in flat) / ref
    verdicts.add(f"history, {policy}: the supervisor's peak RSS <= {RSS_LIMIT // MIB} MiB, and its RSS within "
                 f"{FLAT:.0%} from {flat[0][0]:,} checkpoints on", peak <= RSS_LIMIT and spread <= FLAT,
                 f"peak {peak / MIB:.0f} MiB; RSS " + ", ".join(f"{r / KIB:.0f} MiB at {n:,}" for n, r in flat)
                 + f" ({spread:.0%} from the first)")


def share_verdict(policy: str, points: list[dict], verdicts) -> None:
    """The local state at most ``STATE_SHARE`` of the live trees at every point."""
    shares = [(c["n"], c["state_bytes"] / max(1, c["live_bytes"])) for c in points]
    worst = max(share for _, share in shares)
    verdicts.add(f"history, {policy}: the local state <= {STATE_SHARE:.0%} of the live trees", worst <= STATE_SHARE,
                 ", ".join(f"{share:.0%} at {n:,}" for n, share in shares))


def _rss(sup: dict | None) -> str:
    if not sup:
        return ""
    return f"{sup['rss_kib'] / KIB:.0f} MiB ({sup['peak_kib'] / KIB:.0f} MiB)"


def _ticks(f: dict | None) -> str:
    if not f:
        return ""
    return f"{fmt_s(f['wall_s'])} / {fmt_s(f['cpu_s'])} / {fmt_bytes(f['bytes'])}"


"""The link part: time to durable over a bucket-like link (issue 27).

Local-disk walls hide what a user of a bucket feels. Here every system's store (journal's
store, the legacy design's destination, restic's repository) is on a FUSE mount of a
local directory throttled as a link to a bucket is (``linkfs.py``: 20 MB/s shared,
30 ms per request, ``--link-rate`` and ``--link-latency``), with hf-mount's streaming
writes (a file is uploaded when it is closed). On the main workload, interleaved:
each system's initial checkpoint, ``--ticks`` active ticks and a full restore. Each
command returns once what it wrote is uploaded, so its wall is the time from the start
of the tick until its data is durable in the bucket (and for a restore, until the
tree is back). The bench's own bookkeeping (listing what each tick uploaded) pays no
link time: the mount serves the bench's process for free.

Beside each figure, the link's floor: the time its objects and bytes take at least,
``objects x latency + bytes / rate`` one request after another, and ``latency + bytes /
rate`` all at once. A checkpoint's objects and bytes are those it uploaded; a
restore's, the requests and bytes the mount served it (``linkfs.py``'s counters).
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from ..measure import KIB, log, rmtree, rotate, settle
from ..systems import SupervisedJournal
from ..report import fmt_bytes, fmt_s, judge_ratio, med, med_fig, ratio, tick_fig
from .base import Part
from .main import fresh_run, main_systems, main_template

LINKFS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "linkfs.py")
SYSTEMS = ("journal", "journal-supervise", "legacy", "restic")


def fuse_missing() -> str | None:
    """Why the throttled mount cannot run here; None when it can."""
    if not os.path.exists("/dev/fuse") or shutil.which("fusermount") is None:
        return "needs /dev/fuse and fusermount"
    if ctypes.util.find_library("fuse") is None:
        return "needs libfuse 2"
    try:
        import mfusepy  # noqa: F401
    except ImportError:
        return "needs mfusepy"
    return None


class Mount:
    """``linkfs.py`` serving ``backing`` at ``path`` until ``close``."""

    def __init__(self, backing: str, path: str, rate: float, latency: float):
        os.makedirs(backing, exist_ok=True)
        os.makedirs(path, exist_ok=True)
        self.path = path
        self.proc = subprocess.Popen([sys.executable, LINKFS, backing, path, str(rate), str(latency), str(os.getpid())],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while not os.path.ismount(path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"linkfs did not mount {path}")
            time.sleep(0.05)

    def stats(self) -> dict:
        """What the link carried so far: ``requests`` and ``bytes`` (``linkfs.STATS``)."""
        with open(os.path.join(self.path, ".linkfs-stats"), "rb") as fh:
            return json.loads(fh.read())

    def close(self) -> None:
        subprocess.run(["fusermount", "-u", "-z", self.path], capture_output=True)
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


class LinkPart(Part):
    name = "link"

    def run(self, args, tools, work: str) -> dict:
        missing = fuse_missing()
        if missing:
            log(f"link: skipped ({missing})")
            return {"skipped": missing}
        tpl, local_tpl, info, _ = main_template(args, work, self.name)
        out: dict = {"rate_bytes_s": args.link_rate * 1e6, "latency_s": args.link_latency / 1000, "runs": []}
        for r in range(args.link_runs):
            out["runs"].append(self._run(args, tools, work, local_tpl, info, r, out))
        rmtree(tpl)
        return out

    def _run(self, args, tools, work: str, local_tpl: str, info: dict, r: int, out: dict) -> dict:
        rd, local, live = fresh_run(args, work, local_tpl, info, self.name, r)
        mount = Mount(os.path.join(rd, "bucket"), os.path.join(rd, "mnt"), out["rate_bytes_s"], out["latency_s"])
        systems = main_systems(tools, work, local, rd, mount.path)
        # journal as `journal supervise` ticks (in process), on a store of its own on the mount
        systems.insert(1, SupervisedJournal(tools, local, os.path.join(mount.path, "journal-supervise"),
                                            os.path.join(rd, "home-supervise"),
                                            state_dir=os.path.join(rd, "state-supervise")))
        try:
            run = self._ticks(args, systems, live, rd, r, Floor(mount, out["rate_bytes_s"], out["latency_s"]))
        finally:
            mount.close()
        log_run(run, r, args.link_runs)
        rmtree(rd)
        return run

    @staticmethod
    def _ticks(args, systems: list, live, rd: str, r: int, floor: "Floor") -> dict:
        run: dict = {s.name: {"initial": None, "ticks": [], "restore": None} for s in systems}
        for s in rotate(systems, r):
            run[s.name]["initial"] = floor.measure(s.tick)
        for t in range(args.ticks):
            settle()
            live.tick(t)
            settle()
            for s in rotate(systems, r + t + 1):
                run[s.name]["ticks"].append(floor.measure(s.tick))
        live.close()
        for s in rotate([s for s in systems if not isinstance(s, SupervisedJournal)], r):
            dest = os.path.join(rd, f"restore-{s.name}")
            run[s.name]["restore"] = floor.measure(lambda: s.restore(dest), served=True)
            rmtree(dest)
        return run

    def summarize(self, figures: dict, spread: dict) -> dict:
        if figures.get("skipped"):
            return {"skipped": figures["skipped"]}
        runs = figures["runs"]
        sm: dict = {"rate_bytes_s": figures["rate_bytes_s"], "latency_s": figures["latency_s"]}
        for name in SYSTEMS:
            if all(name in r for r in runs):
                sm[name] = {"initial": floor_fig([r[name]["initial"] for r in runs]),
                            "tick": floor_fig([_tick_floors(r[name]["ticks"]) for r in runs if r[name]["ticks"]]),
                            "restore": floor_fig([r[name]["restore"] for r in runs if r[name]["restore"]])}
        for other in ("legacy", "restic"):
            for what in ("tick", "restore"):
                spread[f"link_{what}_wall_journal_over_{other}"] = [
                    ratio(_wall(r, "journal", what), _wall(r, other, what)) for r in runs]
        return sm

    def targets(self, sm: dict, ratios: dict, res: dict, verdicts) -> None:
        """Issue 46's goals: an active tick durable within 2x its link floor (one request
        at a time); a full restore within 0.7x restic's time and 2x its bytes' floor."""
        journal = None if sm.get("skipped") else sm.get("journal")
        if not journal:
            return
        tick, restore = journal["tick"], journal["restore"]
        verdicts.add("over the link: an active tick durable within 2x the link's floor",
                     tick["wall_s"] <= 2 * tick["floor_one_s"],
                     f"{fmt_s(tick['wall_s'])} vs a floor of {fmt_s(tick['floor_one_s'])} "
                     f"({tick['objects']:.0f} objects one at a time) = {tick['wall_s'] / tick['floor_one_s']:.2f}x")
        sup = (sm.get("journal-supervise") or {}).get("tick")
        if sup:
            verdicts.add("over the link: an active tick as `journal supervise` runs it, durable within 2x the floor",
                         sup["wall_s"] <= 2 * sup["floor_one_s"],
                         f"{fmt_s(sup['wall_s'])} vs a floor of {fmt_s(sup['floor_one_s'])} "
                         f"({sup['objects']:.0f} objects one at a time) = {sup['wall_s'] / sup['floor_one_s']:.2f}x")
        if sm.get("restic"):
            judge_ratio(verdicts, "over the link: a full restore <= 0.7x restic's", res,
                        "link_restore_wall_journal_over_restic", 0.7, restore["wall_s"],
                        sm["restic"]["restore"]["wall_s"], other="restic")
        verdicts.add("over the link: a full restore within 2x the floor of its bytes",
                     restore["wall_s"] <= 2 * restore["floor_all_s"],
                     f"{fmt_s(restore['wall_s'])} vs a floor of {fmt_s(restore['floor_all_s'])} "
                     f"({fmt_bytes(restore['link_bytes'])} at once) = "
                     f"{restore['wall_s'] / restore['floor_all_s']:.2f}x")

    def tables(self, sm: dict, res: dict) -> list[str]:
        if sm.get("skipped"):
            return [f"link part skipped: {sm['skipped']}", ""]
        out = [f"| over a {sm['rate_bytes_s'] / 1e6:.0f} MB/s link, {sm['latency_s'] * 1000:.0f} ms per request "
               "| system | bytes | objects | time to durable | link floor: one at a time / at once | over the floor "
               "| CPU |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for what, key in (("initial checkpoint", "initial"), ("active tick (mean)", "tick"),
                          ("full restore", "restore")):
            for name in SYSTEMS:
                f = sm.get(name) and sm[name][key]
                if not f:
                    continue
                label = "rsync -a" if name == "legacy" and key == "restore" else name
                amount = ((f"{fmt_bytes(f['link_bytes'])} read", f"{f['link_requests']:.0f} requests")
                          if key == "restore" else (fmt_bytes(f["bytes"]), f"{f['objects']:.0f}"))
                out.append(f"| {what} | {label} | {amount[0]} | {amount[1]} | {fmt_s(f['wall_s'])} | "
                           f"{_floors(f)} | {_over(f)} | {fmt_s(f['cpu_s'])} |")
        out.append("")
        return out


class Floor:
    """Each figure's link floor (see the module docstring), from the mount's counters."""

    def __init__(self, mount: Mount, rate: float, latency: float):
        self.mount, self.rate, self.latency = mount, rate, latency

    def measure(self, command, served: bool = False) -> dict:
        """``command()``'s figure, with the link's floor under it: from the objects and
        bytes it uploaded, or (``served``: a restore) the requests and bytes served."""
        before = self.mount.stats()
        fig = command()
        after = self.mount.stats()
        fig["link_requests"] = after["requests"] - before["requests"]
        fig["link_bytes"] = after["bytes"] - before["bytes"]
        objects, nbytes = ((fig["link_requests"], fig["link_bytes"]) if served else (fig["objects"], fig["bytes"]))
        fig["floor_one_s"] = objects * self.latency + nbytes / self.rate
        fig["floor_all_s"] = (self.latency if objects else 0) + nbytes / self.rate
        return fig


FLOOR_KEYS = ("floor_one_s", "floor_all_s", "link_requests", "link_bytes")


def floor_fig(figs: list[dict]) -> dict | None:
    """``med_fig`` of ``figs``, with the medians of their floors and link counters."""
    out = med_fig(figs)
    if out is not None:
        out.update({k: med(f.get(k) for f in figs if f) for k in FLOOR_KEYS})
    return out


def _tick_floors(ticks: list[dict]) -> dict:
    """``tick_fig`` of one run's ticks, with the means of their floors and link counters."""
    out = tick_fig(ticks)
    out.update({k: statistics.mean(f[k] for f in ticks) for k in FLOOR_KEYS})
    return out


def _floors(f: dict) -> str:
    return f"{fmt_s(f['floor_one_s'])} / {fmt_s(f['floor_all_s'])}" if f.get("floor_one_s") is not None else ""


def _over(f: dict) -> str:
    """Time to durable over the floor: against one request at a time (a restore: all at once)."""
    floor = f.get("floor_all_s") if f.get("objects") is None else f.get("floor_one_s")
    return f"{f['wall_s'] / floor:.2f}x" if floor else ""


def _wall(run: dict, name: str, what: str) -> float | None:
    if name not in run:
        return None
    if what == "tick":
        return statistics.mean(f["wall_s"] for f in run[name]["ticks"])
    return run[name][what]["wall_s"]


def log_run(run: dict, r: int, runs: int) -> None:
    parts = []
    for name in SYSTEMS:
        if name in run:
            tick = statistics.mean(f["wall_s"] for f in run[name]["ticks"])
            restore = run[name]["restore"]
            parts.append(f"{name} tick {tick:.2f}s ({statistics.mean(f['bytes'] for f in run[name]['ticks']) / KIB:.0f}"
                         f" KiB)" + (f", restore {restore['wall_s']:.2f}s" if restore else ""))
    log(f"link run {r + 1}/{runs}, time to durable: " + "; ".join(parts))

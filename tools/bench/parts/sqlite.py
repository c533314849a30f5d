"""The sqlite part: a 256 MiB opencode-like database (``--db-mib``) after 100 small
transactions with random keys (``--db-txns``), journal against the legacy design."""

from __future__ import annotations

import os
import random
import sqlite3
import time

from ..measure import KIB, MIB, copy_tree, log, rmtree, rotate, settle
from ..report import fmt_bytes, fmt_s, judge_ratio, med_fig, ratio
from ..systems import JournalSys, LegacySys
from ..workload import OpencodeDB, new_uuid, text_for
from .base import Part

DB_REL = "opencode-share/opencode.db"


class SqlitePart(Part):
    name = "sqlite"

    def run(self, args, tools, work: str) -> dict:
        tpl = os.path.join(work, "tpl-sqlite")
        rmtree(tpl)
        t0 = time.perf_counter()
        text = text_for(args.seed)
        info = OpencodeDB(text).create(os.path.join(tpl, DB_REL), args.db_mib * MIB,
                                       random.Random(f"{args.seed}:bigdb"))
        size = os.path.getsize(os.path.join(tpl, DB_REL))
        log(f"sqlite: generated a {size / MIB:.0f} MiB database in {time.perf_counter() - t0:.1f}s")
        out: dict = {"db_bytes": size, "transactions": args.db_txns, "runs": []}
        for r in range(args.db_runs):
            out["runs"].append(self._run(args, tools, work, tpl, info, r))
        rmtree(tpl)
        return out

    def _run(self, args, tools, work: str, tpl: str, info: dict, r: int) -> dict:
        rd = os.path.join(work, f"sqlite-run{r}")
        rmtree(rd)
        os.makedirs(rd)
        local = os.path.join(rd, "local")
        copy_tree(tpl, local)
        con = sqlite3.connect(os.path.join(local, DB_REL), isolation_level=None)
        systems = [JournalSys(tools, local, os.path.join(rd, "store"), os.path.join(rd, "home")),
                   LegacySys(tools, work, local, os.path.join(rd, "legacy-dest"), os.path.join(rd, "legacy-state"),
                             ["opencode-share"], [DB_REL])]
        run: dict = {"journal": {}, "legacy": {}}
        for s in rotate(systems, r):
            run[s.name]["initial"] = s.tick()
        settle()
        # Small transactions with random keys: insert a part under a new random UUID,
        # and update a random existing part (by random rowid).
        rng = random.Random(f"{args.seed}:txns")
        oc = OpencodeDB(text_for(args.seed))
        nrows = con.execute("SELECT max(rowid) FROM part").fetchone()[0]
        for i in range(args.db_txns):
            con.execute("BEGIN")
            oc.add_part(con, rng, info["session"], new_uuid(rng), info["now"] + i, size=rng.randint(200, 1200))
            con.execute("UPDATE part SET time_created = time_created + 1 WHERE rowid = ?", (rng.randint(1, nrows),))
            con.execute("COMMIT")
        settle()
        for s in rotate(systems, r + 1):
            run[s.name]["tick"] = s.tick()
        con.close()
        log(f"sqlite run {r + 1}/{args.db_runs}: after {args.db_txns} transactions journal uploaded "
            f"{run['journal']['tick']['bytes'] / KIB:.0f} KiB in {run['journal']['tick']['wall_s']:.2f}s, legacy "
            f"{run['legacy']['tick']['bytes'] / MIB:.1f} MiB in {run['legacy']['tick']['wall_s']:.2f}s")
        rmtree(rd)
        return run

    def summarize(self, sq: dict, spread: dict) -> dict:
        ss = {"db_bytes": sq["db_bytes"], "transactions": sq["transactions"]}
        for name in ("journal", "legacy"):
            ss[name] = {"initial": med_fig([r[name]["initial"] for r in sq["runs"]]),
                        "tick": med_fig([r[name]["tick"] for r in sq["runs"]])}
        for k in ("bytes", "wall_s", "cpu_s"):
            spread[f"sqlite_tick_{k.split('_')[0]}_journal_over_legacy"] = [
                ratio(r["journal"]["tick"][k], r["legacy"]["tick"][k]) for r in sq["runs"]]
        return ss

    def targets(self, sq: dict, ratios: dict, res: dict, verdicts) -> None:
        judge_ratio(verdicts, f"a {sq['db_bytes'] / MIB:.0f} MiB database after {sq['transactions']} transactions: "
                              "tick wall <= legacy", res, "sqlite_tick_wall_journal_over_legacy", 1.0,
                    sq["journal"]["tick"]["wall_s"], sq["legacy"]["tick"]["wall_s"])

    def tables(self, sq: dict, res: dict) -> list[str]:
        out = [f"| {sq['db_bytes'] / MIB:.0f} MiB SQLite database | system | bytes | objects | wall | CPU |",
               "|---|---|---:|---:|---:|---:|"]
        for what, key in (("initial checkpoint", "initial"), (f"after {sq['transactions']} transactions", "tick")):
            for name in ("journal", "legacy"):
                f = sq[name][key]
                out.append(f"| {what} | {name} | {fmt_bytes(f['bytes'])} | {f['objects']:.0f} | {fmt_s(f['wall_s'])} | "
                           f"{fmt_s(f['cpu_s'])} |")
        out.append("")
        return out

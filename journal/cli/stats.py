"""``journal stats``: what the store holds and what it costs (``browse/stats.py``), and
what the local state takes on this disk (``journal status``'s ``local_size``)."""

from __future__ import annotations

import sys

import click

from .app import EXIT_FALLBACK, CliReporter, common, echo, emit_json, main, open_context
from .output import count, number

#: Days of growth the text shows (``--json`` gives every day).
DAYS_SHOWN = 14


@main.command()
@common
@click.option("-n", "--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="List the N largest files of the newest checkpoint.")
def stats(config_path, store_url, as_json, top):
    """Show the store's size: per tree and in total, logical against stored, growth.

    For each tree and in total: what a restore writes (the newest checkpoint's files
    and bytes), the bytes of every checkpoint added up, the distinct objects and
    bytes stored, and the dedup and compression ratios. Then the bytes each day's
    checkpoints added, the largest files, the local state's size on this disk (base
    copies, spool, chunk copies, caches) and the store requests made. Reads only the
    store's listing, its manifests and index pages, never a data pack: a SQLite
    snapshot's pages are counted with the packs, not with its tree. Exits 3 when a
    checkpoint or tree could not be read (its numbers are left out).

    Example:

        journal stats --top 5 --json
    """
    from ..browse.stats import store_stats
    from ..repository.lineage import open_existing
    from ..supervise.status import local_size

    cfg, store = open_context(config_path, store_url)
    result = store_stats(open_existing(store, cfg.state_dir, key=cfg.key), top,
                         CliReporter("reading", quiet=as_json))
    local = local_size(cfg.state_dir)
    if as_json:
        import msgspec

        emit_json({**msgspec.structs.asdict(result), "state_dir": cfg.state_dir, "local_state": local})
    else:
        for line in stats_lines(result) + [local_line(cfg.state_dir, local)]:
            echo(line)
    if result.skipped:
        sys.exit(EXIT_FALLBACK)


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}x"


def stats_lines(r) -> list[str]:
    """``journal stats`` as text, from a ``StoreStats``."""
    lines = [f"store: {r.store}: {count(r.objects, 'object')}, {count(r.bytes, 'byte')} ({count(r.packs, 'pack')} "
             f"of {count(r.pack_bytes, 'byte')}, {count(r.manifests, 'manifest')} of {count(r.manifest_bytes, 'byte')}, "
             f"{number(r.other_objects)} other of {count(r.other_bytes, 'byte')})"]
    if not r.checkpoints:
        return lines + ["checkpoints: none"] + request_lines(r)
    forks = f" ({count(r.forks, 'fork')})" if r.forks else ""
    lines.append(f"checkpoints: {number(r.checkpoints)}{forks}, {r.first_time} to {r.last_time}; the newest is "
                 f"{'-' if r.newest is None else r.newest}")
    lines.append(f"{'tree':12} {'files':>9} {'restore size':>15} {'history':>17} {'objects':>9} {'stored':>15} "
                 f"{'dedup':>7} {'compression':>11}")
    for t in (*r.trees, r.total):
        lines.append(f"{t.name:12} {number(t.files):>9} {number(t.logical_bytes):>15} {number(t.history_bytes):>17} "
                     f"{number(t.objects):>9} {number(t.stored_bytes):>15} {ratio(t.dedup):>7} "
                     f"{ratio(t.compression):>11}")
    total = r.total
    lines.append(f"history: {count(total.history_bytes, 'byte')} over {count(r.checkpoints, 'checkpoint')}; its "
                 f"files and transcripts are {count(total.data_bytes, 'byte')} of distinct content (dedup "
                 f"{ratio(total.dedup)}), stored in {count(total.data_stored_bytes, 'byte')} (compression "
                 f"{ratio(total.compression)})")
    lines.append(f"unattributed: {count(r.unattributed_bytes, 'byte')} of the packs (SQLite snapshots' pages, "
                 f"{number(total.database_bytes)} bytes of the history; records only expired checkpoints named; "
                 "packs no checkpoint names)")
    lines += growth_lines(r)
    if r.largest:
        lines.append(f"largest files (checkpoint {r.newest}):")
        lines += [f"  {number(f.size):>15}  {f.tree}/{f.path} ({f.kind})" for f in r.largest]
    return lines + request_lines(r)


def growth_lines(r) -> list[str]:
    days = r.growth
    lines = [f"growth: {count(round(r.bytes_per_day), 'byte')} a day on average over {count(r.days, 'day')} "
             f"({days[0].date} to {days[-1].date}, UTC)"]
    if len(days) > DAYS_SHOWN:
        lines.append(f"  ({count(len(days) - DAYS_SHOWN, 'earlier day')} in --json)")
    lines += [f"  {d.date}  {count(d.checkpoints, 'checkpoint'):>16}  {count(d.added_bytes, 'byte'):>20} added  "
              f"{count(d.added_objects, 'object')}" for d in days[-DAYS_SHOWN:]]
    return lines


def request_lines(r) -> list[str]:
    q = r.requests
    return [f"requests: {count(q.lists, 'listing')}, {number(q.manifest_gets)} manifest GETs, "
            f"{number(q.index_gets)} index-page GETs, {number(q.other_gets + q.heads)} other ({count(q.bytes_read, 'byte')} "
            "read); no data pack read"]


def local_line(state_dir: str, size) -> str:
    """The local state's size, as ``journal status`` counts it (a ``LocalSize``)."""
    from .render import share_of_live

    return (f"local state ({state_dir}): {count(size.bytes, 'byte')} (sqlite-base {number(size.sqlite_base)}, spool "
            f"{number(size.spool)}, chunks {number(size.chunks)}, maps {number(size.maps)}, pages "
            f"{number(size.pages)})" + share_of_live(size))

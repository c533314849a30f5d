"""``journal mount DIR``: every checkpoint as a read-only file system, until unmounted
(``journal/browse/mount/``)."""

from __future__ import annotations

import click

from .app import CliReporter, common, echo, main, open_context


@main.command()
@common
@click.option("--cache-size", metavar="MIB", type=click.IntRange(16, 1 << 20), default=64, show_default=True,
              help="Memory for file bytes read from the store (verified), in MiB; the least recently read go "
                   "first.")
@click.option("--refresh", metavar="DURATION", default="30s", show_default=True,
              help="How often the list of checkpoints is read again: new checkpoints appear within this long "
                   "(90, 30s, 5m).")
@click.argument("directory", metavar="DIR")
def mount(config_path, store_url, as_json, cache_size, refresh, directory):
    """Browse every checkpoint as a read-only file system at DIR, until unmounted.

    DIR/seq/N/TREE/PATH is checkpoint N (forks too); DIR/latest links to the newest;
    DIR/time/ holds one link per main-line checkpoint, named by the UTC time it was
    made, and any other time or duration ago (DIR/time/2026-03-01T18:00, DIR/time/2h)
    links to the newest checkpoint at or before it; DIR/forks/ links to the forks. A database
    reads as a plain SQLite file: rebuilt and checked once, when first opened, into
    a private temp file in $TMPDIR. Reads only what is listed or read, verifies every
    byte, and keeps at most --cache-size of file bytes in memory. A damaged file reads
    as an I/O error (EIO), with a warning; the rest reads on. Runs in the foreground:
    Ctrl-C, SIGTERM or `fusermount -u DIR` unmounts it. Needs FUSE (/dev/fuse, libfuse)
    and pip install 'journal[mount]'. --json changes only how an error is reported.

    Example:

        journal mount /mnt/journal &

        sqlite3 /mnt/journal/latest/opencode/opencode.db .tables
    """
    from ..browse.mount import Limits, check_mountpoint, serve
    from ..config import parse_duration
    from ..paths import shown
    from ..repository.lineage import open_existing

    seconds = parse_duration(refresh, "--refresh")
    check_mountpoint(directory)   # bad input first, before the store is opened
    cfg, store = open_context(config_path, store_url)
    repo = open_existing(store, cfg.state_dir, key=cfg.key)

    def ready() -> None:
        echo(f"mounted {store.location} read-only at {shown(directory)}; unmount with Ctrl-C or "
             f"`fusermount -u {shown(directory)}`")

    serve(repo, directory, limits=Limits(cache_bytes=cache_size << 20), refresh=seconds,
          reporter=CliReporter(), ready=ready)

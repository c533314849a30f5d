"""``journal copy``: checkpoints and the input journal copied to a second store (design
§23). ``journal supervise --copy-to URL`` runs it on a timer (``supervise/copying.py``)."""

from __future__ import annotations

import os
import sys

import click

from .app import CliReporter, common, durable_url, echo, emit_json, main, open_context
from ..config import key_source, KeySource
from ..errors import ConfigError

TO_KEY_FILE_ENV = "JOURNAL_TO_KEY_FILE"
TO_PASSPHRASE_ENV = "JOURNAL_TO_PASSPHRASE"
PLAIN_HINT = (f"pass --decrypt-to-plain to mean it, or set the target's key (--to-key-file PATH, ${TO_KEY_FILE_ENV} "
              f"or ${TO_PASSPHRASE_ENV})")


@main.command("copy")
@common
@click.option("--to", "to_url", metavar="URL", required=True,
              help="The target store: a path or URL, as --store takes it; created when absent or empty.")
@click.option("--to-key-file", metavar="PATH",
              help=f"The target's key file (else ${TO_KEY_FILE_ENV}, or a passphrase in ${TO_PASSPHRASE_ENV}): an "
                   "encrypted target opens with it, and a new target is created encrypted with it.")
@click.option("--decrypt-to-plain", is_flag=True,
              help="Copy an encrypted store to a plain one: every checkpoint is then written there in the clear.")
@click.option("--dry-run", is_flag=True, help="Say what would be copied; write nothing.")
def copy_command(config_path, store_url, as_json, to_url, to_key_file, decrypt_to_plain, dry_run):
    """Copy checkpoints and inputs to a second store, incrementally.

    Every checkpoint of the store (--store, $JOURNAL_STORE) that the target
    lacks is copied, with its sequence number, oldest first: every object it
    needs (verified as it is read), then its manifest, last. The input
    journal follows. A copy killed at any point is completed by the next one,
    which copies nothing twice. The target is a replica: a target holding a
    checkpoint the source did not write there (a writer of its own) is
    refused (exit 1). Between encrypted stores with different keys, or
    between an encrypted store and a plain one, every object is written
    again under the target's keys (re-sealed); an encrypted store is copied
    to a plain one only with --decrypt-to-plain (else exit 2). A checkpoint
    that needs a damaged source object is not copied and is named (exit 1).
    Progress goes to stderr; --json prints the summary (checkpoints, objects
    and bytes copied and already there, inputs). `journal supervise
    --copy-to URL` runs it on a timer.

    Example:

        journal copy --to s3://dr-bucket/journal
    """
    from ..copy.errors import PlainTarget
    from ..copy.run import copy_store
    from ..paths import COPY_SPOOL_DIR
    from ..repository.lineage import open_existing
    from ..store import open_store

    cfg, store = open_context(config_path, store_url)
    key = target_key(to_key_file)
    source = open_existing(store, cfg.state_dir, key=cfg.key)
    try:
        result = copy_store(source, open_store(durable_url(to_url)), key=key, decrypt_to_plain=decrypt_to_plain,
                            dry_run=dry_run, spool_dir=os.path.join(cfg.state_dir, COPY_SPOOL_DIR),
                            reporter=CliReporter())
    except PlainTarget as err:
        raise err.with_hint(PLAIN_HINT) from None
    if as_json:
        emit_json(result)
    else:
        for line in summary_lines(result):
            echo(line)
    if not result.complete:
        sys.exit(1)


def target_key(key_file: str | None) -> KeySource | None:
    """The target's key: ``--to-key-file``, else ``$JOURNAL_TO_KEY_FILE`` or
    ``$JOURNAL_TO_PASSPHRASE`` (not two of them); None when none is set."""
    if key_file and (os.environ.get(TO_KEY_FILE_ENV) or os.environ.get(TO_PASSPHRASE_ENV)):
        raise ConfigError(f"copy: --to-key-file and ${TO_KEY_FILE_ENV} or ${TO_PASSPHRASE_ENV} are both set; "
                          "give the target's key once")
    if key_file:
        return KeySource(file=os.path.abspath(os.path.expanduser(key_file)), origin="--to-key-file")
    return key_source(os.environ, file_env=TO_KEY_FILE_ENV, passphrase_env=TO_PASSPHRASE_ENV)


def summary_lines(result) -> list[str]:
    """What ``journal copy`` prints: what it copied (or would), then what it refused."""
    verb = "would copy" if result.dry_run else "copied"
    seqs = result.checkpoints
    span = f" ({seqs[0]} to {seqs[-1]})" if len(seqs) > 1 else f" ({seqs[0]})" if seqs else ""
    made = " (created)" if result.created else ""
    lines = [f"{verb} {len(seqs)} checkpoint(s){span} to {result.target}{made}"
             f"{', re-encoded for it' if result.mode == 'reseal' else ''}: {result.objects} object(s), "
             f"{result.bytes:,} bytes; {result.skipped_objects} object(s), {result.skipped_bytes:,} bytes already "
             f"there; {result.inputs} input-journal object(s)"]
    lines += [f"not copied: {why}" for why in result.refused]
    return lines

"""``journal key``: the keys of an encrypted store (design §22)."""

from __future__ import annotations

import os

import click

from .app import common, echo, emit_json, main, open_context
from ..config import NEW_PASSPHRASE_ENV, KeySource
from ..errors import ConfigError

NEW_KEY_HELP = ("The new key: a key file (32 random bytes, mode 0600, are written there when it is absent); "
                f"without it, ${NEW_PASSPHRASE_ENV} holds a new passphrase.")


@main.group("key")
def key_group():
    """The keys of an encrypted store: each opens the same store.

    A random master key encrypts the store; each key (a key file or a
    passphrase) wraps it, so keys are added, removed and replaced without
    rewriting any data. Every command opens the store with the key set now
    ($JOURNAL_KEY_FILE or $JOURNAL_PASSPHRASE). Key changes run at once from
    several places are safe. No key change replaces the master key: after a
    key leaks, move to a new store (docs/design.md §22).

    Example:

        JOURNAL_KEY_FILE=~/old.key journal key rotate --new-key-file ~/new.key
    """


def _open(config_path, store_url, op: str):
    from ..repository.repository import Repository

    cfg, store = open_context(config_path, store_url, writes=op != "key list")
    repo = Repository.open(store, key=cfg.key)
    if not repo.codec.encrypted:
        raise ConfigError(f"{op}: {cfg.store} is not encrypted: only an encrypted store has keys "
                          "(`journal init --encrypt` starts one)")
    return cfg, repo


def new_key(op: str, new_key_file: str | None) -> tuple[KeySource, bool]:
    """The new key of ``key add`` and ``key rotate``, and whether its key file was created now."""
    from ..crypto.keys import create_key_file

    if new_key_file and os.environ.get(NEW_PASSPHRASE_ENV):
        raise ConfigError(f"{op}: both --new-key-file and ${NEW_PASSPHRASE_ENV} are set; give the new key once")
    if new_key_file:
        path = os.path.abspath(os.path.expanduser(new_key_file))
        return KeySource(file=path, origin="--new-key-file"), create_key_file(path)
    if os.environ.get(NEW_PASSPHRASE_ENV):
        return KeySource(env=NEW_PASSPHRASE_ENV), False
    raise ConfigError(f"{op}: give the new key: --new-key-file PATH (created when absent), or "
                      f"${NEW_PASSPHRASE_ENV}")


def keep_copy_note(source: KeySource) -> str:
    return (f"created key file {source.file}: keep a copy of it outside this machine (a secret store, a password "
            "manager): without a key nothing can read the store")


@key_group.command("list")
@common
def key_list(config_path, store_url, as_json):
    """List the store's keys; * marks the one this command opened it with.

    Example:

        journal key list
    """
    from ..crypto.manage import list_keys

    _, repo = _open(config_path, store_url, "key list")
    keys = list_keys(repo.store, repo.store_id, repo.key_id)
    if as_json:
        emit_json(keys)
        return
    for k in keys:
        echo(f"{'*' if k.current else ' '} {k.id}  {k.kind:10}  {k.created or '-'}")


@key_group.command("add")
@common
@click.option("--new-key-file", metavar="PATH", help=NEW_KEY_HELP)
def key_add(config_path, store_url, as_json, new_key_file):
    """Add a key: the new key opens the store too.

    Example:

        journal key add --new-key-file /run/secrets/journal-2.key
    """
    from ..crypto.manage import add_key
    from ..repository.repository import utc_now

    _, repo = _open(config_path, store_url, "key add")
    source, created = new_key("key add", new_key_file)
    kid = add_key(repo.store, repo.store_id, repo.codec, repo.key_id, source, utc_now())
    if as_json:
        emit_json({"added": kid, "key": source.describe(), "key_file_created": created})
        return
    if created:
        echo(keep_copy_note(source), err=True)
    echo(f"added key {kid} ({source.describe()})")


@key_group.command("remove")
@common
@click.argument("key_id")
def key_remove(config_path, store_url, as_json, key_id):
    """Remove a key (by its id, or a unique start of it); never the key this
    command opened the store with, nor the last one.

    Example:

        journal key remove 3f2a
    """
    from ..crypto.manage import remove_key

    _, repo = _open(config_path, store_url, "key remove")
    kid = remove_key(repo.store, repo.store_id, repo.codec, repo.key_id, key_id)
    if as_json:
        emit_json({"removed": kid})
        return
    echo(f"removed key {kid}")


@key_group.command("rotate")
@common
@click.option("--new-key-file", metavar="PATH", help=NEW_KEY_HELP)
def key_rotate(config_path, store_url, as_json, new_key_file):
    """Replace the key this command opened the store with by a new one, in one
    step (the new key is written and checked first); no data is rewritten, and
    the master key stays the same. A supervisor running here goes on with the key
    it holds, but its environment still names the old one: a warning says so,
    and it must be given the new key before it restarts.

    Example:

        JOURNAL_KEY_FILE=~/old.key journal key rotate --new-key-file ~/new.key
    """
    from ..crypto.manage import rotate_key
    from ..repository.repository import utc_now

    cfg, repo = _open(config_path, store_url, "key rotate")
    source, created = new_key("key rotate", new_key_file)
    kid = rotate_key(repo.store, repo.store_id, repo.codec, repo.key_id, source, utc_now())
    _warn_supervisor(cfg, source)
    if as_json:
        emit_json({"added": kid, "removed": repo.key_id, "key": source.describe(), "key_file_created": created})
        return
    if created:
        echo(keep_copy_note(source), err=True)
    echo(f"replaced key {repo.key_id} by key {kid} ({source.describe()}); open the store with it from now on")


def _warn_supervisor(cfg, source: KeySource) -> None:
    """After ``key rotate``: a supervisor running here opened the store with the old key,
    which its environment still names; it goes on, but would not start again."""
    from ..local.state import lock_held
    from ..paths import SUPERVISE_LOCK

    if lock_held(cfg.state_dir, SUPERVISE_LOCK):
        echo(f"warning: key rotate: a supervisor is running on {cfg.state_dir} and its environment still names "
             f"the old key ({cfg.key.describe()}), which no longer opens the store; it goes on with the key it "
             f"holds, but would fail to start again: point it at the new key ({source.describe()}) before it "
             "restarts", err=True)

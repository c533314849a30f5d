"""Configuration: a TOML file decoded with msgspec, environment overrides, presets.

The file is found through ``--config``, then ``$JOURNAL_CONFIG``, then
``$XDG_CONFIG_HOME/journal/config.toml`` (default ``~/.config/journal/config.toml``).
``$JOURNAL_STORE``, ``$AM_LOCAL``, ``$JOURNAL_STATE_DIR`` and ``$JOURNAL_KEY_FILE``
override the file. An encrypted store's key comes from a key file
(``$JOURNAL_KEY_FILE``, else the file's ``key_file``) or a passphrase
(``$JOURNAL_PASSPHRASE``): the configuration names where (``KeySource``), never the
key itself, which ``journal/crypto/keys.py`` reads when a store needs it.

Each key of the file carries its documentation in its type (``_key``): what it sets,
an example, its variable and default. ``tools/gen_config_docs.py`` writes
``docs/config.md`` from them, and ``tests/test_docs.py`` fails when a key lacks a row.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Annotated

import msgspec

from .errors import ConfigError
from .paths import INPUT_SOCKET, abs_path, config_source, inputs_key, shown
from .paths import state_dir as resolve_state_dir
from .presets import PRESETS, preset_path

DEFAULT_JSONL = ("*.jsonl", "*.ndjson")
DEFAULT_INTERVAL = 15.0
DEFAULT_INPUT_LIMIT = 1 << 20       # bytes of one input (``format/inputs.py`` bounds the setting)
DEFAULT_CHUNK_COPIES = 64 << 20     # bytes of ``<state_dir>/chunks`` (``checkpoint/chunk_copies.py``)
MAX_CHUNK_COPIES = 1 << 40
TREE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def _key(what: str, example, *, env: str | None = None, default: str | None = None) -> msgspec.Meta:
    """What ``docs/config.md`` says of one key of the config file (``tools/gen_config_docs.py``
    writes it from these): what it sets, an example value for the example file, the
    environment variable that overrides it, and its default in words when the field's
    own default (None, an empty list) does not say it."""
    extra = {name: value for name, value in (("env", env), ("default", default)) if value is not None}
    return msgspec.Meta(description=what, examples=[example], extra=extra)


class TreeFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A ``[[trees]]`` table of the config file: a tree of its own, or a preset changed."""

    name: Annotated[str, _key(
        "The tree's name, as `journal trees`, `ls` and the store give it: lowercase letters, digits, `-` and `_`, "
        "up to 64. A preset's name changes that preset's tree.", "codex")]
    path: Annotated[str | None, _key(
        "Where the tree lives: an absolute path, or one relative to `local`.", "/home/node/.codex",
        default="the preset's path (with `preset`); required otherwise")] = None
    preset: Annotated[str | None, _key(
        "The built-in preset the tree starts from: its path, SQLite patterns and exclusions (the README's table "
        "of presets).", "codex")] = None
    jsonl: Annotated[list[str], _key(
        "More patterns of append-only transcripts (stored as appended segments), besides `*.jsonl` and "
        "`*.ndjson`.", ["*.log"], default="`[]` (`*.jsonl` and `*.ndjson` always)")] = []
    exclude: Annotated[list[str], _key(
        "Patterns left out of every checkpoint (`cache/`: directories only), added to the preset's.",
        ["*.tmp", "cache/"])] = []
    sqlite: Annotated[list[str], _key(
        "Patterns of SQLite databases, stored as snapshots taken with SQLite's backup API, added to the "
        "preset's.", ["*.sqlite"])] = []


class ConfigFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The config file's top level."""

    store: Annotated[str | None, _key(
        "The store: an absolute path, or a URL (`s3://bucket/prefix`, `gs://`, `az://`, `file://`, `hfsim://`).",
        "/data/journal", env="JOURNAL_STORE",
        default="`$XDG_DATA_HOME/journal/store` (`~/.local/share/journal/store`), which `journal supervise` "
                "refuses")] = None
    local: Annotated[str | None, _key(
        "The directory holding the agents' state: presets' paths and relative tree paths are under it.",
        "/home/node/local", env="AM_LOCAL", default="unset: no preset is found")] = None
    state_dir: Annotated[str | None, _key(
        "journal's local state (what was last published, caches, the spool); outside every tree.",
        "/home/node/local/.journal", env="JOURNAL_STATE_DIR",
        default="`<local>/.journal`, else `~/.local/state/journal`")] = None
    interval: Annotated[float | None, _key(
        "Seconds between checkpoints under `journal supervise` (its `--interval` overrides both).", 15,
        env="AGENT_STATE_CHECKPOINT_SECONDS", default=f"{DEFAULT_INTERVAL:g}")] = None
    presets: Annotated[list[str] | None, _key(
        "The built-in presets to checkpoint, by name; a preset listed here is a tree even before its path exists.",
        ["codex", "claude"], default="every preset whose path exists (the others wait, and are restored into)")] = None
    trees: Annotated[list[TreeFile], _key(
        "Trees of their own, or presets changed: one `[[trees]]` table each (below).", [])] = []
    input_limit: Annotated[int | str | None, _key(
        "The largest input `journal input append` stores: bytes, or a size such as `512KiB` or `4MiB` (at most "
        "16MiB).", "4MiB", env="JOURNAL_INPUT_LIMIT", default="`1MiB`")] = None
    input_socket: Annotated[str | None, _key(
        "Where `journal supervise` serves the input journal's socket.", "/run/journal/input.sock",
        env="JOURNAL_INPUT_SOCKET", default=f"`<state_dir>/{INPUT_SOCKET}`")] = None
    key_file: Annotated[str | None, _key(
        "An encrypted store's key file (`journal init --encrypt --key-file` makes one); `$JOURNAL_PASSPHRASE` is "
        "the other way to give the key.", "/home/node/.config/journal/store.key", env="JOURNAL_KEY_FILE",
        default="unset: a plain store")] = None
    chunk_copies_limit: Annotated[int | str | None, _key(
        "The most bytes the local copies of rewritten files' chunks may hold (the bases of their next deltas): "
        "bytes, or a size such as `16MiB` or `1GiB`; 0 keeps none.", "16MiB", env="JOURNAL_CHUNK_COPIES_LIMIT",
        default="`64MiB`")] = None


class TreeConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One resolved tree: a name, an absolute live path and its patterns."""

    name: str
    path: str
    jsonl: tuple[str, ...] = DEFAULT_JSONL
    exclude: tuple[str, ...] = ()
    sqlite: tuple[str, ...] = ()
    preset: str | None = None


class KeySource(msgspec.Struct, frozen=True, kw_only=True):
    """Where an encrypted store's key comes from (design §22): a key file, or the
    environment variable holding a passphrase. Never the key itself."""

    file: str | None = None     # a key file's absolute path
    env: str | None = None      # the environment variable holding a passphrase
    origin: str = ""            # how the key file was named: "JOURNAL_KEY_FILE", "--key-file", "key_file in ..."

    def describe(self) -> str:
        """The source as messages name it."""
        if self.file is not None:
            return f"key file {self.file} ({self.origin})"
        return f"the passphrase in ${self.env}"


PASSPHRASE_ENV = "JOURNAL_PASSPHRASE"
NEW_PASSPHRASE_ENV = "JOURNAL_NEW_PASSPHRASE"


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """The effective configuration."""

    store: str
    local: str | None
    state_dir: str
    interval: float
    trees: tuple[TreeConfig, ...]
    dormant: tuple[TreeConfig, ...] = ()   # presets whose live path does not exist (yet)
    source: str | None = None
    inputs: str | None = None              # paths.inputs_key of what this was resolved from
    input_limit: int = DEFAULT_INPUT_LIMIT  # the largest prompt ``journal input append`` stores, in bytes
    input_socket: str = ""                  # where ``journal supervise`` serves the input socket
    default_store: bool = False            # no store was configured: ``store`` is the default path
    key: KeySource | None = None            # where an encrypted store's key comes from (None: no key set)
    chunk_copies_limit: int = DEFAULT_CHUNK_COPIES  # the most bytes the local chunk copies may hold

    def active_trees(self) -> tuple[TreeConfig, ...]:
        """The configured trees plus dormant presets whose live path exists now."""
        woken = tuple(t for t in self.dormant if os.path.isdir(t.path))
        return tuple(sorted(self.trees + woken, key=lambda t: t.name)) if woken else self.trees


def find_config_file(explicit: str | None, env: Mapping[str, str]) -> str | None:
    """The config file to read, or None when there is none (only the default may be absent)."""
    path, named = config_source(explicit, env)
    if os.path.isfile(path):
        return path
    if os.path.lexists(path):
        raise ConfigError(f"read config: {path} is not a regular file; replace it with a config file or remove it")
    if named:
        raise ConfigError(f"read config: {path} does not exist; fix --config or $JOURNAL_CONFIG")
    return None


def read_config_file(path: str) -> ConfigFile:
    """Decode one config file; raises ConfigError naming the file and the problem."""
    try:
        with open(path, "rb") as fh:
            return msgspec.toml.decode(fh.read(), type=ConfigFile)
    except OSError as err:
        raise ConfigError(f"read config: {path}: {err.strerror}") from err
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise ConfigError(f"read config: {path}: {err}; see `journal trees --help` for the format") from err


def load_config(explicit: str | None = None, env: Mapping[str, str] | None = None, *,
                store: str | None = None, local: str | None = None) -> Config:
    """Resolve the effective configuration (flags > environment > file > defaults)."""
    env = os.environ if env is None else env
    inputs = inputs_key(explicit, env, store, local)
    source = find_config_file(explicit, env)
    cfg = read_config_file(source) if source else ConfigFile()
    local = abs_path(local or env.get("AM_LOCAL") or cfg.local)
    home = os.path.expanduser("~")
    store, default_store = _store(store, env, cfg, source, home)
    state_dir = resolve_state_dir(env, cfg.state_dir, local)
    interval = _interval(env.get("AGENT_STATE_CHECKPOINT_SECONDS"), cfg.interval, source)
    trees, dormant = _resolve_trees(cfg, local, env, source)
    _check_apart(trees + dormant, state_dir, store)
    limit = input_limit(env.get("JOURNAL_INPUT_LIMIT") or cfg.input_limit,
                        "JOURNAL_INPUT_LIMIT" if env.get("JOURNAL_INPUT_LIMIT") else source)
    copies = chunk_copies_limit(env.get("JOURNAL_CHUNK_COPIES_LIMIT") or cfg.chunk_copies_limit,
                                "JOURNAL_CHUNK_COPIES_LIMIT" if env.get("JOURNAL_CHUNK_COPIES_LIMIT") else source)
    socket = abs_path(env.get("JOURNAL_INPUT_SOCKET") or cfg.input_socket) or os.path.join(state_dir, INPUT_SOCKET)
    key = key_source(env, cfg.key_file, source)
    _check_text([("the local root (AM_LOCAL)", local), ("the store", store), ("the state directory", state_dir),
                 ("the input socket", socket), ("the key file", key.file if key else None),
                 *((f"tree {tree.name!r}", tree.path) for tree in trees + dormant)])
    return Config(store=store, local=local, state_dir=state_dir, interval=interval,
                  trees=tuple(trees), dormant=tuple(dormant), source=source, inputs=inputs,
                  input_limit=limit, input_socket=socket, default_store=default_store, key=key,
                  chunk_copies_limit=copies)


def _check_text(named: list[tuple[str, str | None]]) -> None:
    """Refuse a configured path that is not UTF-8 text (a byte the environment passed
    through as a surrogate): journal's config, state and manifests hold paths as
    UTF-8, so such a root could be neither hashed into the config's key nor opened
    by SQLite's URI. Names inside a tree are the path rule's (``local/treepath.py``)."""
    for what, path in named:
        if path is None:
            continue
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"read config: {what} {shown(path)} is not a UTF-8 name; journal keeps its paths "
                              "as UTF-8 text: rename it, or point the setting at a UTF-8 path") from None


def key_source(env: Mapping[str, str], file_value: str | None = None, source: str | None = None,
               file_env: str = "JOURNAL_KEY_FILE", passphrase_env: str = PASSPHRASE_ENV) -> KeySource | None:
    """Where the key comes from: ``$JOURNAL_KEY_FILE``, ``$JOURNAL_PASSPHRASE`` (not both),
    else the config file's ``key_file``; None when no key is set. A variable set but
    empty is refused (a secret that did not reach the container), never read as unset."""
    for name in (file_env, passphrase_env):
        if env.get(name) == "":
            raise ConfigError(f"read config: {name} is set but empty; set it to the store's "
                              f"{'key file' if name == file_env else 'passphrase'}, or unset it")
    if env.get(file_env) and env.get(passphrase_env):
        raise ConfigError(f"read config: both {file_env} and {passphrase_env} are set; set only the one "
                          "that opens the store")
    if env.get(file_env):
        return KeySource(file=abs_path(env[file_env]), origin=file_env)
    if env.get(passphrase_env):
        return KeySource(env=passphrase_env)
    if file_value:
        return KeySource(file=abs_path(file_value), origin=f"key_file in {source}")
    return None


#: Patterns of values most commands never parse: compiled on first use (``re``'s cache), not at import.
_SIZE = r"(\d+)\s*(KiB|MiB|GiB|K|M|G|k|m|g)?"
_UNIT = {None: 1, "K": 1 << 10, "k": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "m": 1 << 20, "MiB": 1 << 20,
         "G": 1 << 30, "g": 1 << 30, "GiB": 1 << 30}


def _size(key: str, value: int | str, where: str | None, low: int, high: int, said: str) -> int:
    """The setting ``key`` in bytes: an integer, or one with a ``KiB``/``MiB``/``GiB``
    suffix, from ``low`` to ``high``; else ``ConfigError`` naming where it was set, with
    ``said``: the range and examples as the message gives them."""
    match = re.fullmatch(_SIZE, value.strip()) if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        size = int(match[1]) * _UNIT[match[2]] if match else -1
    if not low <= size <= high:
        raise ConfigError(f"read config: {key} {value!r} ({where or 'default'}) must be a size from {said}")
    return size


def input_limit(value: int | str | None, where: str | None) -> int:
    """The input size limit in bytes: an integer, or one with a ``KiB``/``MiB`` suffix,
    from 1 byte to ``MAX_INPUT_LIMIT`` (16 MiB); None is the default (1 MiB)."""
    if value is None:
        return DEFAULT_INPUT_LIMIT
    from .format.inputs import MAX_INPUT_LIMIT  # (the record format's bound; not imported when unset)

    return _size("input_limit", value, where, 1, MAX_INPUT_LIMIT,
                 f"1 byte to {MAX_INPUT_LIMIT:,} bytes (16MiB), e.g. 1048576, 512KiB or 4MiB")


def chunk_copies_limit(value: int | str | None, where: str | None) -> int:
    """The most bytes the local copies of rewritten files' chunks may hold (design §10):
    a size as ``input_limit`` takes it (``GiB`` too), 0 keeps none; None is the default
    (64 MiB)."""
    if value is None:
        return DEFAULT_CHUNK_COPIES
    return _size("chunk_copies_limit", value, where, 0, MAX_CHUNK_COPIES,
                 f"0 to {MAX_CHUNK_COPIES:,} bytes (1024GiB), e.g. 0, 16MiB or 1GiB")


def no_trees_hint(cfg: Config, in_trees: bool = False) -> str:
    """Why no tree is configured, and what to set; ``in_trees``: for ``journal trees``
    itself, which is not told to run ``journal trees``."""
    see = "" if in_trees else " (`journal trees` shows it)"
    if cfg.local and not os.path.isdir(cfg.local):
        return (f"AM_LOCAL is {cfg.local}, which does not exist (or is not a directory); set AM_LOCAL to the "
                f"directory holding the agents' state, or add [[trees]] to the config{see}")
    return f"set AM_LOCAL to a directory holding harness state or add [[trees]] to the config{see}"


def default_store_path(env: Mapping[str, str], home: str) -> str:
    """Where the store is when none is configured: ``$XDG_DATA_HOME/journal/store``
    (default ``~/.local/share/journal/store``)."""
    return os.path.join(env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"), "journal", "store")


def _store(flag: str | None, env: Mapping[str, str], cfg: ConfigFile, source: str | None,
           home: str) -> tuple[str, bool]:
    """(store, is the default): ``--store``, else ``$JOURNAL_STORE``, else the file's
    ``store``, else ``default_store_path``. A blank value, or a relative path (cron,
    supervise and a shell each run in another directory), is refused."""
    for value, which in ((flag, "--store"), (env.get("JOURNAL_STORE"), "JOURNAL_STORE"),
                         (cfg.store, f"`store` in {source}")):
        if value is None:
            continue
        if not value.strip():
            raise ConfigError(f"read config: {which} is set but {'empty' if not value else 'blank'}; set it to "
                              "the store path or URL, or unset it to use the config file or the default")
        if "://" in value:
            return value, False
        if not os.path.isabs(os.path.expanduser(value)):
            raise ConfigError(f"read config: {which} {value!r} is a relative path; it would name another store "
                              f"from each working directory (here {os.path.abspath(value)}); give an absolute path")
        return abs_path(value), False
    return default_store_path(env, home), True


def _check_apart(trees: list[TreeConfig], state_dir: str, store: str) -> None:
    """A tree must not hold journal's state directory or a local store, nor lie inside
    one: each checkpoint would publish journal's own files (which change every time),
    and restore would write stored state files over the live ones."""
    own = [("journal's state directory", os.path.realpath(state_dir), "set JOURNAL_STATE_DIR outside the tree",
            "every checkpoint would publish journal's own files and restore would write them over the live ones")]
    store_path = _local_store_path(store)
    if store_path is not None:
        own.append(("the store", os.path.realpath(store_path), "set JOURNAL_STORE outside the tree",
                    "every checkpoint would publish the store into itself"))
    for tree in trees:
        path = os.path.realpath(tree.path)
        for what, where, fix, why in own:
            if _within(where, path):
                raise ConfigError(f"read config: tree {tree.name!r} ({tree.path}) contains {what} {where}: {why}; "
                                  f"point the tree at a subdirectory, or {fix}")
            if _within(path, where):
                raise ConfigError(f"read config: tree {tree.name!r} ({tree.path}) lies inside {what} {where}: "
                                  f"{why}; point the tree at the agent's own directory")


def _within(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it (both absolute and resolved)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _local_store_path(store: str) -> str | None:
    """The directory of a store on local disk (a path, ``file://`` or ``hfsim://``), else None."""
    if "://" not in store:
        return store
    if store.partition("://")[0].lower() in ("file", "hfsim"):
        from urllib.parse import unquote, urlsplit

        return unquote(urlsplit(store).path) or None
    return None


def _interval(env_value: str | None, file_value: float | None, source: str | None) -> float:
    if env_value:
        try:
            value = float(env_value)
        except ValueError:
            raise ConfigError(f"read config: AGENT_STATE_CHECKPOINT_SECONDS={env_value!r} is not a number") from None
    else:
        value = DEFAULT_INTERVAL if file_value is None else file_value
    return check_interval(value, source or "environment")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = r"(\d+(?:\.\d+)?)([smhdw])"        # compiled on first use, as _SIZE
_SECONDS = r"\d+(?:\.\d+)?"


def parse_duration(text: str, flag: str) -> float:
    """Seconds in a bare number (``"90"``, ``"0.5"``) or in ``"90s"``, ``"15m"``,
    ``"24h"``, ``"7d"``, ``"2w"``, ``"1d12h"``: every option that takes a duration reads it so."""
    text = text.strip().lower()
    if re.fullmatch(_SECONDS, text):
        return float(text)
    parts = re.findall(_PART, text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ConfigError(f"read {flag}: {text!r} is not a duration; write seconds (90) or e.g. 30s, 15m, 24h, "
                          "7d, 1d12h")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def check_interval(value: float, where: str) -> float:
    """A checkpoint interval: a finite number of seconds above zero (NaN never elapses)."""
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"read config: the checkpoint interval must be a positive number of seconds, "
                          f"got {value} ({where})")
    return value


def _resolve_trees(cfg: ConfigFile, local: str | None, env: Mapping[str, str],
                   source: str | None) -> tuple[list[TreeConfig], list[TreeConfig]]:
    """(trees, dormant): with no explicit preset list, presets whose live path does not
    exist are dormant: restore fills them from the store, checkpoint uses them once they exist."""
    trees: dict[str, TreeConfig] = {}
    dormant: dict[str, TreeConfig] = {}
    names = cfg.presets if cfg.presets is not None else list(PRESETS)
    for name in names:
        if name not in PRESETS:
            raise ConfigError(f"read config: {source}: unknown preset {name!r}; known: {', '.join(PRESETS)}")
        tree = _from_preset(name, local, env)
        if tree and (cfg.presets is not None or os.path.isdir(tree.path)):
            trees[name] = tree
        elif tree:
            dormant[name] = tree
    for spec in cfg.trees:
        trees[spec.name] = _from_table(spec, local, env, source)
        dormant.pop(spec.name, None)
    return (sorted(trees.values(), key=lambda t: t.name),
            sorted(dormant.values(), key=lambda t: t.name))


def _from_preset(name: str, local: str | None, env: Mapping[str, str]) -> TreeConfig | None:
    preset = PRESETS[name]
    path = preset_path(preset, local, env)
    if path is None:
        return None
    return TreeConfig(name=name, path=path, exclude=preset.exclude, sqlite=preset.sqlite, preset=name)


def _from_table(spec: TreeFile, local: str | None, env: Mapping[str, str], source: str | None) -> TreeConfig:
    where = f"read config: {source}: tree {spec.name!r}"
    if not TREE_NAME.match(spec.name):
        raise ConfigError(f"{where}: names are lowercase letters, digits, '-' and '_'")
    base = None
    if spec.preset:
        if spec.preset not in PRESETS:
            raise ConfigError(f"{where}: unknown preset {spec.preset!r}; known: {', '.join(PRESETS)}")
        base = _from_preset(spec.preset, local, env)
    path = spec.path
    if path is not None and not os.path.isabs(os.path.expanduser(path)):
        if local is None:
            raise ConfigError(f"{where}: relative path {path!r} needs a local root; set AM_LOCAL or `local`")
        path = os.path.join(local, path)
    path = abs_path(path) or (base.path if base else None)
    if path is None:
        raise ConfigError(f"{where}: give it a `path` (or a `preset` and set AM_LOCAL)")
    return TreeConfig(
        name=spec.name, path=path,
        jsonl=DEFAULT_JSONL + tuple(spec.jsonl),
        exclude=(base.exclude if base else ()) + tuple(spec.exclude),
        sqlite=(base.sqlite if base else ()) + tuple(spec.sqlite),
        preset=spec.preset)

"""Store backends: named immutable bytes.

``open_store(url)`` picks a backend from a URL. Backends are imported when chosen, so
importing this package stays cheap.
May import: the base modules (``journal.errors``, ``journal.atomic``, ...) only.
"""

from __future__ import annotations

import os
import re

from ..errors import ConfigError
from .base import Store, check_key

__all__ = ["Store", "check_key", "open_store"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def open_store(url: str, *, make_parents: bool = False) -> Store:
    """Open the store at ``url``.

    - a plain path, or ``file:///path``: a ``LocalStore`` (the directory need not exist
      yet; with ``make_parents``, for the default store only, neither need its parents);
    - ``memory://``: a new, empty ``MemoryStore`` on every call;
    - ``s3://bucket/prefix``, ``gs://bucket/prefix``, ``az://container/prefix``: a
      ``CloudStore`` (obstore); credentials, region and endpoint come from the standard
      environment variables and from URL query options (``?endpoint=...&allow_http=true``);
    - ``hfsim:///path``: an ``HfMountSimStore``, a local store enforcing hf-mount's
      streaming-write rules: for rehearsing them locally and for tests, not a mount.

    Anything else raises ``ConfigError``.
    """
    match = _SCHEME.match(url)
    if not match:
        if not url.strip():
            raise ConfigError("open store: the store URL is empty; set JOURNAL_STORE to a path or URL")
        from .local import LocalStore

        return LocalStore(os.path.expanduser(url), make_parents=make_parents)
    scheme = match.group(1).lower()
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if scheme in ("file", "hfsim"):
        return _open_path_url(url, scheme)
    from .cloud import SCHEMES, CloudStore

    if scheme in SCHEMES:
        return CloudStore(url)
    raise ConfigError(
        f"open store: unsupported store URL {url!r} "
        "(supported: an absolute path, file:///path, s3://bucket/prefix, gs://bucket/prefix, az://container/prefix, "
        "hfsim:///path)"
    )


def _open_path_url(url: str, scheme: str) -> Store:
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    path = unquote(parts.path)
    if parts.netloc not in ("", "localhost") or not path.startswith("/"):
        raise ConfigError(
            f"open store: {url!r} does not name an absolute local path; write it as {scheme}:///abs/path"
        )
    if scheme == "hfsim":
        from .hfmount import HfMountSimStore

        return HfMountSimStore(path)
    from .local import LocalStore

    return LocalStore(path)

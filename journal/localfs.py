"""Small local-disk chores shared by the spool, the SQLite staging area and restore."""

from __future__ import annotations

import os


def clear_dir(directory: str, suffix: str = "") -> None:
    """Remove the files in ``directory`` (those ending in ``suffix``); a missing dir is fine."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if name.endswith(suffix):
            try:
                os.unlink(os.path.join(directory, name))
            except (FileNotFoundError, IsADirectoryError):
                pass

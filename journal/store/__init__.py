"""Store backends: named immutable bytes."""

from .base import Store, check_key

__all__ = ["Store", "check_key"]

"""SQLite databases: online-backup snapshots, page capture, rebuild, local base copies.

May import: ``journal.local``, ``journal.repository``, ``journal.format`` and the base modules.
"""

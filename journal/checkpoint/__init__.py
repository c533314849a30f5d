"""The checkpoint operation: walk, scan, capture, deltas, then commit (design §12).

May import: ``journal.config``, ``journal.local``, ``journal.sqlite``, ``journal.repository``,
``journal.format``, ``journal.store`` and the base modules.
"""

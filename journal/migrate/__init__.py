"""Migration from the legacy rsync layout: ``plan`` (reads, writes nothing), ``execute``.

May import: ``journal.checkpoint`` (the import is one checkpoint), ``journal.restore`` (its
rules for placing files in live trees), ``journal.verify``, ``journal.sqlite``,
``journal.config``, ``journal.local``, ``journal.repository``, ``journal.format``,
``journal.store`` and the base modules.
"""

"""Migration from the legacy rsync layout: ``plan`` (reads, writes nothing), ``execute``.

May import: ``journal.checkpoint.run``, ``journal.restore.run``, ``journal.verify`` and below.
"""

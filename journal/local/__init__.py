"""This machine's side: the local state cache, walking the live trees, the quiet snapshot,
the one path rule for tree entries, and journal's own temp directories inside trees.

``walk`` and ``quiet`` are on the idle fast path (``journal.cli.app.launch``): keep this
``__init__`` empty and their imports light.
May import: ``journal.format``, ``journal.repository.repository``, and the base modules.
"""

"""This machine's side: the local state cache, walking the live trees, the quiet snapshot,
the one path rule for tree entries, and journal's own temp directories inside trees.

``quiet`` is on the idle fast path (``journal/cli/launch.py``): keep this ``__init__``
empty and its imports light.
May import: ``journal.format``, ``journal.repository.repository``, and the base modules.
"""

"""This machine's side: the local state cache (``state``; a tree's paths held by
directory, ``files``), walking the live trees, the quiet snapshot, the one path rule
for tree entries, journal's own temp directories inside trees, where a sparse
file's holes are (``sparse``), and the state directory kept private (``private``).

``quiet`` is on the console's idle fast path (``journal.cli.launch``), and ``walk`` on
``journal supervise``'s: keep this ``__init__`` empty and their imports light. Nothing
here knows the store.
May import: ``journal.format`` and the base modules.
"""

"""Browsing history without restoring it: ``ls``, ``cat``, ``diff`` and ``find``.

Each command reads only what its answer needs (docs/design.md §19): ``where`` (naming
a path as ``journal trees`` shows it, TREE/PATH, under the path rule), ``view`` (the
manifests and index pages a command reads, each at most once; which checkpoint
answers, ``--at`` as restore reads it, past damage as restore falls back), ``ls``,
``cat``, ``diff``, ``find`` and ``sessions`` (``find --session``: a harness's session by
its id, from the rules of ``presets.SESSIONS``); ``conversations`` (``journal
sessions`` and ``show``: the sessions of a checkpoint, read as conversations); ``stats``
(the store's size per tree, from its listing, manifests and index pages, its requests
counted); ``mount`` (every checkpoint as a read-only FUSE file system, over one ``view``
and bounded caches).

May import: ``journal.repository``, ``journal.format``, ``journal.sqlite.rebuild`` and
``journal.sqlite.snapshot`` (the rebuild restore uses), ``journal.local.treepath`` (the
path rule), ``journal.config``, ``journal.store.counting`` (stats' request count) and
the base modules; never the checkpoint or restore internals.
"""

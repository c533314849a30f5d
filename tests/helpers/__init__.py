"""The test harness every test module shares (``conftest.py`` re-exports it and holds
the fixtures): ``cli`` runs the real CLI, ``waits`` waits on events, ``container`` is
a container (``Live``: a local root, its state, a store, the CLI pointed at them),
``crafted`` audits a crafted store, ``trees`` describes a tree as restore must keep
it, ``format_reader`` reads stored records by the documented format alone, ``samples``
lays out the real session samples (their databases built from dumps)."""

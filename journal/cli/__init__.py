"""The command line: the click app, its commands, and the idle fast path (``launch``).

``launch`` runs before click is imported: keep this ``__init__`` empty.
May import everything; nothing imports it.
"""

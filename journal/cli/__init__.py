"""The command line, in the order a command meets it:

- ``launch``: the console entry point; answers an idle ``journal checkpoint`` from the
  quiet snapshot before click is imported, runs a busy plain one without click (``tick``
  under ``base``), else hands the command line to ``entry``;
- ``output``: the lines both of those print on their own (no imports);
- ``entry``: the full command line, ``app.main`` with every command module imported;
- ``app``: the click group and what every command shares (options, errors, JSON);
- ``base``: what every command does past its parsing without click (the error renderer,
  JSON, the reporter, opening the store), for ``app`` and ``launch`` alike; ``hints``: the
  option that fixes a library error, said after its message; ``tick``: the body of
  ``journal checkpoint``, for ``commands`` and ``launch`` alike;
- ``options``: one struct per command that takes many options (``gc``, ``supervise``);
  ``render``: every command's text, from the values the library returns;
- command modules: ``commands`` (init, checkpoint, log, restore, verify, ...),
  ``migrate``, ``browse`` (ls, cat, diff, find), ``sessions`` (sessions, show), ``inputs`` (``journal input``),
  ``retention`` (gc, forget); ``demo``
  is the demo's library side.
  Each command module puts its commands on ``app.main``. A new command module is registered in one place: add its name to the
  import line in ``entry.py``.

``launch`` runs before click is imported: keep this ``__init__`` empty.
May import: every package and module of journal; nothing in journal imports it.
"""

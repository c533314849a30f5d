"""Benchmark journal against the legacy design and restic on a generated agent-state workload.

It answers four questions in one run: how much each checkpoint tick uploads, how long
it takes, how fast a restore is, and what it costs in memory.

Systems, all on the same workload and machine, run interleaved (the order rotates
every tick) and always as child processes, so wall and CPU time are measured alike
(``systems.py``): ``journal checkpoint --json`` with a local-directory store; the
legacy design journal replaces, as a shell script (``find -newer``, ``rsync -a
--files-from``, ``sqlite3 .backup``); and ``restic backup`` when restic is installed.

Bytes and objects "uploaded" are measured the same way for every system: the
destination directory (journal's store, legacy's durable copy, restic's repository)
is listed with sizes, mtimes and inodes before and after a tick, and every file that
is new or changed counts once, at its full size (object storage has no append).
CPU time is the ``getrusage(RUSAGE_CHILDREN)`` delta around each child; peak RSS is
the ``ru_maxrss`` that ``wait4`` returns for that child (``measure.py``).

The package: ``workload`` (the generated agent state and the agents that change it),
``measure`` (children and figures), ``systems`` (journal, legacy, restic), ``parts``
(main, tree, sqlite, big, gc, inputs, crypto, link, history: each runs, summarizes,
judges and reports itself; a registry in ``parts/__init__.py``), ``report`` (summary,
ratios, targets, tables) and
``__main__`` (the command line).

Usage::

    .venv/bin/python tools/bench.py                      # the full benchmark (`make bench`)
    .venv/bin/python tools/bench.py --smoke --json out.json
    .venv/bin/python tools/bench.py --parts gc           # gc over 1M objects, bounded restores (~4 min)
    .venv/bin/python tools/bench.py --install-baselines  # apt-get install rsync restic sqlite3 first
    .venv/bin/python -m tools.bench ...                  # the same, as a module

Nothing is installed unless ``--install-baselines`` is given.
"""

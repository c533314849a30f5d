"""The restore operation, in the order of the work: ``run`` (choose manifests, one
target per mode), ``trees`` (decide and write each tree), ``entry`` (one entry's
keep-or-replace rule), ``aside`` (an invalid local database moved aside), ``writer``
(staging threads), ``publish`` (fsync and rename in batches), ``export`` (``--to DIR``),
``adopt`` (a stale or diverged disk, or a rollback: local work kept as a fork, then the
live trees made into the chosen checkpoint), ``include`` (a partial restore: which
paths its patterns take). ``reads`` names what restore reads from the store.

May import: ``journal.checkpoint`` (a fork is a checkpoint), ``journal.browse`` (``find``'s
glob, for ``include``), ``journal.config``, ``journal.local``, ``journal.sqlite``, ``journal.repository``,
``journal.format``, ``journal.store`` and the base modules.
"""

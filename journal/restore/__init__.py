"""The restore operation, in the order of the work: ``run`` (choose manifests),
``trees`` (decide and write each tree), ``entry`` (one entry's keep-or-replace rule),
``writer`` (staging threads), ``publish`` (fsync and rename in batches), ``export``
(``--to DIR``).

May import: ``journal.config``, ``journal.local``, ``journal.sqlite``, ``journal.repository``,
``journal.format``, ``journal.store`` and the base modules.
"""

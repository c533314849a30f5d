"""``journal copy``: checkpoints and the input journal copied to a second store
(design §23). ``run`` (the order of the work, and what it reports), ``target`` (opening
or creating the target, and how its objects are written: as they are, or re-sealed),
``fence`` (which checkpoints to copy, and the target's fencing), ``packs`` (a pack copied
as it is, verified), ``reseal`` (a checkpoint re-encoded under the target's keys),
``inputs`` (the input journal), ``sink`` (the target's writes, counted).

May import: ``journal.gc`` (reachability), ``journal.repository``, ``journal.format``,
``journal.store``, ``journal.config`` and the base modules.
"""

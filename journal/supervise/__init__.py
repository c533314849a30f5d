"""``journal supervise``: the PID-1 timer, and its status file.

May import: ``journal.checkpoint.run``, ``journal.restore.run`` and below.
"""

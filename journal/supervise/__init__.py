"""``journal supervise``: the PID-1 timer, and its status file.

May import: ``journal.checkpoint``, ``journal.restore``, ``journal.local`` and the base modules.
"""

"""``journal supervise``: the PID-1 timer, and its status file.

May import: ``journal.checkpoint``, ``journal.restore``, ``journal.local``, ``journal.config`` (a copy's
schedule) and the base modules.
"""

"""Garbage collection: retention, reachability, the spill tables, the lease, the run and
its delete requests.

May import: ``journal.repository``, ``journal.format``, ``journal.store``, ``journal.local`` (its
errors: a spill file that cannot be written) and the base modules.
"""

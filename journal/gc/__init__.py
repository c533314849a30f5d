"""Garbage collection: retention, reachability, the spill tables, the lease, the run and
its delete requests.

May import: ``journal.repository``, ``journal.format``, ``journal.store`` and the base modules.
"""

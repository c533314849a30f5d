"""journal's reliability suite: what ``tools/torture.py`` runs and ``tests/`` runs short.

* ``faults``: store faults through the ``FsOps`` seam and the ``Store`` interface
  (ENOSPC or EIO at the Nth write, a short write, a put that fails after its bytes
  landed) and a hook that SIGKILLs the process at its Nth filesystem call;
* ``procs``: a journal operation run in a forked child, killed at an instant or at a
  call, its outcome sent back through a pipe;
* ``world``: a container (its live tree, its state, an agent process writing it) and
  the checks a restored tree must pass;
* ``trials``: random torture trials; ``sweeps``: a kill at every Nth filesystem call;
* ``fuzz``: every decoder of store bytes, one table row each, fed arbitrary and
  mutated inputs; ``damage``: every object kind damaged and crafted, then verify and
  restore judged.

The library (``journal/``) never imports this package.
"""

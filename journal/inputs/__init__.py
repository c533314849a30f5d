"""The input journal: every submitted prompt stored, durably, before it is delivered.

``log`` owns the operations (append with its sequence protocol and client-id claims,
list, show, mark delivered; design §20); ``server`` serves them on a Unix socket, one
JSON object per line, in a process of its own that ``journal supervise`` starts.
May import: ``journal.config``, ``journal.repository``, ``journal.format``, ``journal.store``
and the base modules.
"""

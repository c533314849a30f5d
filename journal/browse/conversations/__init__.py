"""Sessions as conversations: ``journal sessions`` lists the sessions a checkpoint
holds, ``journal show`` prints one (``catalog``).

A preset's session rules (``presets.SESSIONS``, which ``find --session`` reads too)
say where its sessions live and in which format (``formats``); one module per format
turns its records into the items of ``model``: ``codex`` (rollouts), ``claude``
(projects' transcripts), ``gemini`` (chats), ``pi`` (pi's and OpenClaw's session
entries), ``opencode``, ``openclaw`` and ``hermes`` (their databases, rebuilt from a
snapshot as ``cat`` rebuilds it; ``tables``).
"""

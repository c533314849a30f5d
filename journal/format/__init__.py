"""The stored bytes: records, the model, index pages, page maps, tombstones.

Owns every byte layout a reader of the store must know (docs/design.md §4-§9, §16).
May import: ``journal.errors`` only, and each other.
"""

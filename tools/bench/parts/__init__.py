"""The parts of the benchmark, in the order they run and report (``--parts`` chooses).

A part is a ``base.Part``: it runs, then summarizes its figures, adds its per-run
ratios, judges its targets and renders its tables. To add one, write a module here with
a ``Part`` subclass and put an instance in ``PARTS``; nothing else changes.
"""

from __future__ import annotations

from .base import Part
from .big import BigPart
from .crypto import CryptoPart
from .gc import GcPart
from .history import HistoryPart
from .inputs import InputsPart
from .link import LinkPart
from .main import MainPart
from .sqlite import SqlitePart
from .tree import TreePart

PARTS: dict[str, Part] = {p.name: p for p in (MainPart(), TreePart(), SqlitePart(), BigPart(), GcPart(),
                                              InputsPart(), CryptoPart(),
                                              LinkPart(), HistoryPart())}

#!/usr/bin/env python3
"""``python tools/bench.py ...``: the benchmark, which lives in the package ``tools/bench/``
(the same as ``python -m tools.bench ...`` from the repository root)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.bench.__main__ import main  # noqa: E402  (the repository root is on the path now)

if __name__ == "__main__":
    sys.exit(main())

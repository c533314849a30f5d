"""The end-to-end suite: the real agent CLIs under ``journal supervise`` (``make e2e``).

Not part of ``make test``: it installs the CLIs from the npm registry and PyPI (into
``JOURNAL_E2E_CACHE``), and each test runs real turns against ``mockmodel`` on
127.0.0.1. A CLI that cannot be installed is skipped with the reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e.mockmodel import MockModel  # noqa: E402


@pytest.fixture
def mock():
    with MockModel() as server:
        yield server


@pytest.fixture
def base(tmp_path):
    """Where a test's containers and store live (on disk: the CLIs' databases use mmap
    and locks that tmpfs serves, but the agents' files should look as in a container)."""
    return tmp_path

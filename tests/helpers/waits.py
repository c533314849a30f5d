"""Tests wait on events, not on the clock: ``wait_for`` polls for a file, a status
change or a log line, and ``FakeClock`` stands in for the wall clock of code that takes
one (the gc lease), so no test depends on how fast this machine is."""

from __future__ import annotations

import time

import pytest


def wait_for(pred, timeout: float, what: str, step: float = 0.01):
    """Poll ``pred`` until it returns something true, and return that; fail the test
    naming ``what`` after ``timeout`` seconds. The timeout only bounds a failing test:
    make it generous (a busy machine stalls for seconds), never a measurement."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


class FakeClock:
    """A wall clock in nanoseconds (as ``time.time_ns``) that moves only when the test
    calls ``advance``; it starts at the real time."""

    def __init__(self) -> None:
        self.ns = time.time_ns()

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)

"""One call run in a thread of its own while the caller goes on (``Background``).

The pack writer's thread pools are ``concurrent.futures``. A database's capture runs
one call beside another, twice: the online backup while the previous page maps
decode (``sqlite/capture.py``; or while the scan captures other files,
``sqlite/ahead.py``), the page ids while ``quick_check`` runs
(``sqlite/snapshot.py``); a checkpoint's one data pack uploads while its index is
built (``repository/pack.py``), and its fence's two HEADs go out together
(``checkpoint/run.py``). Those run here: importing ``concurrent.futures``
(with ``logging``) costs ~5 ms of every busy tick's start.
"""

from __future__ import annotations

import threading


class Background:
    """``fn(*args)`` started in a new thread named ``name``; ``result()`` waits for it
    and returns what it returned, or raises what it raised (with its traceback)."""

    def __init__(self, fn, *args, name: str):
        self._value = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name=name)
        self._thread.start()

    def _run(self, fn, args) -> None:
        try:
            self._value = fn(*args)
        except BaseException as err:  # handed to the caller by ``result``
            self._error = err

    def join(self) -> None:
        """Wait for the call to end, whatever it returns or raises."""
        self._thread.join()

    def cancel(self) -> bool:
        """As ``Future.cancel`` of a call already running: False, it runs to its end."""
        return False

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

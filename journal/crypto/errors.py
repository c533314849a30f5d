"""The errors of an encrypted store's keys (design §22): none set, none that opens the
store, one that cannot be used, a key change refused, the package missing."""

from __future__ import annotations

from ..errors import ConfigError, JournalError


class NoKey(ConfigError):
    """An encrypted store, and no key source is configured (design §22)."""

    def __init__(self, location: str):
        self.location = location
        super().__init__(f"open store: {location} is encrypted and no key is set; set JOURNAL_KEY_FILE to its key "
                         "file (or `key_file` in the config file), or JOURNAL_PASSPHRASE to its passphrase")


class WrongKey(JournalError):
    """The configured key unlocks none of an encrypted store's key objects."""

    def __init__(self, source: str, location: str, keys: int, damaged: int = 0):
        self.source = source
        self.location = location
        of = f" ({damaged} of them damaged: `journal verify` names them)" if damaged else ""
        super().__init__(f"open store: {source} opens none of the {keys} key(s) of {location}{of}; use the key file "
                         "or passphrase the store was created or `journal key add`ed with (nothing was changed)")


class KeyUnusable(ConfigError):
    """A key source that cannot give a key: a key file missing, unreadable or too short, an
    empty passphrase, or a new key given twice."""

    def __init__(self, source: str, problem: str, fix: str):
        self.source = source
        super().__init__(f"read key: {source} {problem}; {fix}")


class KeyRefused(ConfigError):
    """``journal key remove`` (or ``rotate``) asked for what would lock the store or
    named no key of it: nothing was changed."""

    def __init__(self, op: str, detail: str):
        super().__init__(f"{op}: {detail}; nothing was changed")


class CryptoUnavailable(JournalError):
    """An encrypted store, and the ``cryptography`` package is not installed."""

    def __init__(self, what: str):
        super().__init__(f"{what} needs the `cryptography` package, which is not installed: "
                         "pip install 'journal[crypto]'")

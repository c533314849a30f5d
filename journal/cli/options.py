"""One options struct per command that takes many (restic's ``XOptions``): click's
values gathered once (``gathered``), then read into the library's own values (a
``Policy``, seconds) in one place that names the options when a value is wrong.

The options every command shares (``--config``, ``--store``, ``--json``) stay the
command's first three parameters (``app.common``); a command's own options are its
``opts``.
"""

from __future__ import annotations

import functools

import msgspec

from ..errors import ConfigError


def gathered(options: type[msgspec.Struct]):
    """Decorate a command whose own options ``options`` holds: click's values for them
    arrive as one ``options`` struct (``opts``), after the shared three."""
    def decorate(fn):
        @functools.wraps(fn)
        def command(config_path, store_url, as_json, **given):
            return fn(config_path, store_url, as_json, options(**given))
        return command
    return decorate


class GcOptions(msgspec.Struct, frozen=True, kw_only=True):
    """``journal gc``'s options, as given (durations as text)."""

    dry_run: bool = False
    keep_last: int | None = None
    keep_within: str | None = None
    keep_hourly: int | None = None
    keep_daily: int | None = None
    keep_weekly: int | None = None
    keep_monthly: int | None = None
    keep_yearly: int | None = None
    grace: str = "24h"
    yes: bool = False
    explain: bool = False
    keep_inputs_within: str | None = None
    include_undelivered: bool = False

    def policy(self):
        """The checkpoint retention (``gc.retention.Policy``)."""
        from ..config import parse_duration
        from ..gc.retention import Policy

        return Policy(keep_last=self.keep_last, keep_hourly=self.keep_hourly, keep_daily=self.keep_daily,
                      keep_weekly=self.keep_weekly, keep_monthly=self.keep_monthly, keep_yearly=self.keep_yearly,
                      keep_within=parse_duration(self.keep_within, "--keep-within") if self.keep_within else None)

    def input_policy(self):
        """The input retention (``gc.inputs.InputPolicy``); ``--include-undelivered``
        alone is refused: it widens a retention that is not given."""
        from ..config import parse_duration
        from ..gc.inputs import InputPolicy

        if self.include_undelivered and not self.keep_inputs_within:
            raise ConfigError("gc: --include-undelivered expires undelivered inputs older than --keep-inputs-within; "
                              "add --keep-inputs-within DURATION")
        within = parse_duration(self.keep_inputs_within, "--keep-inputs-within") if self.keep_inputs_within else None
        return InputPolicy(include_undelivered=self.include_undelivered, keep_within=within)

    def grace_seconds(self) -> float:
        from ..config import parse_duration

        return parse_duration(self.grace, "--grace")

    def grace_shown(self) -> str:
        """``--grace`` as the plan says it: ``24h``, a bare number with its ``s``."""
        grace = self.grace.strip()
        return grace + ("s" if grace[-1:].isdigit() else "")


class SuperviseOptions(msgspec.Struct, frozen=True, kw_only=True):
    """``journal supervise``'s options, as given, and CMD."""

    cmd: tuple[str, ...]
    interval: str | None = None
    grace: str = "1"
    no_restore: bool = False
    no_input_socket: bool = False
    no_watch: bool = False
    metrics_file: str | None = None
    pass_key_env: bool = False
    verbose: bool = False
    quiet: bool = False
    log_format: str = "text"
    copy_to: str | None = None
    copy_every: str | None = None

    def interval_seconds(self) -> float | None:
        """``--interval`` in seconds (None: the configuration's)."""
        from ..config import check_interval, parse_duration

        return None if self.interval is None else check_interval(parse_duration(self.interval, "--interval"),
                                                                 "--interval")

    def grace_seconds(self) -> float:
        from ..config import parse_duration

        return parse_duration(self.grace, "--grace")

    def level(self):
        """How much the log says (``supervise.events.Level``): -v more, -q less, not both."""
        from ..supervise.events import Level

        if self.verbose and self.quiet:
            raise ConfigError("supervise: -v and -q ask for more and for less; give one of them")
        return Level.DEBUG if self.verbose else Level.ERROR if self.quiet else Level.INFO

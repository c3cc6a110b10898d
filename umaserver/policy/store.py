"""The owners' rule file, kept current while the server runs.

The file is read at start (a broken file stops the server from starting) and looked at again at
most once per `check_interval` by a thread of its own (`start`, `stop`): a request never reads nor
parses the file, it goes on with the rules in force however long a parse takes. A changed file is
parsed and swapped in whole; a broken one is logged and the rules from before stay in force, so a
typo in an edit never opens or closes every resource set. A file that disappears means no rules:
every request is denied, which fails closed. A server does not start without its file
(`require_rule_file`, called by `create_app`): a path mistyped in the config would otherwise serve,
silently, with nothing accessible; an empty file is the way to say "no rules from a file".

Replace the file atomically (write a temporary file, then rename it over the old one): a file read
halfway through a non-atomic write can be valid TOML that lacks the rest of a rule.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..background import BackgroundJob
from .rule_file import PolicyError, load_rules
from .rules import RuleSet

log = logging.getLogger("umaserver.policy")

# What changes when the file does: (device, inode, mtime_ns, size). The inode catches a rename
# over the old file that kept its mtime and size. None: there is no file; a string: the error
# that stopped us from looking.
_Stamp = tuple[int, int, int, int] | str | None
_NOT_YET_SEEN = "not yet seen"
# How often the thread reads an injected clock to see whether a check is due (such a clock moves
# when a test says so, not with time); the real one it just waits for.
_MAX_TICK = 0.1
_MIN_TICK = 0.005


def _stamp(path: Path) -> _Stamp:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot look at the file: {error.strerror or error}"
    return (found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size)


class MissingRuleFile(Exception):
    """The config names a rule file that is not there; the message is a sentence naming it."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"The rule file {path} (`policies` in the config) does not exist: create it (an empty"
            " file means no rules from it, only owners' own rules), or name the right one."
        )
        self.path = path


def require_rule_file(path: Path) -> None:
    """Raises MissingRuleFile when there is nothing at `path` (a file that cannot be read is
    said by the reader)."""
    if _stamp(path) is None:
        raise MissingRuleFile(path)


class PolicyStore(BackgroundJob):
    """The current rules of one rule file; `rules` is safe to read from any thread and never
    waits. `start` begins watching the file on a daemon thread; `stop` ends it."""

    def __init__(
        self,
        path: Path,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._path = path
        self._check_interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()  # held while the file is looked at and parsed
        stamp = _stamp(path)
        if isinstance(stamp, str):
            raise PolicyError([stamp], str(path))
        self._rules = load_rules(path)
        # A file that changed while it was read is read again at the first check.
        self._stamp: _Stamp = stamp if _stamp(path) == stamp else _NOT_YET_SEEN
        self._next_check = clock() + check_interval
        super().__init__("umaserver-policies")

    @property
    def path(self) -> Path:
        return self._path

    @property
    def rules(self) -> RuleSet:
        return self._rules

    def problem(self) -> str | None:
        """Why the rules in force may not be the file's now (`/readyz`), looked at afresh: the
        file is gone (no rules from it are in force), cannot be looked at, or came back and has
        not been read since; None when it is there (a broken change keeps the rules before)."""
        stamp = _stamp(self._path)
        if stamp is None:
            return f"the rule file {self._path} is gone: no rules from it are in force"
        if isinstance(stamp, str):
            return f"the rule file {self._path}: {stamp}"
        if self._stamp is None:  # seen gone, and not read again since it came back
            return f"the rule file {self._path} is back but not loaded yet"
        return None

    def check(self) -> None:
        """Looks at the file now, whatever the interval, and reloads it if it changed."""
        with self._lock:
            self._next_check = self._clock()
            self._reload_if_changed()

    def _wait(self) -> float:
        """Seconds until the next look at the clock: the check that is due on the real clock,
        a short tick on any other (which moves when its owner says so)."""
        if self._clock is time.monotonic:
            return max(self._next_check - self._clock(), _MIN_TICK)
        return min(max(self._check_interval, _MIN_TICK), _MAX_TICK)

    def _run(self) -> None:
        while not self._stopping.wait(self._wait()):
            if self._clock() < self._next_check:
                continue
            try:
                with self._lock:
                    self._reload_if_changed()
            except Exception:  # never let the watcher die: the rules in force stay
                log.exception("rule file %s: the check failed", self._path)

    def _reload_if_changed(self) -> None:
        now = self._clock()
        if now < self._next_check:  # checked just now
            return
        self._next_check = now + self._check_interval
        stamp = _stamp(self._path)
        if stamp == self._stamp:
            return
        if isinstance(stamp, str):
            self._stamp = stamp
            log.error("rule file %s: %s; keeping the rules loaded before", self._path, stamp)
            return
        rules: RuleSet | None = None
        failure: PolicyError | None = None
        try:
            rules = load_rules(self._path)
        except PolicyError as error:
            failure = error
        if _stamp(self._path) != stamp:
            return  # changed while we read it, perhaps mid-write: read it again at the next check
        # Remembered even when broken, so a broken file is reported once, not at every check.
        self._stamp = stamp
        if rules is None:
            log.error(
                "rule file %s is broken; keeping the rules loaded before:\n%s",
                self._path,
                failure,
            )
            return
        self._rules = rules
        if stamp is None:
            log.warning("rule file %s is gone: no rules, so every request is denied", self._path)
        else:
            log.info("rule file %s reloaded: %d rules", self._path, len(rules.rules))

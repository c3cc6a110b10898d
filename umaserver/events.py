"""What happened, for operators: each event is reported here once, by the service where it
happens (`decision(...)`, `resource_set_changed(...)`, `issued("rpt")`, ...). Each writes its log
line through the standard `logging` module, and is counted by the app's metrics when they are on
(`current_sink`, set for each request by the app that serves it; nothing here knows Prometheus).

A line names who and what (owner, set, scopes, client, requesting party, rule ids), never a
token, a secret or a claim value. Its fields travel with the record (`record.event`,
`record.fields`): `JsonFormatter` writes them as one JSON object per line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Protocol

_decisions = logging.getLogger("umaserver.decisions")
_resources = logging.getLogger("umaserver.resources")
_signin = logging.getLogger("umaserver.signin")
_storage = logging.getLogger("umaserver.storage")

Field = str | int | None


class Sink(Protocol):
    """Counts events: the app's metrics (`umaserver/metrics.py`)."""

    def count(self, event: str, labels: Mapping[str, str]) -> None: ...


# The sink of the app serving the request on this thread, when its metrics are on.
current_sink: ContextVar[Sink | None] = ContextVar("umaserver_metrics_sink", default=None)


def decision(
    outcome: str,
    *,
    owner: str,
    resource_sets: Iterable[str],
    scopes: Iterable[Iterable[str]],
    client: str,
    party: str,
    rules: Iterable[str],
    grant: str | None = None,
    requests: int | None = None,
) -> None:
    """One decision on an authorization request: the outcome (grant, deny, need_claims,
    request_submitted) and the rules that decided it ("-" when none did)."""
    _report(
        _decisions,
        "decision",
        {
            "decision": outcome,
            "grant": grant,
            "owner": owner,
            "resource_set": ",".join(resource_sets),
            "scopes": ";".join(",".join(each) for each in scopes),
            "client": client,
            "party": party,
            "rules": ",".join(rules) or "-",
            "requests": requests,
        },
        {"outcome": outcome},
    )


def resource_set_changed(action: str, *, owner: str, resource_set: str, client: str) -> None:
    """A resource set registered, updated or deleted (`action`) by a resource server."""
    _report(
        _resources,
        "resource_set",
        {"action": action, "resource_set": resource_set, "owner": owner, "client": client},
        {"action": action},
    )


def issued(kind: str) -> None:
    """A ticket, an RPT or an access token was issued: counted, not logged (the decision or the
    token endpoint's line says so)."""
    sink = current_sink.get()
    if sink is not None:
        sink.count("issued", {"kind": kind})


def signin_failed(username: str, address: str) -> None:
    """A password check failed (the username as typed, cut to the longest a username may be)."""
    _report(
        _signin,
        "signin_failed",
        {"username": username, "address": address},
        text=f"sign-in failed username={username!r} address={address}",
    )


def locked_out(username: str, address: str, until: int) -> None:
    """A failure locked the account, or the address, until `until` (a UNIX time)."""
    _report(
        _signin,
        "locked_out",
        {"username": username, "address": address, "until": until},
        level=logging.WARNING,
        text=f"sign-in lockout begins username={username!r} address={address} until={until}",
    )


def storage_error(problem: str) -> None:
    """The database could not be used for a request (answered 503)."""
    _report(
        _storage,
        "storage_error",
        {"problem": problem},
        level=logging.ERROR,
        text=f"the database cannot be used right now: {problem}",
    )


def _report(
    logger: logging.Logger,
    event: str,
    fields: Mapping[str, Field],
    labels: Mapping[str, str] | None = None,
    *,
    level: int = logging.INFO,
    text: str | None = None,
) -> None:
    """Logs `text`, else the fields as `key=value` words, and counts the event."""
    given = {key: value for key, value in fields.items() if value is not None}
    if logger.isEnabledFor(level):
        if text is None:
            text = " ".join(f"{key}={_word(value)}" for key, value in given.items())
        logger.log(level, "%s", text, extra={"event": event, "fields": given})
    sink = current_sink.get()
    if sink is not None:
        sink.count(event, labels or {})


def _word(value: str | int) -> str:
    """A value as one word of a text line: quoted (JSON's escapes) when it has a space, a quote,
    an `=` or a control character, so that no value can forge a field or a line of its own."""
    text = str(value)
    if text and all(c.isprintable() and c not in ' "=\\' for c in text):
        return text
    return json.dumps(text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: `time` (UTC, ISO 8601), `level`, `logger`, `message`, and the
    event's own fields when the line reports one (`event` and the rest); an exception's
    traceback as `exception`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event = getattr(record, "event", None)
        fields = getattr(record, "fields", None)
        if isinstance(event, str) and isinstance(fields, dict):
            line["event"] = event
            line.update({key: value for key, value in fields.items() if key not in line})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)

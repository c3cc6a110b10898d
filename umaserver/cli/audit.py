"""`umaserver audit`: an owner's access history for operators, as JSON lines, oldest first."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from ..services import access_history
from . import _store, fail, main


def _moment(text: str) -> int:
    """ISO 8601 in UTC (`2026-11-26`, `2026-11-26T10:00:00Z`, `...+00:00`; without an offset, read
    as UTC) as seconds since the epoch."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(
            f"--since: {text[:40]!r} is not an ISO 8601 time in UTC,"
            " such as 2026-11-26 or 2026-11-26T10:00:00Z."
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    elif moment.utcoffset():
        fail(f"--since: {text[:40]!r} is not in UTC; give it with Z (or +00:00), or no offset.")
    return int(moment.timestamp())


@main.command()
@click.option("--owner", "username", required=True, help="The owner's username.")
@click.option(
    "--since",
    help="Only events at or after this time (ISO 8601 in UTC, e.g. 2026-11-26T10:00:00Z).",
)
@click.pass_context
def audit(ctx: click.Context, username: str, since: str | None) -> None:
    """Print an owner's access history, one JSON object a line, oldest first: every decision,
    grant and revocation on the owner's resource sets, with the names as they were then."""
    moment = 0 if since is None else _moment(since)
    store = _store(ctx)
    user = store.get_user_by_username(username)
    if user is None:
        fail(f"There is no user {username!r}.")
    for event in store.events_since(user.sub, moment):
        click.echo(json.dumps(access_history.as_json(event, user.username)))

"""People's sessions on the pages: a random id (in a cookie) stored only as its digest, with a
secret that CSRF tokens are made from; ended by `[sessions] idle_timeout` without a request,
`absolute_timeout` after sign-in, or sign-out. Plain functions over the storage contract and a
moment; `umaserver.pages.sessions` holds the cookie."""

from __future__ import annotations

import secrets

from .. import secrets_at_rest
from ..config import SessionSettings
from ..storage import Storage
from ..storage.records import Session


def _ends_at(created_at: int, last_seen_at: int, settings: SessionSettings) -> int:
    return min(last_seen_at + settings.idle_timeout, created_at + settings.absolute_timeout)


def start_session(
    storage: Storage, user_sub: str, now: int, settings: SessionSettings
) -> tuple[str, Session]:
    """A new session of the user: its id (for the cookie only) and what is stored."""
    session_id = secrets.token_urlsafe(32)
    session = Session(
        digest=secrets_at_rest.digest(session_id),
        user_sub=user_sub,
        csrf_secret=secrets.token_urlsafe(32),
        created_at=now,
        last_seen_at=now,
        expires_at=_ends_at(now, now, settings),
    )
    storage.add_session(session)
    return session_id, session


def resume_session(
    storage: Storage, unverified_id: str, now: int, settings: SessionSettings
) -> Session | None:
    """The live session of this id, its idle time restarted; None (and an expired one deleted)
    otherwise. The timeouts are today's settings, whatever they were at sign-in."""
    digest = secrets_at_rest.digest(unverified_id)
    session = storage.get_session(digest)
    if session is None:
        return None
    if now >= _ends_at(session.created_at, session.last_seen_at, settings):
        storage.delete_session(digest)
        return None
    expires_at = _ends_at(session.created_at, now, settings)
    if not storage.touch_session(digest, now, expires_at):
        return None
    return Session(
        session.digest, session.user_sub, session.csrf_secret, session.created_at, now, expires_at
    )


def end_session(storage: Storage, unverified_id: str) -> bool:
    return storage.delete_session(secrets_at_rest.digest(unverified_id))

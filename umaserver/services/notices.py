"""Notices (issue 25, item 4): what the server tells a person ("alice shared Holiday photos with
you", "bob asks to print Holiday photos", "alice approved your request", an invitation's link).

A notice is written by `notify` inside the caller's transaction, so that it exists exactly when
what it tells of happened. It shows on the person's `/notices` page (a user's; an invitation is
for a bare address and shows nowhere), and it is mailed when `[mail]` is configured and an
address is known: the one given, else the person's verified account e-mail
(`account_claims.account_values`). The mail is sent later by the sender's background job
(`services.mail_sender`), never inside a request, so that a mail server that is slow or down
never fails or holds up what the person did.

The words of each moment are one function here (`shared_with_you`, `request_to_owner`,
`decision_to_party`, `invitation`), each returning a `Message`, so that the pages, the mail and
the parts that call them (shares now; requests and invitations when they are wired) say the same.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..config import Config
from ..storage import Storage
from ..storage.people_records import Notice, NoticeKind
from .account_claims import account_values

# The longest subject written: a mail client shows about this much, and a set's name is the
# resource server's, of any length.
SUBJECT_LENGTH = 150
# Notices one page of /notices shows.
PAGE_SIZE = 30


@dataclass(frozen=True)
class Outbox:
    """What notices need to know of the server: its issuer (every link is an absolute URL on
    it) and whether mail is configured (`[mail]`)."""

    issuer: str
    mail: bool

    @classmethod
    def of(cls, config: Config) -> Outbox:
        return cls(config.issuer, config.mail is not None)

    def url(self, path: str) -> str:
        return self.issuer + path


@dataclass(frozen=True)
class Message:
    """One notice's words: its kind, a one-line subject, a plain-text body, and a link."""

    kind: NoticeKind
    subject: str
    body: str
    link: str


def notify(
    storage: Storage,
    outbox: Outbox,
    message: Message,
    *,
    now: int,
    user_sub: str | None = None,
    address: str | None = None,
) -> Notice:
    """Writes `message` as a notice for the user `user_sub` and/or the address `address` (in the
    caller's transaction, when one is open). Without `address`, the user's verified account
    e-mail is used, if any. The mail is pending (due now) when `[mail]` is configured and an
    address is known; otherwise the notice is only shown on the pages."""
    if user_sub is None and address is None:
        raise ValueError("a notice is for a user, an address, or both")
    if address is None and user_sub is not None:
        user = storage.get_user(user_sub)
        found = None if user is None else account_values(user).get("email")
        address = found if isinstance(found, str) else None
    mailed = outbox.mail and address is not None
    notice = Notice(
        id=secrets.token_urlsafe(16),
        user_sub=user_sub,
        address=address,
        kind=message.kind,
        subject=message.subject,
        body=message.body,
        link=message.link,
        created_at=now,
        mail_state="pending" if mailed else "none",
        next_attempt_at=now if mailed else None,
    )
    storage.add_notice(notice)
    return notice


def unseen_count(storage: Storage, user_sub: str) -> int:
    """How many of the person's notices they have not seen yet (the header's count)."""
    return storage.count_unseen_notices(user_sub)


def page_of(
    storage: Storage, user_sub: str, now: int, before: tuple[int, int] | None = None
) -> tuple[list[Notice], tuple[int, int] | None]:
    """One page of the person's notices, newest first, as they were before this visit (`seen_at`
    None: new), and the cursor of the next page (None: this is the last). Every notice of the
    person made until `now` is seen from now on."""
    found = storage.notices_of(user_sub, PAGE_SIZE + 1, before=before)
    shown = found[:PAGE_SIZE]
    following = None
    if len(found) > PAGE_SIZE:
        following = (shown[-1].created_at, shown[-1].seq)
    storage.mark_notices_seen(user_sub, now)
    return shown, following


# -- the words of each moment ----------------------------------------------------------------


def shared_with_you(
    outbox: Outbox, *, owner: str, set_name: str, scopes: Sequence[str], until: int | None
) -> Message:
    """To a local user an owner shared a set with: "alice shared Holiday photos with you: view,
    print, until 28 Nov 2026"."""
    what = _what(scopes, until)
    link = outbox.url("/notices")
    return Message(
        "share",
        _subject(f"{owner} shared {set_name} with you"),
        f"{owner} shared {set_name} with you: {what}.\n\n"
        "The apps you use with your account on this server may now do that for you.\n",
        link,
    )


def request_to_owner(
    outbox: Outbox, *, party: str, client_name: str, set_name: str, scopes: Sequence[str]
) -> Message:
    """To an owner, for a person's new request: "bob asks to view, print Holiday photos"."""
    link = outbox.url("/policy/requests")
    return Message(
        "request",
        _subject(f"{party} asks to {', '.join(scopes)} {set_name}"),
        f"{party} asks, through the app {client_name}, to {', '.join(scopes)} {set_name}.\n\n"
        f"Approve or deny the request: {link}\n",
        link,
    )


def decision_to_party(
    outbox: Outbox,
    *,
    owner: str,
    set_name: str,
    scopes: Sequence[str],
    approved: bool,
    until: int | None = None,
) -> Message:
    """To the person who asked, for the owner's answer: approved (for these scopes, until this
    day) or denied."""
    link = outbox.url("/notices")
    if approved:
        return Message(
            "approved",
            _subject(f"{owner} approved your request for {set_name}"),
            f"{owner} approved your request for {set_name}: {_what(scopes, until)}.\n\n"
            "The app that asked may now do that for you.\n",
            link,
        )
    return Message(
        "denied",
        _subject(f"{owner} denied your request for {set_name}"),
        f"{owner} denied your request to {', '.join(scopes)} {set_name}.\n",
        link,
    )


def invitation(
    outbox: Outbox,
    *,
    owner: str,
    set_name: str,
    scopes: Sequence[str],
    link: str,
    expires_at: int,
) -> Message:
    """To an e-mail address an owner shared a set with, for which no local user exists: the
    invitation's link (a secret: only the address's owner gets it), and until when it works."""
    return Message(
        "invitation",
        _subject(f"{owner} shared {set_name} with you"),
        f"{owner} shared {set_name} with you: {', '.join(scopes)}.\n\n"
        f"Accept the invitation by following this link (it works once, until"
        f" {_moment(expires_at)}):\n\n{link}\n\n"
        "If you did not expect this mail, ignore it: nothing happens until the link is used.\n",
        link,
    )


def _what(scopes: Sequence[str], until: int | None) -> str:
    """ "view, print, until 28 Nov 2026" (the last day a share holds, UTC)."""
    text = ", ".join(scopes)
    if until is not None:
        day = datetime.fromtimestamp(until - 1, UTC).date()
        text += f", until {day.day} {day:%b %Y}"
    return text


def _moment(moment: int) -> str:
    found = datetime.fromtimestamp(moment, UTC)
    return f"{found.day} {found:%b %Y, %H:%M} UTC"


def _subject(text: str) -> str:
    """One line (a mail header never holds a line break), at most `SUBJECT_LENGTH` characters."""
    line = " ".join(text.split())
    if len(line) > SUBJECT_LENGTH:
        line = line[: SUBJECT_LENGTH - 1].rstrip() + "…"
    return line

"""Invitations' pages (issue 25, item 2): the invited person's page and the owner's two buttons.

- `GET /invitations/<token>`: what the link is. Usable: who shares what, and a way in: "Accept"
  for a signed-in person; for a signed-out one "Sign in to accept" (the sign-in page comes back
  here) and, with `[sharing] invitations_create_accounts = true`, a form to choose a username and
  a password. Accepted already or expired: 410 with a page saying so; unknown (never made,
  replaced by a newer link, cancelled, or pruned): 404 with a page saying so.
- `POST /invitations/<token>/accept` (signed in) and `POST /invitations/<token>/account` (a new
  account, then signed in): `services.invitations.accept`; the answer is a page saying what the
  person may now do.
- `POST /policy/resource_set/<_id>/invitations/<rule_id>/new_link` and `.../cancel`: the owner's
  "New link" (the set's page then shows the new link, once) and "Cancel", each a 303 back to the
  set's page.

The set's page lists pending invitations and shows a new link once (`pages/_invitations.html`,
included by `policy_set.html`): its context comes from `invitations_context`, a context processor,
so the set's page needs nothing of this module; a new link travels to it in the session cookie
(`remember_link`), taken on the first page that shows it. Every form carries the CSRF token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, abort, redirect, session
from werkzeug.wrappers import Response as BaseResponse

from .. import secrets_at_rest
from ..config import MAX_PASSWORD_LENGTH
from ..runtime import runtime
from ..services import accounts, invitations, notices, shares, signin
from ..storage.per_request import storage
from ..storage.records import ResourceSet, User
from . import csrf, sessions
from .forms import one_field
from .rendering import render

bp = Blueprint("invitations", __name__, template_folder="templates")
log = logging.getLogger("umaserver.policy")

MAX_ID = 256  # longer is no _id of ours
# The session key under which a new link waits to be shown once on its set's page.
NEW_LINK = "new_invitation_link"
USERNAME_LENGTH = 64
# The most characters of a password field read: a password longer than sign-in reads
# (config.MAX_PASSWORD_LENGTH) gets a message next to its field, one far longer a 400 page.
MAX_PASSWORD_FIELD = 4 * MAX_PASSWORD_LENGTH


def remember_link(new: invitations.NewInvitation, rs_id: str) -> None:
    """Keeps the new link for the set's page to show once."""
    session[NEW_LINK] = {
        "rule_id": new.invitation.rule_id,
        "rs_id": rs_id,
        "link": new.link,
        "address": new.invitation.address,
    }


@dataclass(frozen=True)
class PendingView:
    rule_id: str
    address: str
    expires: str  # "3 Dec 2026, 12:00 UTC"
    expired: bool


def _when(moment: int) -> str:
    at = datetime.fromtimestamp(moment, UTC)
    return f"{at.day} {at:%b %Y, %H:%M} UTC"


def _day(until: int) -> str:
    """The last day a share holds, as the set's page says it: "28 Nov 2026"."""
    day = shares.last_day(until)
    return f"{day.day} {day:%b %Y}"


def _set_invitations(resource_set: ResourceSet) -> dict[str, Any]:
    """The pending invitations of the set's shares, and the new link to show once (taken)."""
    user = sessions.current_user()
    if user is None or user.sub != resource_set.owner:
        return {"invitations": [], "new_link": None}
    now = runtime().clock.now()
    rule_ids = [s.rule_id for s in storage().shares_of(user.sub, resource_set.id)]
    pending = [
        PendingView(i.rule_id, i.address, _when(i.expires_at), i.expires_at <= now)
        for i in invitations.pending(storage(), user.sub, rule_ids)
    ]
    shown = session.get(NEW_LINK)
    new_link = None
    if isinstance(shown, dict) and shown.get("rs_id") == resource_set.id:
        session.pop(NEW_LINK, None)
        if shown.get("rule_id") in rule_ids:
            new_link = shown
    return {"invitations": pending, "new_link": new_link}


@bp.app_context_processor
def invitations_context() -> dict[str, Any]:
    return {"set_invitations": _set_invitations}


# -- the invited person ----------------------------------------------------------------------


def _found(token: str) -> invitations.Found:
    return invitations.look_up(storage(), token, runtime().clock.now())


def _gone(state: invitations.LinkState) -> BaseResponse:
    titles = {
        "unknown": "This invitation link does not work",
        "used": "This invitation has been accepted",
        "expired": "This invitation has expired",
    }
    return render(
        "pages/invitation.html",
        404 if state == "unknown" else 410,
        state=state,
        title=titles.get(state, titles["unknown"]),
        message=invitations.REFUSALS[state],
    )


def _page(
    token: str,
    found: invitations.Found,
    *,
    status: int = 200,
    errors: dict[str, str] | None = None,
    username: str = "",
    accepted: bool = False,
) -> BaseResponse:
    assert found.share is not None and found.resource_set is not None
    return render(
        "pages/invitation.html",
        status,
        state="accepted" if accepted else found.state,
        title="You have access" if accepted else "An invitation to share",
        token=token,
        owner=found.owner,
        address=found.share.recipient if found.invitation is None else found.invitation.address,
        name=found.resource_set.label,
        scopes=found.share.scopes,
        until=None if found.share.until is None else _day(found.share.until),
        person=sessions.current_user(),
        create_accounts=runtime().config.sharing.invitations_create_accounts,
        signin=sessions.signin_url(f"/invitations/{token}"),
        errors=errors or {},
        username=username,
    )


@bp.get("/invitations/<token>")
def invitation(token: str) -> BaseResponse:
    found = _found(token)
    if found.state != "usable":
        return _gone(found.state)
    return _page(token, found)


def _accept(token: str, user: User, found: invitations.Found) -> BaseResponse:
    try:
        accepted = invitations.accept(storage(), token, user, runtime().clock.now())
    except invitations.InvitationRefused as refused:
        if refused.state == "own":
            return _page(token, found, status=400, errors={"accept": refused.message})
        return _gone(refused.state)
    return _page(token, accepted, accepted=True)


@bp.post("/invitations/<token>/accept")
def accept(token: str) -> BaseResponse:
    csrf.require()
    found = _found(token)
    if found.state != "usable":
        return _gone(found.state)
    user = sessions.current_user()
    if user is None:
        return redirect(sessions.signin_url(f"/invitations/{token}"), 303)
    return _accept(token, user, found)


def _account_errors(username: str, password: str, again: str) -> dict[str, str]:
    errors = {}
    if not username:
        errors["username"] = "Choose a username: the name you will sign in with."
    elif len(username) > USERNAME_LENGTH or any(c.isspace() for c in username):
        errors["username"] = (
            f"A username has at most {USERNAME_LENGTH} characters and no spaces: choose another."
        )
    else:
        problem = accounts.username_problem(username)
        if problem is not None:
            errors["username"] = problem
    if (problem := signin.password_problem(password, runtime().config.signin)) is not None:
        errors["password"] = problem
    elif password != again:
        errors["again"] = "The two passwords are not the same: type the password again."
    return errors


@bp.post("/invitations/<token>/account")
def create_account(token: str) -> BaseResponse:
    csrf.require()
    found = _found(token)
    if found.state != "usable":
        return _gone(found.state)
    if not runtime().config.sharing.invitations_create_accounts:
        abort(404)
    username = one_field("username", 4 * USERNAME_LENGTH, required=True).strip()
    password = one_field("password", MAX_PASSWORD_FIELD, required=True)
    again = one_field("again", MAX_PASSWORD_FIELD, required=True)
    errors = _account_errors(username, password, again)
    if errors:
        return _page(token, found, status=400, errors=errors, username=username)
    password_hash = secrets_at_rest.hash_password(password)
    now = runtime().clock.now()
    store = storage()
    try:
        with store.transaction():
            user = accounts.create_user(store, now, username, password_hash, {})
            if user is None:
                taken = {"username": "This username is taken: choose another."}
                return _page(token, found, status=400, errors=taken, username=username)
            accepted = invitations.accept(store, token, user, now)
    except invitations.InvitationRefused as refused:  # the link was used meanwhile
        return _gone("unknown" if refused.state == "own" else refused.state)
    created = store.get_user(user.sub)
    assert created is not None
    sessions.sign_in(created)
    log.info("account created through an invitation: user=%s", username)
    return _page(token, accepted, accepted=True)


# -- the owner ---------------------------------------------------------------------------------


def _owned_set(user: User, rs_id: str) -> ResourceSet:
    """The set when it is `user`'s; the 404 page otherwise, the same for an unknown id."""
    found = storage().find_resource_set(rs_id) if len(rs_id) <= MAX_ID else None
    if found is None or found.owner != user.sub:
        abort(404)
    return found


def _back(rs_id: str) -> BaseResponse:
    return redirect(runtime().config.url(f"/policy/resource_set/{rs_id}") + "#invitations", 303)


@bp.post("/policy/resource_set/<rs_id>/invitations/<rule_id>/new_link")
@sessions.signin_required
def new_link(rs_id: str, rule_id: str) -> BaseResponse:
    csrf.require()
    user = sessions.current_user()
    assert user is not None
    resource_set = _owned_set(user, rs_id)
    config = runtime().config
    made = invitations.new_link(
        storage(),
        user,
        resource_set,
        rule_id,
        runtime().clock.now(),
        lifetime=config.sharing.invitation_lifetime,
        issuer=config.issuer,
        outbox=notices.Outbox.of(config),
    )
    # Gone already (accepted, cancelled, stopped): the page shows it is no longer pending.
    if made is not None:
        remember_link(made, rs_id)
    return _back(rs_id)


@bp.post("/policy/resource_set/<rs_id>/invitations/<rule_id>/cancel")
@sessions.signin_required
def cancel(rs_id: str, rule_id: str) -> BaseResponse:
    csrf.require()
    user = sessions.current_user()
    assert user is not None
    invitations.cancel(storage(), user, _owned_set(user, rs_id), rule_id)
    return _back(rs_id)

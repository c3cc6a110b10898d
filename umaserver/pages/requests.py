"""The owner's requests (issue 25, item 3): `GET /policy/requests` and the answer to one,
`POST /policy/requests/<id>`.

The signed-in owner's pending requests, newest first: who asks (the person's username as
registered), through which app (its name as it was), for which set and scopes, and when. Each
has one form: the scopes asked as checkboxes (checked to start with), an optional `until` date,
and the buttons Approve and Deny (`action`). Decided and expired requests are listed below,
without forms. An answer that cannot be taken is the page again, with a sentence next to the
field it is about. Signed out: to sign-in and back. No script.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from flask import Blueprint, abort, redirect, request
from werkzeug.wrappers import Response as BaseResponse

from ..runtime import runtime
from ..services import notices, owner_requests, shares
from ..storage.people_records import AccessRequest
from ..storage.per_request import storage
from ..storage.records import User
from . import csrf, sessions
from .forms import INCOMPLETE, one_field
from .rendering import render

bp = Blueprint("requests", __name__, template_folder="templates")

MAX_ID = 128
ACTIONS = ("approve", "deny")


@dataclass(frozen=True)
class RequestView:
    id: str
    who: str
    app: str
    rs_id: str
    rs_name: str
    scopes: tuple[str, ...]
    when: str
    status: str
    approved: tuple[str, ...]
    checked: tuple[str, ...]  # the scopes checked in its form
    until: str  # the date typed in its form
    errors: Mapping[str | None, str]

    def error(self, name: str | None) -> str | None:
        return self.errors.get(name)


def _when(moment: int) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%-d %b %Y, %H:%M UTC")


def _view(
    asked: AccessRequest,
    names: dict[str, str],
    *,
    checked: tuple[str, ...] | None = None,
    until: str = "",
    errors: Mapping[str | None, str] | None = None,
) -> RequestView:
    store = storage()
    if asked.resource_set_id not in names:
        found = store.find_resource_set(asked.resource_set_id)
        names[asked.resource_set_id] = found.label if found is not None else asked.resource_set_id
    return RequestView(
        id=asked.id,
        who=store.get_username(asked.party) or asked.party_name,
        app=asked.client_name,
        rs_id=asked.resource_set_id,
        rs_name=names[asked.resource_set_id],
        scopes=asked.scopes,
        when=_when(asked.created_at),
        status=asked.status,
        approved=asked.approved_scopes or (),
        checked=asked.scopes if checked is None else checked,
        until=until,
        errors=errors or {},
    )


def _render(user: User, *, status: int = 200, answered: RequestView | None = None) -> BaseResponse:
    pending, decided = owner_requests.requests_for_owner(storage(), user.sub, runtime().clock.now())
    names: dict[str, str] = {}
    # An answer to a request no longer pending (answered meanwhile, expired): said at the top.
    notice = None
    if answered is not None and all(found.id != answered.id for found in pending):
        notice = next(iter(answered.errors.values()), None)
    views = [
        answered if answered is not None and answered.id == found.id else _view(found, names)
        for found in pending
    ]
    return render(
        "pages/policy_requests.html",
        status,
        pending=views,
        decided=[_view(found, names) for found in decided],
        notice=notice,
        takes=owner_requests.takes_requests(storage(), user.sub, runtime().config.sharing),
        server_takes=runtime().config.sharing.requests,
    )


def _signed_in() -> User:
    user = sessions.current_user()
    assert user is not None  # signin_required
    return user


@bp.get("/policy/requests")
@sessions.signin_required
def requests_page() -> BaseResponse:
    return _render(_signed_in())


@bp.post("/policy/requests/<request_id>")
@sessions.signin_required
def answer(request_id: str) -> BaseResponse:
    csrf.require()
    user = _signed_in()
    if len(request_id) > MAX_ID:
        abort(404)
    action = one_field("action", 16)
    if action not in ACTIONS:
        abort(400, description=INCOMPLETE)
    until_text = one_field("until", 64)
    scopes = request.form.getlist("scopes")
    if len(scopes) > 256 or any(len(scope) > 256 for scope in scopes):
        abort(400, description=INCOMPLETE)
    store = storage()
    now = runtime().clock.now()
    found = store.get_request(request_id)
    if found is None or found.owner != user.sub:
        abort(404)
    errors: dict[str | None, str] = {}
    try:
        outbox = notices.Outbox.of(runtime().config)
        if action == "deny":
            owner_requests.deny(store, user.sub, request_id, now, outbox=outbox)
        else:
            # No scope checked: all of those asked (the decision).
            until = shares.end_of_day(until_text, now)
            owner_requests.approve(
                store,
                user.sub,
                request_id,
                scopes,
                until,
                now,
                limit=runtime().config.limits.shares_per_owner,
                outbox=outbox,
            )
    except (owner_requests.RequestRefused, shares.ShareRefused) as refused:
        # A share refused for its `to` is about the person: the whole request.
        field = refused.field if refused.field in ("scopes", "until") else None
        errors[field] = refused.message
    if errors:
        view = _view(found, {}, checked=tuple(scopes), until=until_text, errors=errors)
        return _render(user, status=400, answered=view)
    return redirect(runtime().config.url("/policy/requests"), 303)

"""The owner's access history (issue 25, item 5): `GET /policy/history`.

The signed-in owner's events, newest first, `PAGE_SIZE` at a time (`before`: the cursor
`<at>.<seq>` of the last event of the page before), only those of one set with `resource_set`.
Each event names the set, the app and the person as they were named then (the person by
username); what was decided is said in words. Signed out: to sign-in and back. No script.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from flask import Blueprint, abort, request
from werkzeug.wrappers import Response as BaseResponse

from ..policy.rule_file import OWNER_RULE_PREFIX
from ..runtime import runtime
from ..services import shares
from ..storage.people_records import Event
from ..storage.per_request import storage
from ..storage.records import OwnedResourceSet
from . import sessions
from .rendering import render

bp = Blueprint("history", __name__, template_folder="templates")

PAGE_SIZE = 50
MAX_ID = 256  # longer is no _id of ours
# The sets offered in the filter's list; an owner with more filters from a set's own page.
LISTED_SETS = 100
_CURSOR = re.compile(r"(\d{1,12})\.(\d{1,18})")

# What was decided, in words, by (kind, outcome); anything else is shown as it is stored.
WORDS = {
    ("grant", "granted"): "Granted",
    ("decision", "granted"): "Allowed",
    ("decision", "refused"): "Refused",
    ("decision", "needs claims"): "More information needed",
    ("decision", "request submitted"): "Refused by your rules; asked you",
    ("approval", "approved"): "You approved it",
    ("denial", "denied"): "You denied it",
}

STYLES = {
    "granted": "decision-grant",
    "refused": "decision-deny",
    "approved": "decision-grant",
    "denied": "decision-deny",
}


@dataclass(frozen=True)
class EventView:
    when: str
    kind: str
    rs_id: str
    rs_name: str
    scopes: str
    client_name: str
    party: str | None
    what: str
    style: str  # the class that colours it: decision-grant, decision-deny or none
    decided_by: str | None


def _when(moment: int) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%-d %b %Y, %H:%M:%S UTC")


def _decided_by(ids: str | None, titles: Mapping[str, str]) -> str | None:
    """The rules or share that decided, by their titles today ("your share with bob"); a rule
    since deleted by its id, or as "a rule of yours since deleted" when the server made its id."""
    if ids is None:
        return None
    return ", ".join(
        titles.get(one)
        or ("a rule of yours since deleted" if one.startswith(OWNER_RULE_PREFIX) else one)
        for one in ids.split(", ")
    )


def _view(event: Event, titles: Mapping[str, str]) -> EventView:
    return EventView(
        when=_when(event.at),
        kind=event.kind,
        rs_id=event.rs_id,
        rs_name=event.rs_name,
        scopes=", ".join(event.scopes),
        client_name=event.client_name,
        party=event.party,
        what=WORDS.get((event.kind, event.outcome), f"{event.kind}: {event.outcome}"),
        style=STYLES.get(event.outcome, ""),
        decided_by=_decided_by(event.decided_by, titles),
    )


def _one(name: str, limit: int) -> str | None:
    values = request.args.getlist(name)
    if len(values) > 1:
        abort(400, description=f"The parameter {name} is given more than once.")
    if values and len(values[0]) > limit:
        abort(400, description=f"The parameter {name} is too long.")
    return values[0] or None if values else None


def _cursor() -> tuple[int, int] | None:
    text = _one("before", 40)
    if text is None:
        return None
    matched = _CURSOR.fullmatch(text)
    if matched is None:
        abort(400, description="This page link is broken. Go back to the first page.")
    return int(matched[1]), int(matched[2])


@bp.get("/policy/history")
@sessions.signin_required
def history() -> BaseResponse:
    user = sessions.current_user()
    assert user is not None  # signin_required
    rs_id = _one("resource_set", MAX_ID)
    before = _cursor()
    store = storage()
    # One more than shown: whether there is a next page.
    found = store.events_of(user.sub, PAGE_SIZE + 1, rs_id=rs_id, before=before)
    shown = found[:PAGE_SIZE]
    following = None
    if len(found) > PAGE_SIZE:
        last = shown[-1]
        following = {"before": f"{last.at}.{last.seq}"}
        if rs_id is not None:
            following["resource_set"] = rs_id
    chosen = None
    if rs_id is not None:
        resource_set = store.find_resource_set(rs_id)
        if resource_set is not None and resource_set.owner == user.sub:
            chosen = resource_set.label
        elif shown:
            chosen = shown[0].rs_name  # a set since deleted: named as it was
    titles = shares.rule_titles(store, runtime().policies.rules, user) if shown else {}
    sets: list[OwnedResourceSet] = store.resource_sets_of(
        user.sub, runtime().clock.now(), None, LISTED_SETS
    )
    return render(
        "pages/policy_history.html",
        events=[_view(event, titles) for event in shown],
        rs_id=rs_id,
        chosen=chosen,
        sets=sets,
        following=following,
        paged=before is not None,
    )

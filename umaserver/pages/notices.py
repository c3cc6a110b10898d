"""A person's notices (issue 25, item 4): `GET /notices`.

What the server told the signed-in person (a share made with them, a request to them as an
owner, the answer to their request), newest first, `notices.PAGE_SIZE` at a time (`before`: the
cursor `<created_at>.<seq>` of the last notice of the page before). The notices shown new are
those the person had not seen; visiting marks every notice of theirs seen (the header's count,
`services.notices.unseen_count`, drops to 0). Signed out: to sign-in and back. No script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from flask import Blueprint, abort, request
from werkzeug.wrappers import Response as BaseResponse

from ..runtime import runtime
from ..services import notices
from ..storage.people_records import Notice
from ..storage.per_request import storage
from . import sessions
from .rendering import render

bp = Blueprint("notices", __name__, template_folder="templates")

_CURSOR = re.compile(r"(\d{1,12})\.(\d{1,18})")


@dataclass(frozen=True)
class NoticeView:
    when: str
    subject: str
    paragraphs: list[str]
    link: str | None  # where it leads, when that is not this page
    new: bool


def _view(notice: Notice, here: str) -> NoticeView:
    return NoticeView(
        when=datetime.fromtimestamp(notice.created_at, UTC).strftime("%-d %b %Y, %H:%M UTC"),
        subject=notice.subject,
        paragraphs=[part.strip() for part in notice.body.split("\n\n") if part.strip()],
        link=None if notice.link == here else notice.link,
        new=notice.seen_at is None,
    )


def _cursor() -> tuple[int, int] | None:
    values = request.args.getlist("before")
    if len(values) > 1:
        abort(400, description="The parameter before is given more than once.")
    if not values or not values[0]:
        return None
    matched = _CURSOR.fullmatch(values[0])
    if matched is None:
        abort(400, description="This page link is broken. Go back to the first page.")
    return int(matched[1]), int(matched[2])


@bp.get("/notices")
@sessions.signin_required
def notices_page() -> BaseResponse:
    user = sessions.current_user()
    assert user is not None  # signin_required
    before = _cursor()
    config = runtime().config
    shown, following = notices.page_of(storage(), user.sub, runtime().clock.now(), before)
    return render(
        "pages/notices.html",
        notices=[_view(notice, config.url("/notices")) for notice in shown],
        following=None if following is None else f"{following[0]}.{following[1]}",
        paged=before is not None,
        mail=config.mail is not None,
    )

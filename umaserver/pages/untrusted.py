"""Showing untrusted content from registration on pages (issue 12): scope descriptions, icons,
logos and links to third-party pages.

Nothing here fetches: each function reads what the background job (`fetching.job`) found for a
URI, and queues the URI when it has no row yet (the page shows the raw value at once; a later
visit shows the result). Templates reach these as globals (`scope_view`, `link_view`,
`image_src`): see `init_app`.

- `scope_view(scope)`: the raw scope always; `name` (and `icon_src`, once its icon is checked)
  once the scope description was fetched and checked, else None. `status`: "checked", "pending",
  "failed", or "not checked" (a plain scope string, not an http(s) URI).
- `link_view(uri)`: `href` is the interstitial `/link/<id>` of a checked web page, else None;
  `status` "checked", "pending" (queued now or before), "failed", or "not checked" (not an
  http(s) URI, or one on a loopback or private address or `localhost`, such as a native
  application's redirect URI: never fetched, never linked).
- `image_src(uri)`: `/images/<id>`, this server's copy of a checked image, else None.

Routes: `GET /link/<id>` (a page: says the page is not this server's, shows the full URL and links
to it; the id names a row of URIs this server queued, never a URL given by the visitor, so it is
no open redirect), and `GET /images/<id>` (the stored image with its checked type, `nosniff`, a
sandboxing CSP, cacheable: a new fetch stores the image under a new id).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, abort

from ..errors import NotFound
from ..fetching import addresses, running
from ..fetching.content import is_fetchable
from ..fetching.queue import queue
from ..runtime import runtime
from ..storage.per_request import storage
from ..storage.records import FetchedUri, FetchKind
from .rendering import PAGE_BLUEPRINTS, render


@dataclass(frozen=True)
class ScopeView:
    scope: str  # the raw scope string, always shown somewhere
    name: str | None  # the fetched description's name, once the fetch worked
    icon_src: str | None  # a path of this server serving the checked icon, or None
    status: str = "not checked"  # "checked", "pending", "failed" or "not checked"


@dataclass(frozen=True)
class LinkView:
    uri: str  # the full URL, shown as text
    href: str | None  # the interstitial's path on this server, or None: not a link
    status: str  # "checked", "not checked", "failed" or "pending", shown next to it


bp = Blueprint("untrusted", __name__)
images_bp = Blueprint("images", __name__)


def _row(uri: str, kind: FetchKind) -> FetchedUri | None:
    """The row of (uri, kind), queued now (and the job woken) when it had none."""
    store = storage()
    row = store.get_fetched_uri(uri, kind)
    if row is None:
        row = queue(store, uri, kind, runtime().clock.now())
        running.wake()
    return row


def scope_view(scope: str) -> ScopeView:
    if not is_fetchable(scope):
        return ScopeView(scope, None, None)
    row = _row(scope, "scope")
    if row is None or row.status != "checked":
        return ScopeView(scope, None, None, "pending" if row is None else row.status)
    icon = image_src(row.icon_uri) if row.icon_uri else None
    return ScopeView(scope, row.name, icon, "checked")


def link_view(uri: str) -> LinkView:
    if not is_fetchable(uri) or _never_checked(uri):
        return LinkView(uri, None, "not checked")
    row = _row(uri, "page")
    if row is None:
        return LinkView(uri, None, "pending")
    if row.status == "checked":
        return LinkView(uri, f"/link/{row.id}", "checked")
    return LinkView(uri, None, row.status)


def image_src(uri: str | None) -> str | None:
    if not uri or not is_fetchable(uri):
        return None
    row = _row(uri, "image")
    if row is None or row.status != "checked" or row.image_id is None:
        return None
    return f"/images/{row.image_id}"


def _never_checked(uri: str) -> bool:
    """A URI on this machine or a private network (a native application's redirect URI, say):
    the fetcher would refuse it, so it is shown as not checked rather than as failed."""
    host = (urlsplit(uri).hostname or "").rstrip(".")
    allow_loopback = runtime().config.fetch.allow_loopback
    if host == "localhost" or host.endswith(".localhost"):
        return not allow_loopback
    address = addresses.parse(host)
    return address is not None and addresses.refusal(address, allow_loopback) is not None


@bp.get("/link/<path:row_id>")  # any path: a URL pasted here gets the 404 page too
def interstitial(row_id: str) -> Response:
    row = storage().fetched_uri_by_id(row_id)
    # Only links to pages: the ids of scope descriptions and images lead nowhere here.
    if row is None or row.kind != "page" or not is_fetchable(row.uri):
        abort(404)
    return render("pages/link.html", row=row)


@images_bp.get("/images/<image_id>")
def image(image_id: str) -> Response:
    found = storage().get_fetched_image(image_id)
    if found is None:
        raise NotFound("There is no such image.")
    response = Response(found.data, mimetype=found.content_type)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response.headers["Cross-Origin-Resource-Policy"] = "same-origin"
    # The bytes under an id never change (a new fetch stores a new id).
    lifetime = runtime().config.fetch.cache_lifetime
    response.headers["Cache-Control"] = f"private, max-age={lifetime}, immutable"
    return response


def init_app(app: Flask) -> None:
    app.jinja_env.globals.update(scope_view=scope_view, link_view=link_view, image_src=image_src)
    # The interstitial is a page (page headers, HTML errors); images are not pages.
    app.register_blueprint(bp)
    app.extensions.setdefault(PAGE_BLUEPRINTS, set()).add(bp.name)
    app.register_blueprint(images_bp)

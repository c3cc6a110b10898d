"""What registrations point at, checked in the background (issue 12): scope descriptions served
on loopback (allowed by `[fetch] allow_loopback`, the test setting), icons and logos served by
this server after the check, the interstitial before a third-party page, the retry backoff and
the cache lifetime. The app's fetch thread is stopped: each test runs the job's one step itself
(`run_once`), with the app's FakeClock."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import Config, FetchSettings
from umaserver.fetching import running
from umaserver.fetching.fetcher import Fetcher
from umaserver.fetching.job import FetchJob
from umaserver.pages.untrusted import LinkView, ScopeView, image_src, link_view, scope_view
from umaserver.storage.records import FetchedUri, FetchKind

from .conftest import FakeClock, Party, Store, make_initial_access_token, make_party, write_config
from .fake_web import PNG, SVG, FakeWeb, Route
from .test_fetcher import RecordingConnect

COLLECTION = "/rs/resource_set"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    extra = (
        "[fetch]\nallow_loopback = true\ntimeout = 1\nmax_bytes = 4096\n"
        "cache_lifetime = 600\nretry_max = 120\n"
    )
    return write_config(tmp_path, extra=extra)


@pytest.fixture
def job(app: Flask) -> FetchJob:
    """The app's fetch job, its thread stopped: the test runs its steps."""
    found = running.fetch_job(app)
    found.stop()
    return found


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as started:
        yield started


@pytest.fixture
def rs(store: Store) -> Party:
    return make_party(store, "alice", "uma_protection")


def register_set(http: FlaskClient, rs: Party, scopes: list[str], **extra: Any) -> str:
    answer = http.post(
        COLLECTION, json={"name": "Photos", "scopes": scopes, **extra}, headers=rs.auth
    )
    assert answer.status_code == 201, answer.text
    rs_id: str = answer.get_json()["_id"]
    return rs_id


def scope(app: Flask, uri: str) -> ScopeView:
    with app.test_request_context("/"):
        return scope_view(uri)


def link(app: Flask, uri: str) -> LinkView:
    with app.test_request_context("/"):
        return link_view(uri)


def image(app: Flask, uri: str | None) -> str | None:
    with app.test_request_context("/"):
        return image_src(uri)


def row(store: Store, uri: str, kind: FetchKind) -> FetchedUri:
    found = store.get_fetched_uri(uri, kind)
    assert found is not None
    return found


def describe(web: FakeWeb, path: str, name: str, icon: str | None = None) -> str:
    body = f'{{"name": "{name}"' + (f', "icon_uri": "{web.url(icon)}"' if icon else "") + "}"
    web.routes[path] = Route(body=body.encode(), content_type="application/json")
    return web.url(path)


# -- scope descriptions -------------------------------------------------------------------------


def test_the_name_and_icon_of_a_scope_description_appear_after_the_job_runs(
    app: Flask, http: FlaskClient, job: FetchJob, web: FakeWeb, rs: Party
) -> None:
    uri = describe(web, "/scopes/view.json", "View your photos", icon="/scopes/view.png")
    web.routes["/scopes/view.png"] = Route(body=PNG, content_type="image/png")
    register_set(http, rs, [uri, "print"])
    # Queued by the registration, fetched by nobody yet: the raw scope.
    assert scope(app, uri) == ScopeView(uri, None, None, "pending")
    assert web.requests == []
    assert job.run_once() == 1
    shown = scope(app, uri)
    assert (shown.name, shown.status) == ("View your photos", "checked")
    assert shown.icon_src is None  # the icon is queued now, checked by the next step
    assert job.run_once() == 1
    icon_src = scope(app, uri).icon_src
    assert icon_src is not None and icon_src.startswith("/images/")
    assert web.paths_asked() == ["/scopes/view.json", "/scopes/view.png"]
    assert web.requests[0][1]["Accept"] == "application/json"
    # A plain scope is shown as it is, never fetched.
    assert scope(app, "print") == ScopeView("print", None, None, "not checked")
    assert job.run_once() == 0


def test_a_page_asking_about_an_unknown_scope_queues_it(
    app: Flask, job: FetchJob, web: FakeWeb
) -> None:
    uri = describe(web, "/s.json", "Share")
    assert scope(app, uri).status == "pending"
    assert job.run_once() == 1
    assert scope(app, uri).name == "Share"


@pytest.mark.parametrize(
    ("route", "reason"),
    [
        (Route(hang=True), "within 1 s"),
        (
            Route(body=b'{"name": "' + b"x" * 5000 + b'"}', content_type="application/json"),
            "larger",
        ),
        (
            Route(body=b"x" * 50_000, content_type="application/json", declare_length=False),
            "larger",
        ),
        (Route(status=302, headers={"Location": "http://127.0.0.1:1/"}), "redirect"),
        (Route(body=b'{"name": 3}', content_type="application/json"), "no name"),
        (Route(body=b"<html>", content_type="text/html"), "not JSON"),
        (Route(body=b'{"name": "a\\u0000b"}', content_type="application/json"), "control"),
        (Route(status=500), "HTTP 500"),
    ],
)
def test_a_broken_scope_server_leaves_the_raw_scope(
    app: Flask,
    http: FlaskClient,
    job: FetchJob,
    web: FakeWeb,
    rs: Party,
    store: Store,
    route: Route,
    reason: str,
) -> None:
    web.routes["/scope"] = route
    uri = web.url("/scope")
    register_set(http, rs, [uri])
    assert job.run_once() == 1
    assert scope(app, uri) == ScopeView(uri, None, None, "failed")
    failed = row(store, uri, "scope")
    assert failed.reason is not None and reason in failed.reason
    assert failed.failures == 1


def test_a_name_resolving_to_a_private_address_is_never_asked(
    app: Flask, http: FlaskClient, job: FetchJob, rs: Party, store: Store
) -> None:
    connect = RecordingConnect()
    job.fetcher = Fetcher(1, 4096, True, resolver=lambda host: ["10.20.30.40"], connect=connect)
    uri = "https://scopes.internal.example/read"
    register_set(http, rs, [uri, "http://192.168.0.10/write"])
    assert job.run_once() == 2
    assert scope(app, uri).status == "failed"
    assert scope(app, "http://192.168.0.10/write").status == "failed"
    assert "10.20.30.40: it is a private address" in (row(store, uri, "scope").reason or "")
    assert connect.calls == []


def test_api_requests_never_wait_for_a_stuck_fetch(
    app: Flask, http: FlaskClient, job: FetchJob, web: FakeWeb, rs: Party, store: Store
) -> None:
    web.routes["/stuck"] = Route(hang=True)
    job.fetcher = Fetcher(5, 4096, True)  # stuck for 5 s
    register_set(http, rs, [web.url("/stuck")])
    stepping = threading.Thread(target=job.run_once)
    stepping.start()
    try:
        deadline = time.monotonic() + 5
        while web.paths_asked() != ["/stuck"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = time.monotonic()
        register_set(http, rs, [web.url("/stuck"), web.url("/also-stuck")])
        registered = http.post(
            "/register",
            json={"grant_types": ["client_credentials"], "logo_uri": web.url("/stuck")},
            headers={"Authorization": f"Bearer {make_initial_access_token(store)}"},
        )
        assert registered.status_code == 201
        assert scope(app, web.url("/stuck")).name is None
        assert time.monotonic() - started < 1.0
        assert stepping.is_alive()  # the job is still waiting for its answer
    finally:
        stepping.join(10)


# -- images -------------------------------------------------------------------------------------


def test_a_checked_icon_is_served_by_this_server_with_fixed_headers(
    app: Flask, http: FlaskClient, job: FetchJob, web: FakeWeb, rs: Party
) -> None:
    web.routes["/icon.png"] = Route(body=PNG, content_type="image/png")
    register_set(http, rs, ["read"], icon_uri=web.url("/icon.png"))
    assert image(app, web.url("/icon.png")) is None
    job.run_once()
    src = image(app, web.url("/icon.png"))
    assert src is not None
    answer = http.get(src)
    assert answer.status_code == 200
    assert answer.data == PNG
    assert answer.headers["Content-Type"] == "image/png"
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert answer.headers["Cache-Control"] == "private, max-age=600, immutable"
    assert "Set-Cookie" not in answer.headers
    missing = http.get("/images/no-such-image")
    assert missing.status_code == 404
    assert missing.get_json()["error"] == "not_found"


@pytest.mark.parametrize(
    ("route", "reason"),
    [
        (Route(body=SVG, content_type="image/svg+xml"), "not a PNG, JPEG, GIF or WebP"),
        (Route(body=SVG, content_type="image/png"), "not a PNG, JPEG, GIF or WebP"),
        (Route(body=PNG, content_type="image/gif"), "image/png labelled image/gif"),
        (Route(body=PNG, content_type="text/html"), "image/png labelled text/html"),
        (Route(body=PNG, content_type=None), "image/png labelled nothing"),
        (Route(body=PNG + b"\0" * 5000, content_type="image/png"), "larger than 4096 bytes"),
        (Route(body=b"<html><script>", content_type="image/png"), "not a PNG"),
    ],
)
def test_an_image_that_fails_the_check_is_never_served(
    app: Flask,
    http: FlaskClient,
    job: FetchJob,
    web: FakeWeb,
    rs: Party,
    store: Store,
    route: Route,
    reason: str,
) -> None:
    web.routes["/icon"] = route
    register_set(http, rs, ["read"], icon_uri=web.url("/icon"))
    job.run_once()
    assert image(app, web.url("/icon")) is None
    failed = row(store, web.url("/icon"), "image")
    assert failed.status == "failed" and reason in (failed.reason or "")
    assert failed.image_id is None


def test_the_logo_of_a_registered_client_is_checked(
    app: Flask, http: FlaskClient, job: FetchJob, web: FakeWeb, store: Store
) -> None:
    web.routes["/logo.gif"] = Route(body=b"GIF89a" + b"\0" * 20, content_type="image/gif")
    registered = http.post(
        "/register",
        json={"grant_types": ["client_credentials"], "logo_uri": web.url("/logo.gif")},
        headers={"Authorization": f"Bearer {make_initial_access_token(store)}"},
    )
    assert registered.status_code == 201
    assert job.run_once() == 1
    src = image(app, web.url("/logo.gif"))
    assert src is not None
    assert http.get(src).headers["Content-Type"] == "image/gif"


# -- links and the interstitial -----------------------------------------------------------------


def test_a_checked_client_page_is_linked_through_the_interstitial(
    app: Flask, http: FlaskClient, job: FetchJob, web: FakeWeb, store: Store
) -> None:
    web.routes["/about?lang=en&x=<b>"] = Route(body=b"<html>hi</html>")
    page = web.url("/about?lang=en&x=<b>")
    registered = http.post(
        "/register",
        json={"grant_types": ["client_credentials"], "client_uri": page},
        headers={"Authorization": f"Bearer {make_initial_access_token(store)}"},
    )
    assert registered.status_code == 201, registered.text
    assert link(app, page) == LinkView(page, None, "pending")
    job.run_once()
    shown = link(app, page)
    assert shown.status == "checked" and shown.href is not None
    assert shown.href == f"/link/{row(store, page, 'page').id}"
    answer = http.get(shown.href)
    assert answer.status_code == 200
    text = answer.get_data(as_text=True)
    assert "not part of this server" in text
    escaped = page.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert f"<code>{escaped}</code>" in text
    assert f'<a href="{escaped}" rel="noopener noreferrer">' in text
    assert "<b>" not in text
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    assert "script-src" not in answer.headers["Content-Security-Policy"]


def test_an_unknown_link_id_or_a_raw_url_is_a_404_page(
    app: Flask, http: FlaskClient, store: Store, job: FetchJob
) -> None:
    scope(app, "https://evil.example/scope")  # a row, but of a scope description
    not_a_page = row(store, "https://evil.example/scope", "scope").id
    for path in (
        "/link/no-such-id",
        "/link/https%3A%2F%2Fevil.example%2F",
        "/link/https://evil.example/",
        f"/link/{not_a_page}",
    ):
        answer = http.get(path)
        assert answer.status_code == 404
        assert answer.headers["Content-Type"].startswith("text/html")
        assert "evil.example" not in answer.get_data(as_text=True)


def test_a_client_page_that_is_not_a_page_is_shown_as_failed_and_not_linked(
    app: Flask, job: FetchJob, web: FakeWeb
) -> None:
    web.routes["/app.json"] = Route(body=b"{}", content_type="application/json")
    web.routes["/gone"] = Route(status=301, headers={"Location": "https://elsewhere.example/"})
    for path in ("/app.json", "/gone"):
        assert link(app, web.url(path)).status == "pending"
    assert job.run_once() == 2
    for path in ("/app.json", "/gone"):
        assert link(app, web.url(path)) == LinkView(web.url(path), None, "failed")


@pytest.mark.parametrize(
    "uri",
    [
        "http://10.0.0.8/callback",
        "http://192.168.1.20:8080/cb",
        "http://[fd00::1]/cb",
        "http://169.254.169.254/latest/meta-data",
        "com.example.app:/oauth2redirect",
        "javascript:alert(1)",
    ],
)
def test_private_and_non_http_uris_are_not_checked_and_not_linked(
    app: Flask, job: FetchJob, uri: str
) -> None:
    assert link(app, uri) == LinkView(uri, None, "not checked")
    assert job.run_once() == 0


def test_loopback_redirect_uris_are_not_checked_without_allow_loopback(
    config: Config, clock: FakeClock
) -> None:
    app = create_app(replace(config, fetch=FetchSettings()), clock=clock)
    running.fetch_job(app).stop()
    for uri in ("http://127.0.0.1:8123/cb", "http://localhost/cb", "http://[::1]:9/cb"):
        assert link(app, uri) == LinkView(uri, None, "not checked")
    assert running.fetch_job(app).run_once() == 0


# -- retries and the cache ----------------------------------------------------------------------


def test_failures_are_retried_with_exponential_backoff_up_to_retry_max(
    app: Flask, job: FetchJob, web: FakeWeb, store: Store, clock: FakeClock
) -> None:
    web.routes["/flaky.json"] = Route(status=503)
    uri = web.url("/flaky.json")
    scope(app, uri)
    waits = []
    for _ in range(5):
        assert job.run_once() == 1
        failed = row(store, uri, "scope")
        waits.append(failed.next_try_at - clock.now())
        clock.advance(waits[-1] - 1)
        assert job.run_once() == 0  # not due yet
        clock.advance(1)
    assert waits == [30, 60, 120, 120, 120]  # retry_max = 120
    assert row(store, uri, "scope").failures == 5
    # It works again: the name shows, and the count starts over.
    describe(web, "/flaky.json", "Flaky no more")
    assert job.run_once() == 1
    assert scope(app, uri).name == "Flaky no more"
    assert row(store, uri, "scope").failures == 0


def test_a_result_expires_after_the_cache_lifetime_and_is_fetched_again(
    app: Flask, http: FlaskClient, job: FetchJob, web: FakeWeb, rs: Party, clock: FakeClock
) -> None:
    uri = describe(web, "/v.json", "Version one")
    web.routes["/i.png"] = Route(body=PNG, content_type="image/png")
    register_set(http, rs, [uri], icon_uri=web.url("/i.png"))
    assert job.run_once() == 2
    first_icon = image(app, web.url("/i.png"))
    assert first_icon is not None
    describe(web, "/v.json", "Version two")
    clock.advance(599)
    assert job.run_once() == 0
    assert scope(app, uri).name == "Version one"  # kept for the cache lifetime
    clock.advance(1)
    assert job.run_once() == 2
    assert scope(app, uri).name == "Version two"
    second_icon = image(app, web.url("/i.png"))
    assert second_icon is not None and second_icon != first_icon
    assert http.get(first_icon).status_code == 404
    assert http.get(second_icon).data == PNG
    assert web.paths_asked().count("/v.json") == 2

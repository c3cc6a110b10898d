"""The pages for people (`umaserver.pages`): headers on every page answer, CSRF tokens, `next`
kept inside this server, cookie flags by issuer, HTML errors on page routes only (JSON elsewhere),
and the helpers other page blueprints use (`signin_required`, `register`)."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from flask import Blueprint, Flask
from flask.testing import FlaskClient

from umaserver import create_app, pages, secrets_at_rest
from umaserver.config import load_config
from umaserver.pages import sessions

from .conftest import FakeClock, Store, make_person, open_store, write_config
from .pages_helpers import csrf_token, error_of, sign_in

ISSUER = "http://uma.test"
CSRF_FAILED = "This form was not sent from this server's page, or the page is out of date."


@pytest.fixture
def alice(store: Store) -> str:
    make_person(store, "alice", secrets_at_rest.hash_password("pw"))
    return "alice"


def extra_pages() -> Blueprint:
    """A page blueprint as /authorize will be: behind sign-in, with a form, and one that fails."""
    bp = Blueprint("extra", __name__)

    @bp.get("/private")
    @sessions.signin_required
    def private() -> str:
        user = sessions.current_user()
        assert user is not None
        return f"hello {user.username}"

    @bp.post("/private")
    def private_form() -> str:
        pages.csrf.require()
        return "done"

    @bp.get("/broken")
    def broken() -> str:
        raise RuntimeError("a bug")

    return bp


@pytest.fixture
def app(app: Flask) -> Flask:
    pages.register(app, extra_pages())
    return app


PAGE_REQUESTS = [
    ("GET", "/", 200),
    ("GET", "/signin", 200),
    ("GET", "/signin?next=/x", 200),
    ("POST", "/signin", 400),
    ("GET", "/signout", 405),
    ("PUT", "/signin", 405),
    ("POST", "/signout", 400),
    ("GET", "/private", 303),
    ("POST", "/private", 400),
    ("GET", "/broken", 500),
]


@pytest.mark.parametrize(("method", "path", "status"), PAGE_REQUESTS)
def test_every_page_answer_carries_the_headers(
    http: FlaskClient, method: str, path: str, status: int
) -> None:
    answer = http.open(path, method=method)
    assert answer.status_code == status
    csp = answer.headers["Content-Security-Policy"]
    directives = dict(d.split(" ", 1) for d in csp.split("; "))
    assert directives["default-src"] == "'none'"
    assert directives["form-action"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert "script-src" not in directives and "unsafe-inline" not in csp
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.headers["Cache-Control"] == "no-store"
    if status != 303:
        assert answer.mimetype == "text/html"
        assert "<script" not in answer.text
        # The one inline style is the one the policy allows, by its hash.
        style = re.search(r"<style>(.*?)</style>", answer.text, re.S)
        assert style is not None
        digest = base64.b64encode(hashlib.sha256(style.group(1).encode()).digest()).decode()
        assert directives["style-src"] == f"'sha256-{digest}'"
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in answer.text


def test_405_on_a_page_keeps_allow(http: FlaskClient) -> None:
    answer = http.get("/signout")
    assert set(answer.headers["Allow"].split(", ")) == {"OPTIONS", "POST"}
    assert "<h1>Not allowed here</h1>" in answer.text


def test_a_500_on_a_page_is_a_page_without_the_details(http: FlaskClient) -> None:
    answer = http.get("/broken")
    assert "<h1>Something went wrong</h1>" in answer.text and "a bug" not in answer.text


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/no-such-page", 404), ("GET", "/rpt", 405), ("POST", "/token", 400)],
)
def test_the_api_and_unknown_paths_keep_json_errors(
    http: FlaskClient, method: str, path: str, status: int
) -> None:
    answer = http.open(path, method=method)
    assert answer.status_code == status
    assert answer.is_json and "error" in answer.json
    assert "Content-Security-Policy" not in answer.headers


# -- CSRF --------------------------------------------------------------------------------------


def other_browsers_token(app: Flask) -> str:
    return csrf_token(app.test_client())


@pytest.mark.parametrize(
    "case", ["missing", "empty", "wrong", "another browser's", "twice", "no pre-session cookie"]
)
def test_a_form_without_the_right_token_is_a_400_page(
    app: Flask, http: FlaskClient, alice: str, case: str
) -> None:
    token = csrf_token(http)
    form: dict[str, str | list[str]] = {"username": "alice", "password": "pw"}
    if case == "empty":
        form["csrf_token"] = ""
    elif case == "wrong":
        form["csrf_token"] = token[:-1] + ("0" if token[-1] != "0" else "1")
    elif case == "another browser's":
        form["csrf_token"] = other_browsers_token(app)
    elif case == "twice":
        form["csrf_token"] = [token, token]
    elif case == "no pre-session cookie":
        form["csrf_token"] = token
        http.delete_cookie("umaserver_presession")
    answer = http.post("/signin", data=form)
    assert answer.status_code == 400
    assert answer.mimetype == "text/html"
    assert CSRF_FAILED in answer.text.replace("&#39;", "'")
    assert http.get_cookie("umaserver_session") is None


def test_the_token_is_bound_to_the_session_after_sign_in(http: FlaskClient, alice: str) -> None:
    before = csrf_token(http)
    sign_in(http, alice, "pw")
    after = csrf_token(http, "/")
    assert after != before
    assert http.post("/signout", data={"csrf_token": before}).status_code == 400
    assert http.post("/signout", data={"csrf_token": after}).status_code == 303


def test_a_signed_in_form_of_another_blueprint_checks_the_token(
    http: FlaskClient, alice: str
) -> None:
    sign_in(http, alice, "pw")
    assert http.post("/private", data={}).status_code == 400
    assert http.post("/private", data={"csrf_token": csrf_token(http, "/")}).text == "done"


# -- next ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "unverified",
    [
        "//evil.example",
        "//evil.example/path",
        "https://evil.example",
        "http://uma.test/elsewhere",
        "/\\evil.example",
        "/\\/evil.example",
        "\\\\evil.example",
        "javascript:alert(1)",
        "/ok\r\nLocation: https://evil.example",
        "/ok\tx",
        "evil",
        "",
        "/" + "a" * 3000,
    ],
)
def test_a_next_pointing_outside_is_ignored(http: FlaskClient, alice: str, unverified: str) -> None:
    answer = sign_in(http, alice, "pw", unverified)
    assert answer.status_code == 303
    assert answer.headers["Location"] == ISSUER + "/"
    page = http.get("/signin", query_string={"next": unverified})
    assert 'name="next"' not in page.text


@pytest.mark.parametrize("target", ["/", "/account", "/authorize?client_id=a&state=x%20y", "/a/b"])
def test_a_next_inside_this_server_is_followed(http: FlaskClient, alice: str, target: str) -> None:
    page = http.get("/signin", query_string={"next": target})
    assert 'name="next"' in page.text
    assert sign_in(http, alice, "pw", target).headers["Location"] == ISSUER + target


def test_signin_required_sends_to_the_sign_in_page_and_back(http: FlaskClient, alice: str) -> None:
    answer = http.get("/private?x=1&y=2")
    assert answer.status_code == 303
    assert answer.headers["Location"] == ISSUER + "/signin?next=/private%3Fx%3D1%26y%3D2"
    page = http.get(answer.headers["Location"].removeprefix(ISSUER))
    assert 'name="next" value="/private?x=1&amp;y=2"' in page.text
    landed = sign_in(http, alice, "pw", "/private?x=1&y=2")
    assert landed.headers["Location"] == ISSUER + "/private?x=1&y=2"
    assert http.get("/private?x=1&y=2").text == "hello alice"


def test_the_wrong_password_page_keeps_next_and_the_username(http: FlaskClient, alice: str) -> None:
    answer = sign_in(http, alice, "nope", "/account")
    assert error_of(answer) == "The username or the password is wrong."
    assert 'name="next" value="/account"' in answer.text
    assert 'name="username" value="alice"' in answer.text


def test_a_repeated_field_is_a_400_page(http: FlaskClient, alice: str) -> None:
    form = {"username": ["alice", "bob"], "password": "pw", "csrf_token": csrf_token(http)}
    answer = http.post("/signin", data=form)
    assert answer.status_code == 400 and "more than once" in answer.text


# -- cookies -------------------------------------------------------------------------------------


def app_for(tmp_path: Path, issuer: str) -> Flask:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    app = create_app(load_config(write_config(tmp_path, issuer=issuer)), clock=FakeClock())
    app.config["TESTING"] = True
    handle = open_store(tmp_path / "uma.db")
    make_person(handle, "alice", secrets_at_rest.hash_password("pw"))
    handle.close()
    return app


@pytest.mark.parametrize(
    ("issuer", "prefix", "secure"),
    [("http://uma.test", "", False), ("https://uma.example", "__Host-", True)],
)
def test_cookie_flags(tmp_path: Path, issuer: str, prefix: str, secure: bool) -> None:
    http = app_for(tmp_path, issuer).test_client()
    base = "https://localhost" if secure else "http://localhost"
    page = http.get("/signin", base_url=base)
    (presession,) = page.headers.getlist("Set-Cookie")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None
    form = {"username": "alice", "password": "pw", "csrf_token": token.group(1)}
    answer = http.post("/signin", data=form, base_url=base)
    assert answer.status_code == 303
    cookies = answer.headers.getlist("Set-Cookie")
    session = next(c for c in cookies if c.startswith(f"{prefix}umaserver_session="))
    dropped = next(c for c in cookies if c.startswith(f"{prefix}umaserver_presession="))
    for cookie in (presession, session):
        attributes = [a.strip() for a in cookie.split(";")[1:]]
        assert "HttpOnly" in attributes and "Path=/" in attributes
        assert "SameSite=Lax" in attributes
        assert ("Secure" in attributes) is secure
        assert not any(a.lower().startswith("domain") for a in attributes)
    assert presession.startswith(f"{prefix}umaserver_presession=")
    assert "Max-Age=0" in dropped


@pytest.mark.sqlite_only  # a file under a file that is no folder
def test_storage_that_cannot_be_used_is_a_503_page(tmp_path: Path) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    (tmp_path / "not-a-folder").write_text("", encoding="utf-8")
    config_path = write_config(tmp_path)
    text = config_path.read_text(encoding="utf-8").replace("uma.db", "not-a-folder/uma.db")
    config_path.write_text(text, encoding="utf-8")
    app = create_app(load_config(config_path), clock=FakeClock())
    http = app.test_client()
    http.set_cookie("umaserver_session", "some-id")
    answer = http.get("/")
    assert answer.status_code == 503
    assert answer.mimetype == "text/html" and answer.headers["Retry-After"] == "5"
    assert "<h1>Not available right now</h1>" in answer.text
    assert answer.headers["X-Frame-Options"] == "DENY"

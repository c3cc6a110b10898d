"""The app's request class reads url-encoded forms as Werkzeug's form parser does, in one step."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request as WerkzeugRequest

from umaserver.wsgi_request import URLENCODED, Request

BODIES = [
    b"",
    b"grant_type=client_credentials&scope=uma_protection",
    b"a=1&a=2&b=",
    b"a&b=&=c&&",
    b"x=%ff%fe&y=%C3%A9&z=+plus+",
    b"name=caf\xc3\xa9",
    b"bad=\xff\xfe",  # not UTF-8
    b"semi=1;b=2",
]


def _both(body: bytes, content_type: str = URLENCODED) -> tuple[object, object]:
    environ = EnvironBuilder(method="POST", data=body, content_type=content_type).get_environ()
    ours = Request(dict(environ))
    environ = EnvironBuilder(method="POST", data=body, content_type=content_type).get_environ()
    theirs = WerkzeugRequest(environ)
    return list(ours.form.items(multi=True)), list(theirs.form.items(multi=True))


@pytest.mark.parametrize("body", BODIES)
def test_forms_read_as_werkzeug_reads_them(app: Flask, body: bytes) -> None:
    with app.app_context():
        ours, theirs = _both(body)
    assert ours == theirs


@given(st.binary(max_size=200))
def test_any_body_reads_as_werkzeug_reads_it(body: bytes) -> None:
    ours, theirs = _both(body)
    assert ours == theirs


def test_the_body_stays_readable_and_other_types_keep_werkzeugs_parser(app: Flask) -> None:
    with app.app_context():
        environ = EnvironBuilder(method="POST", data=b"a=1", content_type=URLENCODED)
        request = Request(environ.get_environ())
        assert request.form["a"] == "1"
        assert request.get_data() == b"a=1"
        ours, theirs = _both(b'{"a": 1}', "application/json")
        assert ours == theirs == []


def test_a_form_that_is_not_utf8_is_refused_in_the_one_error_shape(http: FlaskClient) -> None:
    response = http.post("/token", data=b"grant_type=\xff\xfe", content_type=URLENCODED)
    assert response.status_code == 400
    assert response.get_json()["error"] == "unsupported_grant_type"


def test_a_form_larger_than_the_body_limit_is_413(app: Flask, http: FlaskClient) -> None:
    limit = app.config["MAX_CONTENT_LENGTH"]
    response = http.post("/token", data=b"a=" + b"x" * limit, content_type=URLENCODED)
    assert response.status_code == 413
    assert response.get_json()["error"]

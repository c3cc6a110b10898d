"""Driving the pages through the Flask test client: the CSRF token of a form, a sign-in."""

from __future__ import annotations

import re
from typing import Any

from flask.testing import FlaskClient
from werkzeug.test import TestResponse

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
ERROR = re.compile(r'<p class="error" role="alert">([^<]*)</p>')


def csrf_token(http: FlaskClient, path: str = "/signin", **kwargs: Any) -> str:
    page = http.get(path, **kwargs)
    found = TOKEN.search(page.text)
    assert found is not None, page.text
    return found.group(1)


def sign_in(
    http: FlaskClient,
    username: str,
    password: str,
    next_path: str | None = None,
    **kwargs: Any,
) -> TestResponse:
    form = {"username": username, "password": password, "csrf_token": csrf_token(http, **kwargs)}
    if next_path is not None:
        form["next"] = next_path
    return http.post("/signin", data=form, **kwargs)


def error_of(page: TestResponse) -> str | None:
    found = ERROR.search(page.text)
    return None if found is None else found.group(1).replace("&#39;", "'")

"""The person's account page (`/account`): the consents given at /authorize, each withdrawable;
withdrawing revokes the tokens issued under it and brings the consent page back."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask.testing import FlaskClient

from .conftest import Store
from .pages_helpers import TOKEN
from .test_authorize import World, query


@pytest.fixture
def world(http: FlaskClient, store: Store) -> World:
    return World(http, store)


def withdraw_forms(page: Any) -> list[dict[str, str]]:
    forms = re.findall(
        r'<form method="post" action="/account/withdraw">(.*?)</form>', page.text, re.S
    )
    return [dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form)) for form in forms]


def test_the_account_page_needs_sign_in(http: FlaskClient) -> None:
    answer = http.get("/account")
    assert answer.status_code == 303
    assert answer.headers["Location"] == "http://uma.test/signin?next=/account"
    assert http.post("/account/withdraw", data={}).status_code == 303


def test_the_home_page_links_to_the_account_when_signed_in(world: World, http: FlaskClient) -> None:
    assert 'href="/account"' not in http.get("/").text
    world.sign_in()
    assert 'href="/account"' in http.get("/").text


def test_withdrawing_a_consent_revokes_its_pat(world: World, http: FlaskClient) -> None:
    world.sign_in()
    assert "not allowed any application" in http.get("/account").text
    code = query(world.decide(world.url()))["code"]
    tokens = world.exchange(code).json
    pat = {"Authorization": f"Bearer {tokens['access_token']}"}
    assert http.get("/rs/resource_set", headers=pat).status_code == 200
    page = http.get("/account")
    assert page.status_code == 200
    assert "Photo Printer" in page.text
    assert "register and manage resource sets for you" in page.text
    forms = withdraw_forms(page)
    assert len(forms) == 1 and forms[0]["scope"] == "uma_protection"
    # Without the CSRF token: a 400 page, nothing withdrawn.
    refused = http.post(
        "/account/withdraw", data={k: v for k, v in forms[0].items() if k != "csrf_token"}
    )
    assert refused.status_code == 400 and refused.mimetype == "text/html"
    assert http.get("/rs/resource_set", headers=pat).status_code == 200
    done = http.post("/account/withdraw", data=forms[0])
    assert done.status_code == 303 and done.headers["Location"] == "http://uma.test/account"
    assert http.get("/rs/resource_set", headers=pat).status_code == 401
    refresh = world.http.post(
        "/token",
        data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
        auth=world.app,
    )
    assert refresh.status_code == 400 and refresh.json["error"] == "invalid_grant"
    assert "not allowed any application" in http.get("/account").text
    # The consent page is shown again.
    assert http.get(world.url()).status_code == 200


def test_one_cannot_withdraw_someone_elses_consent(
    world: World, http: FlaskClient, store: Store
) -> None:
    world.sign_in()
    code = query(world.decide(world.url()))["code"]
    pat = {"Authorization": f"Bearer {world.exchange(code).json['access_token']}"}
    form = withdraw_forms(http.get("/account"))[0]
    token = TOKEN.search(http.get("/").text)
    assert token is not None
    http.post("/signout", data={"csrf_token": token.group(1)})
    from umaserver import secrets_at_rest

    from .conftest import make_person
    from .pages_helpers import sign_in

    make_person(store, "mallory", secrets_at_rest.hash_password("pw"))
    sign_in(http, "mallory", "pw")
    mallory_token = TOKEN.search(http.get("/account").text)
    assert mallory_token is not None
    http.post("/account/withdraw", data={**form, "csrf_token": mallory_token.group(1)})
    assert http.get("/rs/resource_set", headers=pat).status_code == 200

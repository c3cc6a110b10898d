"""Rotating the secret key (`secret_keys = ["new", "old"]`, issue 27): the first key signs and
derives, every listed one verifies. Over HTTP through the Flask test client: the same browser and
the same parties talk to a server built again from the rotated config on the same database (as a
restart would), then to one built without the old key.

What an RPT, a CSRF token, a revoke reference and a sealed signing key made under the old key
become: valid while it is listed, ended when it is removed. Sessions are random ids in the
database and survive both steps."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import jwt as pyjwt
import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app, secrets_at_rest
from umaserver.config import Config, load_config
from umaserver.pages.csrf import FAILED

from .conftest import (
    CLI,
    SECRET,
    FakeClock,
    Party,
    Store,
    make_party,
    make_person,
    open_store,
    write_config,
)
from .flows import EMPLOYEE, FlaskApi, Flow
from .pages_helpers import csrf_token, sign_in
from .test_uma2_grant import RULES as UMA2_RULES
from .test_uma2_grant import Uma2, doctor

NEW = "the-new-secret-key-of-the-rotation-0123456789"
RULES = f"""
[[rules]]
id = "doctors"
owner = "alice"
scopes = ["view"]
[rules.resource_sets]
names = ["Photos"]
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]

[[rules]]
id = "notes"
owner = "alice"
scopes = ["read"]
[rules.resource_sets]
names = ["Notes"]
"""
DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]


@pytest.fixture
def rules_text() -> str:
    return RULES


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    """alice and bob, who sign in with passwords (before `rs` makes alice without one)."""
    for name in ("alice", "bob"):
        make_person(store, name, secrets_at_rest.hash_password(f"{name}'s password"))


@pytest.fixture
def flow(http: FlaskClient, rs: Party, store: Store) -> Flow:
    viewer = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))
    return Flow(FlaskApi(http), rs, viewer, {"name": "Photos", "scopes": ["view"]})


def restart(config: Config, clock: FakeClock, *browsers: FlaskClient, keys: list[str]) -> Flask:
    """The server built again from `config` with `secret_keys = keys`, on the same database; each
    browser (its cookies kept) talks to it from now on."""
    app = create_app(replace(config, secret_keys=tuple(keys)), clock=clock)
    app.config["TESTING"] = True
    for browser in browsers:
        browser.application = app
    return app


def granted(flow: Flow, scope: str, rs_id: str, claims: list[dict[str, object]]) -> str:
    reply = flow.ask(flow.ticket(scope, rs_id=rs_id), claims)
    assert reply.status == 201, reply.text
    rpt: str = reply.json["rpt"]
    return rpt


def held(flow: Flow, rpt: str) -> dict[str, list[str]]:
    """The RPT's live permissions by set, as introspection answers; {} when it is inactive."""
    answer = flow.introspect(rpt)
    if not answer["active"]:
        return {}
    return {p["resource_set_id"]: sorted(p["scopes"]) for p in answer["permissions"]}


def signed_in(browser: FlaskClient) -> bool:
    """Whether the browser's session still counts: /policy shows the owner's page, not sign-in."""
    return browser.get("/policy").status_code == 200


def revoke_form(browser: FlaskClient, rs_id: str) -> dict[str, str]:
    """The fields of the one "revoke" form on the set's page, as rendered now."""
    page = browser.get(f"/policy/resource_set/{rs_id}").text
    (form,) = re.findall(r'action="[^"]*/permissions/revoke">(.*?)</form>', page, re.S)
    return dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))


def bob_signs_in(browser: FlaskClient, token: str) -> int:
    """bob's sign-in through a form whose CSRF token was rendered earlier: its status."""
    form = {"username": "bob", "password": "bob's password", "csrf_token": token}
    answer = browser.post("/signin", data=form)
    if answer.status_code == 400:
        assert FAILED in html.unescape(answer.text)  # the page's own answer, not an error page
    return answer.status_code


def test_the_rotation_walkthrough(
    app: Flask, http: FlaskClient, flow: Flow, config: Config, clock: FakeClock
) -> None:
    notes = flow.register({"name": "Notes", "scopes": ["read"]})
    alice = app.test_client()
    assert sign_in(alice, "alice", "alice's password").status_code == 303
    # Under the old key alone: an RPT holding two permissions, a revoke form on alice's page, and
    # two sign-in forms (pre-session CSRF tokens) rendered and not yet sent.
    rpt = granted(flow, "view", flow.rs_id, DOCTOR)
    assert granted(flow, "read", notes, []) == rpt
    assert held(flow, rpt) == {flow.rs_id: ["view"], notes: ["read"]}
    old_revoke = revoke_form(alice, notes)
    form_one, form_two = app.test_client(), app.test_client()
    old_token_one, old_token_two = csrf_token(form_one), csrf_token(form_two)

    # Rotation: secret_keys = [new, old].
    restart(config, clock, http, alice, form_one, form_two, keys=[NEW, SECRET])
    assert held(flow, rpt) == {flow.rs_id: ["view"], notes: ["read"]}  # still active
    assert granted(flow, "view", flow.rs_id, DOCTOR) == rpt  # the AAT's live RPT, made again
    assert signed_in(alice)
    assert bob_signs_in(form_one, old_token_one) == 303  # a form rendered before the rotation
    assert (
        alice.post(f"/policy/resource_set/{notes}/permissions/revoke", data=old_revoke).status_code
        == 303
    )
    assert held(flow, rpt) == {flow.rs_id: ["view"]}  # the old page's reference revoked it
    new_form = alice.application.test_client()
    new_token = csrf_token(new_form)  # rendered under the new key

    # The old key removed: secret_keys = [new].
    restart(config, clock, http, alice, form_two, new_form, keys=[NEW])
    assert flow.introspect(rpt) == {"active": False}  # it ended with the key that made it
    assert signed_in(alice)  # sessions are random ids: untouched
    assert bob_signs_in(form_two, old_token_two) == 400  # "the page is out of date"
    assert bob_signs_in(new_form, new_token) == 303
    # A grant now makes a new RPT, without what the ended one held.
    fresh = granted(flow, "read", notes, [])
    assert fresh != rpt
    assert held(flow, fresh) == {notes: ["read"]}
    assert flow.introspect(rpt) == {"active": False}


def test_a_cookie_flask_signed_under_the_old_key_is_read_after_the_rotation(
    app: Flask, flow: Flow, config: Config, clock: FakeClock
) -> None:
    """Flask's signed cookie (here: an invitation link waiting to be shown once) verifies under
    SECRET_KEY_FALLBACKS while the old key is listed."""
    alice = app.test_client()
    assert sign_in(alice, "alice", "alice's password").status_code == 303
    page = f"/policy/resource_set/{flow.rs_id}"
    token = csrf_token(alice, page)
    form = {"to": "carol@example.org", "scopes": ["view"], "csrf_token": token}
    assert alice.post(f"{page}/shares", data=form).status_code == 303  # the link is in the cookie
    restart(config, clock, alice, keys=[NEW, SECRET])
    assert re.search(r'value="http://uma\.test/invitations/[A-Za-z0-9_-]+"', alice.get(page).text)


def test_an_rpt_whose_key_is_removed_is_no_longer_upgraded_by_a_uma2_grant(
    http: FlaskClient, store: Store, rs: Party, config: Config, clock: FakeClock
) -> None:
    uma = Uma2(http, store, rs)
    status, body = uma.token(ticket=uma.ticket("view"), **doctor())
    assert status == 200, body
    rpt = body["access_token"]
    restart(config, clock, http, keys=[NEW, SECRET])
    status, body = uma.token(ticket=uma.ticket("view"), rpt=rpt, **doctor())
    assert (status, body["access_token"], body["upgraded"]) == (200, rpt, True)
    restart(config, clock, http, keys=[NEW])
    status, body = uma.token(ticket=uma.ticket("view"), rpt=rpt, **doctor())
    assert (status, body["error"]) == (400, "invalid_grant")
    assert uma.introspect(rpt) == {"active": False}


def test_sealed_signing_keys_open_under_an_old_key_and_are_sealed_again_under_the_new(
    tmp_path: Path,
) -> None:
    (tmp_path / "policies.toml").write_text(UMA2_RULES, encoding="utf-8")
    path = write_config(tmp_path, extra='[tokens]\nrpt_format = "jwt"\n')
    cli = CLI(path)
    made = cli.json("init")["signing_key"]  # sealed under the old key

    def keys(*listed: str) -> None:
        quoted = ", ".join(f'"{key}"' for key in listed)
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"^secret_keys? = .*$", f"secret_keys = [{quoted}]", text, flags=re.M)
        path.write_text(text, encoding="utf-8")

    keys(NEW, SECRET)
    assert cli.json("init")["signing_key"] == made  # opened under the old key, sealed again
    keys(NEW)
    assert cli.json("init")["signing_key"] == made  # opens under the new key alone
    config = load_config(path)
    store = open_store(config.database)
    try:
        uma = Uma2(
            create_app(config).test_client(), store, make_party(store, "alice", "uma_protection")
        )
        status, body = uma.token(ticket=uma.ticket("view"), **doctor())
        assert status == 200, body
        assert pyjwt.get_unverified_header(body["access_token"])["kid"] == made
    finally:
        store.close()

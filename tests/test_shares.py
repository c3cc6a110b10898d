"""Shares (services/shares.py, issue 25): an owner shares one set with a person, by username or
by e-mail address; the share is an owner's rule that the 1.0 authorization request decides with,
ends at its `until` or on Stop sharing (which revokes what it granted), has its own limit, counts
with `[policies] owner_rules = false`, and is never edited or deleted as a rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from umaserver.claims.model import ACCOUNT_CLAIM_TYPE
from umaserver.policy.rule_file import parse_rule_table
from umaserver.services import notices, owner_rules, shares
from umaserver.storage.people_records import Share
from umaserver.storage.records import ResourceSet

from .conftest import FakeClock, Party, Store, make_party, make_person, write_config
from .flows import FlaskApi, Flow
from .test_uma2_grant import UMA_TICKET, make_uma2_client

DAY = 86400
LIMIT = 1000
OUTBOX = notices.Outbox("http://uma.test", mail=False)


def person(store: Store, username: str, **claims: Any) -> Party:
    """`username` (with these account attributes) and an AAT of theirs at a client of their own."""
    make_person(store, username, None, claims)
    return make_party(store, username, "uma_authorization")


@pytest.fixture
def flow(http: FlaskClient, store: Store, rs: Party) -> Flow:
    return Flow(
        FlaskApi(http), rs, person(store, "bob"), {"name": "Photos", "scopes": ["view", "print"]}
    )


def the_set(store: Store, flow: Flow) -> ResourceSet:
    found = store.find_resource_set(flow.rs_id)
    assert found is not None
    return found


def share(
    store: Store, flow: Flow, to: str, *scopes: str, until: int | None = None, now: int
) -> Share:
    return shares.share(
        store,
        "alice",
        the_set(store, flow),
        to,
        scopes or ("view",),
        until,
        now,
        limit=LIMIT,
        outbox=OUTBOX,
    )


def outcome(flow: Flow, party: Party, scope: str = "view", rpt: str = "none-yet") -> str:
    reply = flow.ask(flow.ticket(scope), party=party, rpt=rpt)
    if reply.status == 201:
        return "grant"
    assert reply.status == 403, reply.text
    assert reply.json["error"] == "not_authorized_permission", reply.json
    return "deny"


def test_a_share_with_bob_grants_bobs_client_until_stop_sharing(
    store: Store, flow: Flow, clock: FakeClock
) -> None:
    assert outcome(flow, flow.app) == "deny"
    made = share(store, flow, "bob", "view", now=clock.now())
    assert (made.recipient, made.kind, made.scopes, made.until) == ("bob", "user", ("view",), None)
    rpt = flow.new_rpt()
    assert outcome(flow, flow.app, rpt=rpt) == "grant"
    assert outcome(flow, flow.app, "print") == "deny"  # not shared
    carol = person(store, "carol")
    assert outcome(flow, carol) == "deny"  # shared with bob only
    [permission] = flow.introspect(rpt)["permissions"]
    assert permission["resource_set_id"] == flow.rs_id

    alice = store.get_user_by_username("alice")
    assert alice is not None
    assert shares.stop_sharing(store, alice.sub, made.rule_id, clock.now()) == made
    assert shares.stop_sharing(store, alice.sub, made.rule_id, clock.now()) is None
    assert store.shares_of(alice.sub) == []
    assert store.owner_rules_of(alice.sub) == []
    assert flow.introspect(rpt).get("permissions", []) == []
    assert outcome(flow, flow.app) == "deny"


def test_a_share_ends_at_the_end_of_its_day(store: Store, flow: Flow, clock: FakeClock) -> None:
    today = shares.last_day(clock.now() + 1).isoformat()
    until = shares.end_of_day(today, clock.now())
    assert until is not None and clock.now() < until <= clock.now() + DAY
    assert until % DAY == 0
    share(store, flow, "bob", until=until, now=clock.now())
    assert outcome(flow, flow.app) == "grant"
    clock.advance(until - clock.now() - 1)
    assert outcome(flow, flow.app) == "grant"
    clock.advance(1)
    assert outcome(flow, flow.app) == "deny"


def test_a_permission_granted_through_a_share_ends_with_it(
    store: Store, flow: Flow, clock: FakeClock
) -> None:
    today = shares.last_day(clock.now() + 1).isoformat()
    until = shares.end_of_day(today, clock.now())
    assert until is not None
    share(store, flow, "bob", until=until, now=clock.now())
    clock.advance(until - clock.now() - 60)  # a minute before the share's end
    rpt = flow.new_rpt()
    assert outcome(flow, flow.app, rpt=rpt) == "grant"
    [permission] = flow.introspect(rpt)["permissions"]
    assert permission["exp"] == until  # not [lifetimes] permission (an hour) later
    clock.advance(60)
    assert flow.introspect(rpt).get("permissions", []) == []


def test_a_grant_by_a_share_and_a_rule_without_end_has_no_end_of_the_share(
    store: Store, flow: Flow, clock: FakeClock
) -> None:
    share(store, flow, "bob", until=clock.now() + DAY, now=clock.now())
    # A rule of alice's grants bob view too, without an end: the permission keeps its lifetime.
    table = {
        "id": owner_rules.new_rule_id(),
        "owner": "alice",
        "scopes": ["view"],
        "conditions": [{"claim": "username", "equals": "bob", "types": [ACCOUNT_CLAIM_TYPE]}],
    }
    owner_rules.add_owner_rule(store, "alice", parse_rule_table(table), clock.now())
    rpt = flow.new_rpt()
    assert outcome(flow, flow.app, rpt=rpt) == "grant"
    [permission] = flow.introspect(rpt)["permissions"]
    assert permission["exp"] == clock.now() + 3600


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("28/11/2026", "Enter a date such as 2026-11-28, or leave it empty."),
        ("2026-02-30", "Enter a date such as 2026-11-28, or leave it empty."),
        ("2000-01-01", "This date is in the past: choose today or a later day."),
    ],
)
def test_an_end_that_is_no_date_or_in_the_past_is_refused(text: str, message: str) -> None:
    with pytest.raises(shares.ShareRefused) as refused:
        shares.end_of_day(text, 1_790_000_000)
    assert (refused.value.field, refused.value.message) == ("until", message)
    assert shares.end_of_day("  ", 1_790_000_000) is None


def test_to_is_a_username_first_then_an_email_address(store: Store, flow: Flow) -> None:
    make_person(store, "odd@example.com", None, {})
    assert shares.recipient(store, " bob ") == shares.Recipient("user", "bob")
    assert shares.recipient(store, "odd@example.com") == shares.Recipient("user", "odd@example.com")
    assert shares.recipient(store, "Dan@Example.org") == shares.Recipient(
        "email", "Dan@Example.org"
    )
    for to, message in (
        ("", "Enter the username or the e-mail address of the person."),
        ("nobody", "There is no user named 'nobody', and it is not an e-mail address either."),
    ):
        with pytest.raises(shares.ShareRefused) as refused:
            shares.recipient(store, to)
        assert (refused.value.field, refused.value.message) == ("to", message)


def test_a_share_by_email_holds_for_the_verified_address_only(
    store: Store, flow: Flow, clock: FakeClock
) -> None:
    share(store, flow, "dan@example.org", now=clock.now())
    dan = person(store, "dan", email="dan@example.org")
    eve = person(store, "eve", email="dan@example.org", email_verified=False)
    assert outcome(flow, dan) == "grant"
    assert outcome(flow, eve) == "deny"
    assert outcome(flow, flow.app) == "deny"


@pytest.mark.parametrize(
    ("to", "scopes", "field"),
    [("alice", ("view",), "to"), ("bob", (), "scopes"), ("bob", ("delete",), "scopes")],
)
def test_a_share_names_someone_else_and_scopes_of_the_set(
    store: Store, flow: Flow, clock: FakeClock, to: str, scopes: tuple[str, ...], field: str
) -> None:
    with pytest.raises(shares.ShareRefused) as refused:
        shares.share(
            store,
            "alice",
            the_set(store, flow),
            to,
            scopes,
            None,
            clock.now(),
            limit=LIMIT,
            outbox=OUTBOX,
        )
    assert refused.value.field == field
    assert store.owner_rules_of(the_set(store, flow).owner) == []


def test_shares_have_their_own_limit(store: Store, flow: Flow, clock: FakeClock) -> None:
    owned = the_set(store, flow)
    # Other rules of the owner do not count toward it.
    other = parse_rule_table({"id": "o-other", "owner": "alice", "scopes": ["print"]})
    owner_rules.add_owner_rule(store, "alice", other, clock.now())
    shares.share(store, "alice", owned, "bob", ["view"], None, clock.now(), limit=1, outbox=OUTBOX)
    with pytest.raises(shares.TooManyShares):
        shares.share(
            store,
            "alice",
            owned,
            "x@example.com",
            ["view"],
            None,
            clock.now(),
            limit=1,
            outbox=OUTBOX,
        )
    assert [rule.id for rule in store.owner_rules_of(owned.owner)][:1] == ["o-other"]
    assert len(store.owner_rules_of(owned.owner)) == 2
    assert store.count_shares(owned.owner) == 1


def test_a_shares_rule_is_not_edited_or_deleted_as_a_rule(
    store: Store, flow: Flow, clock: FakeClock
) -> None:
    made = share(store, flow, "bob", now=clock.now())
    [found] = [r for r in owner_rules.owner_rules(store, "alice") if r.rule.id == made.rule_id]
    with pytest.raises(owner_rules.ShareRule):
        owner_rules.replace_owner_rule(store, "alice", found.rule, clock.now())
    with pytest.raises(owner_rules.ShareRule):
        owner_rules.delete_owner_rule(store, "alice", made.rule_id, clock.now())
    assert outcome(flow, flow.app) == "grant"


class TestOwnerRulesSwitchedOff:
    """`[policies] owner_rules = false`: the owner's other rules count for nothing, shares do."""

    @pytest.fixture
    def config_path(self, tmp_path: Path, rules_text: str) -> Path:
        (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
        path = write_config(tmp_path)
        text = path.read_text(encoding="utf-8").replace('policies = "policies.toml"\n', "")
        path.write_text(
            text + '\n[policies]\nfile = "policies.toml"\nowner_rules = false\n', encoding="utf-8"
        )
        return path

    def test_shares_still_count(self, store: Store, flow: Flow, clock: FakeClock) -> None:
        # A rule of alice's own granting print on every set: off, it grants nothing.
        store.add_owner_rule("o-prints", the_set(store, flow).owner, {"scopes": ["print"]}, 0)
        share(store, flow, "bob", now=clock.now())
        assert outcome(flow, flow.app) == "grant"
        assert outcome(flow, flow.app, "print") == "deny"


class TestUma2Grant:
    """The uma-ticket grant on Keycloak's realm face, bob's own token as the credential: a share
    with bob grants, Stop sharing ends it."""

    rpt_format = "opaque"

    @pytest.fixture
    def config_path(self, tmp_path: Path, rules_text: str) -> Path:
        (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
        extra = f'[keycloak]\nrealm = "demo"\n[tokens]\nrpt_format = "{self.rpt_format}"\n'
        return write_config(tmp_path, extra=extra)

    def test_bobs_token_is_granted_while_shared(
        self, http: FlaskClient, store: Store, rs: Party, clock: FakeClock
    ) -> None:
        description = {"name": "Photos", "resource_scopes": ["view", "print"]}
        registered = http.post("/rs/resource_set", json=description, headers=rs.auth)
        assert registered.status_code == 201, registered.json
        photos = store.find_resource_set(registered.json["_id"])
        assert photos is not None
        app_id, _ = make_uma2_client(store, "Keycloak app", ())
        make_person(store, "bob", None, {})
        bob = make_party(store, "bob", "uma_authorization", client_id=app_id)

        def grant() -> int:
            ticket = http.post(
                "/permission",
                json={"resource_id": photos.id, "resource_scopes": ["view"]},
                headers=rs.auth,
            ).json["ticket"]
            reply = http.post(
                "/realms/demo/protocol/openid-connect/token",
                data={"grant_type": UMA_TICKET, "ticket": ticket},
                headers={"Authorization": f"Bearer {bob.token}"},
            )
            assert reply.status_code in (200, 403), reply.json
            return reply.status_code

        assert grant() == 403
        made = shares.share(
            store, "alice", photos, "bob", ["view"], None, clock.now(), limit=9, outbox=OUTBOX
        )
        assert grant() == 200
        assert shares.stop_sharing(store, photos.owner, made.rule_id, clock.now()) == made
        assert grant() == 403

    @pytest.mark.parametrize("form", ["uma-ticket", "keycloak"])
    def test_the_rpt_ends_with_the_share(
        self, http: FlaskClient, store: Store, rs: Party, clock: FakeClock, form: str
    ) -> None:
        """The uma-ticket grant, and Keycloak's ticketless form, give a permission that ends with
        the share, not [lifetimes] permission later (the opaque RPT may hold others: it keeps its
        own lifetime)."""
        description = {"name": "Photos", "resource_scopes": ["view", "print"]}
        registered = http.post("/rs/resource_set", json=description, headers=rs.auth)
        photos = store.find_resource_set(registered.json["_id"])
        assert photos is not None
        app_id, _ = make_uma2_client(store, "Keycloak app", ())
        make_person(store, "bob", None, {})
        bob = make_party(store, "bob", "uma_authorization", client_id=app_id)
        until = clock.now() + 600
        shares.share(
            store, "alice", photos, "bob", ["view"], until, clock.now(), limit=9, outbox=OUTBOX
        )
        if form == "uma-ticket":
            ticket = http.post(
                "/permission",
                json={"resource_id": photos.id, "resource_scopes": ["view"]},
                headers=rs.auth,
            ).json["ticket"]
            data = {"grant_type": UMA_TICKET, "ticket": ticket}
        else:
            data = {
                "grant_type": UMA_TICKET,
                "audience": rs.client_id,
                "permission": f"{photos.id}#view",
            }
        reply = http.post(
            "/realms/demo/protocol/openid-connect/token",
            data=data,
            headers={"Authorization": f"Bearer {bob.token}"},
        )
        assert reply.status_code == 200, reply.json
        if self.rpt_format == "jwt":  # a JWT RPT expires with its first permission to expire
            assert reply.json["expires_in"] == 600
        found = http.post(
            "/introspect", data={"token": reply.json["access_token"]}, headers=rs.auth
        ).json
        assert [p["exp"] for p in found["permissions"]] == [until]


class TestJwtRpts(TestUma2Grant):
    """The same with JWT RPTs (`[tokens] rpt_format = "jwt"`)."""

    rpt_format = "jwt"

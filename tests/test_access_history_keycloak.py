"""The access history of Keycloak's ticketless form at the realm's token endpoint: one event per
resource asked about, a grant when an RPT is issued, a decision otherwise (issue 25, item 5)."""

from __future__ import annotations

from umaserver.storage.people_records import Event

from . import test_keycloak_realm as keycloak
from .conftest import Store
from .test_keycloak_realm import Realm

# The realm's configuration and parties, as test_keycloak_realm.py has them.
rules_text = keycloak.rules_text
config_path = keycloak.config_path
realm = keycloak.realm


def events_of(store: Store, username: str) -> list[Event]:
    user = store.get_user_by_username(username)
    assert user is not None
    return store.events_of(user.sub, 100)


def test_each_resource_of_a_keycloak_request_is_an_event(realm: Realm, store: Store) -> None:
    assert realm.ask("Shared#view,print", "Photos#view")[0] == 200  # Shared's view only
    assert realm.ask("Photos#print", response_mode="decision")[0] == 403
    decision, photos, shared = events_of(store, "alice")
    assert (photos.kind, photos.outcome, photos.rs_name, photos.scopes) == (
        "decision", "refused", "Photos", ("view",),
    )  # fmt: skip
    assert (shared.kind, shared.outcome, shared.rs_name, shared.scopes) == (
        "grant", "granted", "Shared", ("view",),
    )  # fmt: skip
    assert shared.party == "bob" and shared.client_name == "Keycloak app"
    assert (decision.kind, decision.outcome, decision.scopes) == ("decision", "refused", ("print",))

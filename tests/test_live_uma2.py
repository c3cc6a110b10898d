"""UMA 2.0 and UMA 1.0 on one live server, in one test: alice's resource server registers one set,
a 1.0 client gets access to it through the authorization request with its AAT, and a 2.0 client
through the uma-ticket grant, written from the two specifications (tests/flows.py's Uma2Flow:
discovery, registration, permission, every grant outcome); one store, one rule file, one decision."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import LiveServer
from .flows import (
    DOCTORS_MAY_VIEW,
    EMPLOYEE,
    HttpApi,
    Party,
    Uma2Flow,
    claim_token,
    live_flow,
)

pytestmark = pytest.mark.live

X_RAYS = {"name": "X-rays", "scopes": ["view", "annotate"]}
DOCTOR_1_0 = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]


@pytest.fixture
def rules_text() -> str:
    return DOCTORS_MAY_VIEW


def doctor(role: str = "doctor") -> dict[str, str]:
    return {"claim_token": claim_token({"role": [role]}), "claim_token_format": EMPLOYEE}


def permissions(answer: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(p["resource_id"], p["resource_scopes"]) for p in answer["permissions"]]


def test_one_set_granted_through_1_0_to_one_party_and_through_2_0_to_another(
    live_server: LiveServer,
) -> None:
    # UMA 1.0: the resource server registers the set; a client with an AAT gets an RPT.
    v1 = live_flow(live_server, X_RAYS, push_types=(EMPLOYEE,))
    rpt_1_0 = v1.new_rpt()
    assert v1.ask(v1.ticket("view"), DOCTOR_1_0, rpt=rpt_1_0).status == 201

    # UMA 2.0: another client, made by the operator (confidential: the grant by default).
    made = live_server.command("client", "create", "--name", "Viewer 2", "--push-claims", EMPLOYEE)
    v2 = Uma2Flow(
        HttpApi(live_server.url),
        v1.rs,
        Party(made["client_id"], made["client_secret"], "", ""),
    )
    # The 2.0 resource registration endpoint is the 1.0 collection: the same set, both names.
    assert v2.read(v1.rs_id)["resource_scopes"] == ["view", "annotate"]

    # need_info: what is missing, and a new ticket; the old one is refused from then on.
    first = v2.ticket((v1.rs_id, ["view"]))
    need = v2.token(first)
    assert need.status == 403 and need.json["error"] == "need_info"
    assert need.json["required_claims"] == [
        {
            "name": "role",
            "friendly_name": "Your role at the hospital",
            "claim_token_format": [EMPLOYEE],
        }
    ]
    assert v2.token(first, **doctor()).json["error"] == "invalid_grant"

    # The claim token grants: an RPT of the 2.0 client's own, and a PCT.
    granted = v2.token(need.json["ticket"], **doctor())
    assert granted.status == 200, granted.text
    assert granted.json["token_type"] == "Bearer" and granted.json["upgraded"] is False
    rpt_2_0 = granted.json["access_token"]

    # A claim that can never hold: request_denied.
    denied = v2.token(v2.ticket((v1.rs_id, ["view"])), **doctor("nurse"))
    assert (denied.status, denied.json["error"]) == (403, "request_denied")

    # The PCT brings the claims to a later ticket, and the RPT sent is upgraded.
    second = v2.register({"resource_scopes": ["view"], "type": "https://example.com/scan"})
    upgraded = v2.token(v2.ticket((second, ["view"])), pct=granted.json["pct"], rpt=rpt_2_0)
    assert upgraded.status == 200, upgraded.text
    assert upgraded.json["access_token"] == rpt_2_0 and upgraded.json["upgraded"] is True

    # The resource server introspects both, each under both generations' names.
    assert permissions(v1.introspect(rpt_1_0)) == [(v1.rs_id, ["view"])]
    assert sorted(permissions(v2.introspect(rpt_2_0))) == sorted(
        [(v1.rs_id, ["view"]), (second, ["view"])]
    )
    one = v1.introspect(rpt_1_0)["permissions"][0]
    assert one["resource_set_id"] == one["resource_id"] and one["scopes"] == one["resource_scopes"]

"""A rule said as a sentence for its owner (services/rule_sentences.py): one case per operator of
the rule language, the sources of claims, coverage, apps and ends; never a Python list, an id or
an operator's name."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from umaserver.claims.model import ACCOUNT_CLAIM_TYPE
from umaserver.policy.rule_file import parse_rule_table
from umaserver.services import rule_sentences

EMPLOYEE = "https://example.com/claims/employee"
SET = "set-1"


def rule_sentence(rule: Any, **given: Any) -> str:
    """The sentence on the page of the set SET."""
    return rule_sentences.rule_sentence(rule, **{"set_id": SET, **given})


def rule(*conditions: dict[str, Any], **table: Any) -> Any:
    base: dict[str, Any] = {
        "id": "r",
        "owner": "alice",
        "scopes": ["view", "print"],
        "resource_sets": {"ids": [SET]},
    }
    if conditions:
        base["conditions"] = list(conditions)
    return parse_rule_table({**base, **table})


@pytest.mark.parametrize(
    ("condition", "said"),
    [
        ({"equals": "radiology"}, "their team is 'radiology'"),
        ({"equals": 7}, "their team is 7"),
        ({"one_of": ["a", "b", "c"]}, "their team is 'a', 'b' or 'c'"),
        ({"contains": "doctor"}, "their team contains 'doctor'"),
        ({"contains_any": ["x", "y"]}, "their team contains 'x' or 'y'"),
        ({"prefix": "radio"}, "their team starts with 'radio'"),
        ({"suffix": "logy"}, "their team ends with 'logy'"),
        ({"exists": True}, "they have a team"),
        ({"regex": "r.*y"}, "their team matches the pattern 'r.*y'"),
    ],
)
def test_each_operator_reads_as_words(condition: dict[str, Any], said: str) -> None:
    sentence = rule_sentence(rule({"claim": "team", "types": [EMPLOYEE], **condition}))
    assert sentence == f"People whose employee claims say {said} may view and print."


def test_the_issue_example() -> None:
    doctors = rule({"claim": "role", "contains": "doctor", "types": [EMPLOYEE]})
    assert rule_sentence(doctors, set_id=SET) == (
        "People whose employee claims say their role contains 'doctor' may view and print."
    )


@pytest.mark.parametrize(
    ("sources", "said"),
    [
        ({}, "People whose claims say"),
        ({"types": [ACCOUNT_CLAIM_TYPE]}, "People whose account here says"),
        ({"types": ["claim-client-claims-oidc-1.0"]}, "People whose OpenID Connect claims say"),
        ({"types": ["claim-client-assertion-saml-1.0"]}, "People whose SAML assertion says"),
        (
            {"types": ["urn:example:team", EMPLOYEE]},
            "People whose employee claims or team claims say",
        ),
        (
            {"types": [EMPLOYEE], "issuers": ["https://idp.example"]},
            "People whose employee claims vouched for by https://idp.example say",
        ),
    ],
)
def test_where_the_claims_come_from(sources: dict[str, Any], said: str) -> None:
    sentence = rule_sentence(rule({"claim": "role", "contains": "doctor", **sources}))
    assert sentence == f"{said} their role contains 'doctor' may view and print."


def test_conditions_of_one_source_share_their_whose() -> None:
    both = rule(
        {"claim": "role", "contains": "doctor", "types": [EMPLOYEE]},
        {"claim": "ward", "equals": "3", "types": [EMPLOYEE]},
        {"claim": "email", "suffix": "@example.com", "types": ["claim-client-claims-oidc-1.0"]},
    )
    assert rule_sentence(both) == (
        "People whose employee claims say their role contains 'doctor' and their ward is '3'"
        " and whose OpenID Connect claims say their email ends with '@example.com'"
        " may view and print."
    )


def test_a_share_names_its_person_and_its_last_day() -> None:
    until = int(datetime(2026, 11, 29, tzinfo=UTC).timestamp())  # the end of 28 Nov
    share = rule(
        {"claim": "username", "equals": "bob", "types": [ACCOUNT_CLAIM_TYPE]},
        scopes=["view"],
        until=until,
    )
    assert rule_sentence(share, set_id=SET) == "bob may view until 28 Nov 2026."
    by_email = rule(
        {"claim": "email", "equals": "carol@example.com", "types": [ACCOUNT_CLAIM_TYPE]}
    )
    assert rule_sentence(by_email, set_id=SET) == "carol@example.com may view and print."


def test_an_end_within_a_day_is_said_to_the_minute() -> None:
    until = int(datetime(2026, 11, 28, 13, 30, tzinfo=UTC).timestamp())
    assert (
        rule_sentence(rule(until=until)) == "Anyone may view and print until 28 Nov 2026 13:30 UTC."
    )


@pytest.mark.parametrize(
    ("selector", "said"),
    [
        ({"ids": [SET]}, "Anyone may view and print."),
        ({"all": True}, "Anyone may view and print on all your resource sets."),
        (
            {"types": ["https://example.com/rsets/photo"]},
            "Anyone may view and print on your resource sets of type"
            " 'https://example.com/rsets/photo'.",
        ),
        (
            {"names": ["Holiday photos"]},
            "Anyone may view and print on your resource sets named 'Holiday photos'.",
        ),
        (
            {"ids": [SET, "other"]},
            "Anyone may view and print on this resource set and 1 other resource set.",
        ),
    ],
)
def test_which_sets(selector: dict[str, Any], said: str) -> None:
    assert rule_sentence(rule(resource_sets=selector), set_id=SET) == said


def test_apps_and_scopes_by_their_names() -> None:
    names = {"c1": "Viewer", "c2": "Printer", "view": "View the photos", "print": "Print them"}
    only = rule(clients=["c2", "c1"], scopes=["view", "print", "delete"])
    assert rule_sentence(
        only, scope_label=lambda s: names.get(s, s), client_label=names.__getitem__
    ) == ("Anyone may View the photos, Print them and delete through the apps Viewer or Printer.")
    one = rule(clients=["c1"])
    assert rule_sentence(one, client_label=names.__getitem__).endswith("through the app Viewer.")

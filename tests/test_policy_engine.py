"""The owners' rule engine on its own: operators, sources, scopes, resource sets, need_claims, the
explanations, the rule file's errors, and the store that reloads it. No Flask, no database."""

from __future__ import annotations

import json
import logging
import os
import threading
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from umaserver.policy.decision import Decision, decide
from umaserver.policy.rule_file import (
    OPERATORS,
    PolicyError,
    load_rules,
    parse_rule_table,
    parse_rules,
    rule_table,
)
from umaserver.policy.rules import ResourceSetRef, ResourceSetSelector, Rule, RuleSet
from umaserver.policy.store import PolicyStore
from umaserver.storage.records import Claim

from .flows import wait_until

EMPLOYEE = "https://example.com/claims/employee"
OIDC = "claim-client-claims-oidc-1.0"
SAML = "claim-client-assertion-saml-1.0"
PHOTO = "https://example.com/rsets/photo"
CLIENT = "client-1"
IDP = "https://idp.example.com"
XRAY = ResourceSetRef("rs-1", "X-ray", PHOTO)
# What a client registered for the employee and OIDC types can supply, with one OIDC provider.
SUPPLY = frozenset({(EMPLOYEE, CLIENT), (OIDC, CLIENT), (OIDC, IDP)})
EXAMPLE_FILE = Path(__file__).resolve().parent.parent / "policies.example.toml"


def rule(
    rule_id: str = "r",
    *conditions: str,
    scopes: Sequence[str] = ("view",),
    owner: str = "alice",
    sets: str = "",
) -> str:
    """One [[rules]] table; each condition is the TOML body of one [[rules.conditions]]."""
    text = f'[[rules]]\nid = "{rule_id}"\nowner = "{owner}"\nscopes = {json.dumps(list(scopes))}\n'
    if sets:
        text += f"[rules.resource_sets]\n{sets}\n"
    for condition in conditions:
        text += f"[[rules.conditions]]\n{condition}\n"
    return text


def claim(name: str, value: Any, claim_type: str = EMPLOYEE, issuer: str = CLIENT) -> Claim:
    return Claim(claim_type, name, value, issuer, CLIENT, 1_700_000_000)


def ask(
    text: str,
    claims: Iterable[Claim] = (),
    scopes: Sequence[str] = ("view",),
    resource_set: ResourceSetRef = XRAY,
    can_supply: Iterable[tuple[str, str]] = SUPPLY,
) -> Decision:
    return decide(
        parse_rules(text),
        owner="alice",
        resource_set=resource_set,
        scopes=scopes,
        claims=list(claims),
        can_supply=frozenset(can_supply),
    )


def reasons(decision: Decision) -> dict[str, list[str]]:
    return {verdict.id: list(verdict.reasons) for verdict in decision.explain()}


DOCTOR = 'claim = "role"\ncontains = "doctor"'
COLLEAGUE = 'claim = "email"\nsuffix = "@example.com"'


# -- operators ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "value", "holds", "said"),
    [
        ('equals = "doctor"', "doctor", True, "equals 'doctor'"),
        ('equals = "doctor"', "Doctor", False, "equals 'doctor'"),
        ('equals = "7"', 7, False, "equals '7'"),
        ("equals = true", True, True, "equals true"),
        ("equals = true", 1, False, "equals true"),
        ("equals = 1", True, False, "equals 1"),
        ("equals = 1", 1.0, True, "equals 1"),
        ("equals = 1.5", 1.5, True, "equals 1.5"),
        ("equals = [1, 2]", [1, 2], True, "equals [1, 2]"),
        ("equals = [1, 2]", [2, 1], False, "equals [1, 2]"),
        ("equals = [1, 2]", [1, 2, 3], False, "equals [1, 2]"),
        ("equals = { a = 1 }", {"a": 1}, True, 'equals {"a": 1}'),
        ("equals = { a = 1 }", {"a": 1, "b": 2}, False, 'equals {"a": 1}'),
        ("equals = { a = 1 }", {"a": True}, False, 'equals {"a": 1}'),
        (
            'one_of = ["radiology", "oncology"]',
            "oncology",
            True,
            "is one of 'radiology', 'oncology'",
        ),
        (
            'one_of = ["radiology", "oncology"]',
            "surgery",
            False,
            "is one of 'radiology', 'oncology'",
        ),
        (
            'one_of = ["radiology", "oncology"]',
            ["oncology"],
            False,
            "is one of 'radiology', 'oncology'",
        ),
        ('one_of = [1, "a"]', 1, True, "is one of 1, 'a'"),
        ('one_of = [1, "a"]', True, False, "is one of 1, 'a'"),
        ('one_of = [1, "a"]', "1", False, "is one of 1, 'a'"),
        ('contains = "doctor"', ["nurse", "doctor"], True, "contains 'doctor'"),
        ('contains = "doctor"', ["nurse"], False, "contains 'doctor'"),
        ('contains = "doctor"', "doctor", True, "contains 'doctor'"),  # one value, no array
        ('contains = "doctor"', "doctors", False, "contains 'doctor'"),  # not a substring test
        ('contains = "doctor"', [], False, "contains 'doctor'"),
        ('contains = "doctor"', [["doctor"]], False, "contains 'doctor'"),
        ("contains = 1", [True], False, "contains 1"),
        ("contains = { a = 1 }", [{"a": 1}], True, 'contains {"a": 1}'),
        ('prefix = "https://"', "https://x.example", True, "starts with 'https://'"),
        ('prefix = "https://"', "http://x.example", False, "starts with 'https://'"),
        ('prefix = "https://"', ["https://x.example"], False, "starts with 'https://'"),
        ('suffix = "@example.com"', "bob@example.com", True, "ends with '@example.com'"),
        ('suffix = "@example.com"', "bob@example.com.evil", False, "ends with '@example.com'"),
        ('suffix = "@example.com"', None, False, "ends with '@example.com'"),
        ("exists = true", None, True, "exists"),
        ("exists = true", False, True, "exists"),
        ("regex = 'S-[0-9]{4}'", "S-0042", True, "fully matches the pattern 'S-[0-9]{4}'"),
        ("regex = 'S-[0-9]{4}'", "xS-0042", False, "fully matches the pattern 'S-[0-9]{4}'"),
        ("regex = 'S-[0-9]{4}'", "S-00421", False, "fully matches the pattern 'S-[0-9]{4}'"),
        ("regex = 'S-[0-9]{4}'", 42, False, "fully matches the pattern 'S-[0-9]{4}'"),
        ("regex = 'd.ctor'", "döctor", True, "fully matches the pattern 'd.ctor'"),
        ("regex = 'd.ctor'", "d\ud800ctor", False, "fully matches the pattern 'd.ctor'"),
        (
            'contains_any = ["editor", "admin"]',
            ["viewer", "admin"],
            True,
            "contains at least one of 'editor', 'admin'",
        ),
        (
            'contains_any = ["editor", "admin"]',
            "editor",
            True,
            "contains at least one of 'editor', 'admin'",
        ),
        (
            'contains_any = ["editor", "admin"]',
            ["viewer"],
            False,
            "contains at least one of 'editor', 'admin'",
        ),
        (
            'contains_any = ["editor", "admin"]',
            [],
            False,
            "contains at least one of 'editor', 'admin'",
        ),
        (
            'contains_any = ["editor", "admin"]',
            "editors",
            False,
            "contains at least one of 'editor', 'admin'",
        ),
        (
            'contains_any = ["editor", "admin"]',
            [["editor"]],
            False,
            "contains at least one of 'editor', 'admin'",
        ),
        ('contains_any = [1, "a"]', [True, "b"], False, "contains at least one of 1, 'a'"),
        ('contains_any = [1, "a"]', [2, 1.0], True, "contains at least one of 1, 'a'"),
    ],
)
def test_operator(operator: str, value: Any, holds: bool, said: str) -> None:
    decision = ask(rule("r", f'claim = "c"\n{operator}'), [claim("c", value)])
    if holds:
        assert decision.outcome == "grant"
        assert decision.rule_ids == ("r",)
        assert reasons(decision) == {
            "r": [f"condition 1 on 'c' holds: an accepted claim {said}", "grants 'view'"]
        }
    else:
        # The claim was sent and failed, so it is not asked for again: deny.
        assert decision.outcome == "deny"
        assert decision.rule_ids == ()
        assert reasons(decision) == {"r": [f"condition 1 on 'c' failed: no accepted claim {said}"]}
    assert decision.explain()[0].holds is holds


# -- a rule's clients ---------------------------------------------------------------------------


def ask_as(client_id: str | None, text: str, claims: Iterable[Claim] = ()) -> Decision:
    return decide(
        parse_rules(text),
        owner="alice",
        resource_set=XRAY,
        scopes=("view",),
        claims=list(claims),
        can_supply=SUPPLY,
        client_id=client_id,
    )


ONLY_APP = rule("r", DOCTOR).replace(
    "[[rules.conditions]]", 'clients = ["app-1", "app-2"]\n[[rules.conditions]]'
)


def test_a_rule_listing_clients_holds_only_for_those() -> None:
    doctor = [claim("role", ["doctor"])]
    assert ask_as("app-2", ONLY_APP, doctor).outcome == "grant"
    other = ask_as("other", ONLY_APP, doctor)
    # No claim makes it hold for another client: deny, not need_claims.
    assert other.outcome == "deny"
    assert reasons(other)["r"] == [
        "holds only for the clients 'app-1', 'app-2': the acting client 'other' is not one of them",
        "condition 1 on 'role' holds: an accepted claim contains 'doctor'",
    ]
    assert ask_as("other", ONLY_APP).outcome == "deny"
    assert ask_as("app-1", ONLY_APP).outcome == "need_claims"
    unnamed = ask_as(None, ONLY_APP, doctor)
    assert unnamed.outcome == "deny"
    assert reasons(unnamed)["r"][0] == (
        "holds only for the clients 'app-1', 'app-2': no acting client was named"
    )


def test_a_rule_listing_clients_without_conditions() -> None:
    text = rule("r") + 'clients = ["app-1"]\n'
    granted = ask_as("app-1", text)
    assert granted.outcome == "grant"
    assert reasons(granted)["r"] == [
        "has no conditions, so it holds for anyone through the clients it lists",
        "grants 'view'",
    ]
    assert ask_as("app-2", text).outcome == "deny"
    # Another rule can still grant to the other client.
    assert ask_as("app-2", text + rule("s")).outcome == "grant"


def ask_at(now: int | None, text: str, claims: Iterable[Claim] = ()) -> Decision:
    return decide(
        parse_rules(text),
        owner="alice",
        resource_set=XRAY,
        scopes=("view",),
        claims=list(claims),
        can_supply=SUPPLY,
        now=now,
    )


def test_a_rule_with_an_end_holds_until_then_and_never_without_a_time() -> None:
    end = 1_800_000_000
    text = rule("r") + f"until = {end}\n[[rules.conditions]]\n{DOCTOR}\n"
    doctor = [claim("role", ["doctor"])]
    assert ask_at(end - 1, text, doctor).outcome == "grant"
    assert ask_at(end - 1, text).outcome == "need_claims"
    ended = ask_at(end, text, doctor)
    assert ended.outcome == "deny"
    assert reasons(ended)["r"] == ["ended at 2027-01-15 08:00:00 UTC"]
    assert ask_at(None, text, doctor).outcome == "deny"  # a decision given no time: ended
    assert ask_at(end, text + rule("s", DOCTOR), doctor).outcome == "grant"
    assert parse_rule_table(rule_table(parse_rules(text).rules_for("alice")[0])).until == end


@pytest.mark.parametrize("until", ['"2026-11-28"', "-1", "true", "1.5"])
def test_a_rules_end_is_a_whole_number_of_seconds(until: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_rules(rule("r") + f"until = {until}\n")
    assert "rules[0].until: must be a time (seconds since 1970, a whole number >= 0)" in str(
        caught.value.errors
    )


def test_a_catastrophic_backtracking_pattern_runs_in_linear_time() -> None:
    text = rule("r", "claim = \"c\"\nregex = '(a+)+$'") + rule(
        "s", "claim = \"c\"\nregex = '(x+x+)+y'"
    )
    long = "a" * 200_000 + "b"
    assert ask(text, [claim("c", long), claim("c", "x" * 200_000)]).outcome == "deny"


# -- accepted types and issuers, several claims of one name ------------------------------------

FROM_IDP = f'{DOCTOR}\ntypes = ["{EMPLOYEE}"]\nissuers = ["{IDP}"]'
ONLY_FROM = f"(accepted types ['{EMPLOYEE}'], accepted issuers ['{IDP}'])"


@pytest.mark.parametrize(
    ("given", "outcome", "reason"),
    [
        (
            [(EMPLOYEE, IDP, ["doctor"])],
            "grant",
            "condition 1 on 'role' holds: an accepted claim contains 'doctor'",
        ),
        (
            [(EMPLOYEE, CLIENT, ["doctor"])],
            "need_claims",
            "condition 1 on 'role' failed: a claim 'role' was given, but not from an accepted"
            f" source {ONLY_FROM}; this client can supply one",
        ),
        (
            [(OIDC, IDP, ["doctor"])],
            "need_claims",
            "condition 1 on 'role' failed: a claim 'role' was given, but not from an accepted"
            f" source {ONLY_FROM}; this client can supply one",
        ),
        (
            [],
            "need_claims",
            f"condition 1 on 'role' failed: no claim 'role' was given {ONLY_FROM};"
            " this client can supply one",
        ),
        (
            [(EMPLOYEE, IDP, ["nurse"]), (EMPLOYEE, IDP, ["doctor"])],
            "grant",
            "condition 1 on 'role' holds: an accepted claim contains 'doctor'",
        ),
        (
            [(EMPLOYEE, CLIENT, ["doctor"]), (EMPLOYEE, IDP, ["nurse"])],
            "deny",
            "condition 1 on 'role' failed: no accepted claim contains 'doctor'",
        ),
    ],
)
def test_only_claims_from_accepted_types_and_issuers_count(
    given: list[tuple[str, str, Any]], outcome: str, reason: str
) -> None:
    claims = [claim("role", value, claim_type, issuer) for claim_type, issuer, value in given]
    decision = ask(rule("r", FROM_IDP), claims, can_supply=[(EMPLOYEE, CLIENT), (EMPLOYEE, IDP)])
    assert decision.outcome == outcome
    assert reasons(decision)["r"][0] == reason


@pytest.mark.parametrize(
    ("condition", "claim_type", "issuer", "holds"),
    [
        (f'{DOCTOR}\ntypes = ["{EMPLOYEE}"]', EMPLOYEE, "anyone", True),
        (f'{DOCTOR}\ntypes = ["{EMPLOYEE}"]', OIDC, CLIENT, False),
        (f'{DOCTOR}\nissuers = ["{IDP}"]', OIDC, IDP, True),
        (f'{DOCTOR}\nissuers = ["{IDP}"]', EMPLOYEE, CLIENT, False),
        (f'{DOCTOR}\ntypes = ["{EMPLOYEE}", "{OIDC}"]', OIDC, CLIENT, True),
        (DOCTOR, "urn:any", "anyone", True),
    ],
)
def test_type_and_issuer_filters(condition: str, claim_type: str, issuer: str, holds: bool) -> None:
    decision = ask(rule("r", condition), [claim("role", ["doctor"], claim_type, issuer)])
    assert decision.explain()[0].holds is holds


def test_every_condition_must_hold() -> None:
    text = rule("r", DOCTOR, COLLEAGUE)
    assert (
        ask(text, [claim("role", ["doctor"]), claim("email", "a@example.com")]).outcome == "grant"
    )
    decision = ask(text, [claim("role", ["doctor"]), claim("email", "a@elsewhere.org")])
    assert decision.outcome == "deny"
    assert reasons(decision)["r"] == [
        "condition 1 on 'role' holds: an accepted claim contains 'doctor'",
        "condition 2 on 'email' failed: no accepted claim ends with '@example.com'",
    ]


def test_a_rule_without_conditions_grants_to_anyone() -> None:
    decision = ask(rule("open"))
    assert decision.outcome == "grant"
    assert reasons(decision) == {
        "open": ["has no conditions, so it holds for anyone", "grants 'view'"]
    }


# -- scopes: all or nothing ---------------------------------------------------------------------

TWO_RULES = rule("doctors", DOCTOR, scopes=["view"]) + rule(
    "colleagues", f'{COLLEAGUE}\ntypes = ["{OIDC}"]', scopes=["print"]
)
IS_DOCTOR = claim("role", ["doctor"])
IS_COLLEAGUE = claim("email", "bob@example.com", OIDC)


@pytest.mark.parametrize(
    ("claims", "scopes", "outcome", "rule_ids", "summary"),
    [
        (
            [IS_DOCTOR, IS_COLLEAGUE],
            ["view", "print"],
            "grant",
            ("doctors", "colleagues"),
            "Granted 'view', 'print' on resource set 'X-ray' by rules 'doctors' and 'colleagues'.",
        ),
        (
            [IS_DOCTOR],
            ["view"],
            "grant",
            ("doctors",),
            "Granted 'view' on resource set 'X-ray' by rule 'doctors'.",
        ),
        (
            [IS_DOCTOR, IS_COLLEAGUE],
            ["print"],
            "grant",
            ("colleagues",),
            "Granted 'print' on resource set 'X-ray' by rule 'colleagues'.",
        ),
        (
            [IS_DOCTOR],
            ["view", "print"],
            "need_claims",
            ("colleagues",),
            "Rule 'colleagues' could grant 'print' on resource set 'X-ray' with 1 more claim:"
            " 'email'.",
        ),
        (
            [IS_DOCTOR, claim("email", "bob@elsewhere.org", OIDC)],
            ["view", "print"],
            "deny",
            (),
            "Denied: no rule that holds, or that this client could still satisfy, grants 'print'"
            " on resource set 'X-ray'.",
        ),
        (
            [IS_DOCTOR, IS_COLLEAGUE],
            ["view", "delete"],
            "deny",
            (),
            "Denied: no rule that holds, or that this client could still satisfy, grants 'delete'"
            " on resource set 'X-ray'.",
        ),
        ([IS_DOCTOR], [], "deny", (), "Denied: no scopes were requested."),
    ],
)
def test_the_rules_that_hold_must_grant_every_scope(
    claims: list[Claim], scopes: list[str], outcome: str, rule_ids: tuple[str, ...], summary: str
) -> None:
    decision = ask(TWO_RULES, claims, scopes)
    assert (decision.outcome, decision.rule_ids, decision.summary) == (outcome, rule_ids, summary)


def test_a_rule_that_holds_for_other_scopes_only_says_so() -> None:
    text = rule("printing", scopes=["print", "delete"]) + rule("doctors", DOCTOR)
    decision = ask(text, [IS_DOCTOR], ["view"])
    assert decision.outcome == "grant" and decision.rule_ids == ("doctors",)
    assert reasons(decision)["printing"] == [
        "has no conditions, so it holds for anyone",
        "grants none of the requested scopes (only 'print', 'delete')",
    ]


def test_repeated_scopes_count_once() -> None:
    assert ask(rule("r"), scopes=["view", "view"]).summary == (
        "Granted 'view' on resource set 'X-ray' by rule 'r'."
    )


# -- resource sets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "resource_set", "covered", "described"),
    [
        ("", XRAY, True, ""),
        ("all = true", XRAY, True, ""),
        ('ids = ["rs-1"]', XRAY, True, ""),
        ('ids = ["rs-2"]', XRAY, False, "ids ['rs-2']"),
        (f'types = ["{PHOTO}"]', XRAY, True, ""),
        ('types = ["urn:other"]', XRAY, False, "types ['urn:other']"),
        (
            f'types = ["{PHOTO}"]',
            ResourceSetRef("rs-1", "X-ray", None),
            False,
            f"types ['{PHOTO}']",
        ),
        ('names = ["X-ray"]', XRAY, True, ""),
        ('names = ["x-ray"]', XRAY, False, "names ['x-ray']"),
        ('ids = ["rs-9"]\nnames = ["X-ray"]', XRAY, True, ""),
        (
            'all = false\nids = ["rs-9"]\nnames = ["Diary", "Notes"]',
            XRAY,
            False,
            "ids ['rs-9'], names ['Diary', 'Notes']",
        ),
    ],
)
def test_resource_set_matching(
    sets: str, resource_set: ResourceSetRef, covered: bool, described: str
) -> None:
    decision = ask(rule("r", sets=sets), resource_set=resource_set)
    if covered:
        assert decision.outcome == "grant"
    else:
        assert decision.outcome == "deny"
        assert decision.summary == "Denied: no rule of 'alice' covers resource set 'X-ray'."
        assert reasons(decision) == {"r": [f"does not cover resource set 'X-ray' ({described})"]}
        assert decision.explain()[0].holds is False


def test_other_owners_rules_are_ignored() -> None:
    text = rule("bobs", owner="bob") + rule("alices", sets='names = ["Diary"]')
    decision = ask(text)
    assert decision.outcome == "deny"
    assert [verdict.id for verdict in decision.explain()] == ["alices"]
    assert parse_rules(text).rules_for("bob")[0].id == "bobs"
    assert parse_rules(text).rules_for("carol") == ()


def test_a_rule_that_does_not_cover_the_set_does_not_count() -> None:
    text = rule("diary", sets='names = ["Diary"]') + rule("doctors", DOCTOR)
    decision = ask(text)
    assert decision.outcome == "need_claims" and decision.rule_ids == ("doctors",)


# -- need_claims: the nearest rule --------------------------------------------------------------

VIA_IDP = f'claim = "affiliation"\ncontains = "staff"\ntypes = ["{SAML}"]\nissuers = ["{IDP}"]'


@pytest.mark.parametrize(
    ("text", "claims", "scopes", "nearest", "needed"),
    [
        # Fewest missing conditions wins over file order.
        (
            rule("two", DOCTOR, COLLEAGUE) + rule("one", COLLEAGUE),
            [],
            ["view"],
            "one",
            [(EMPLOYEE, "email")],
        ),
        # Equal: the first in the file.
        (
            rule("first", DOCTOR) + rule("second", COLLEAGUE),
            [],
            ["view"],
            "first",
            [(EMPLOYEE, "role")],
        ),
        # A rule that grants every uncovered scope wins over one with fewer missing conditions.
        (
            rule("view-only", COLLEAGUE)
            + rule("both", DOCTOR, COLLEAGUE, scopes=["view", "print"]),
            [],
            ["view", "print"],
            "both",
            [(EMPLOYEE, "role"), (EMPLOYEE, "email")],
        ),
        # Only the missing conditions of the nearest rule are asked for.
        (
            rule("r", DOCTOR, COLLEAGUE),
            [IS_DOCTOR],
            ["view"],
            "r",
            [(EMPLOYEE, "email")],
        ),
        # A claim sent with a failing value disqualifies its rule: it is never asked again.
        (
            rule("doctors", DOCTOR)
            + rule("colleagues", COLLEAGUE, 'claim = "badge"\nexists = true'),
            [claim("role", ["nurse"])],
            ["view"],
            "colleagues",
            [(EMPLOYEE, "email"), (EMPLOYEE, "badge")],
        ),
        # A condition this client cannot satisfy disqualifies its rule, however few it misses.
        (
            rule("staff", VIA_IDP) + rule("doctors", DOCTOR, COLLEAGUE),
            [],
            ["view"],
            "doctors",
            [(EMPLOYEE, "role"), (EMPLOYEE, "email")],
        ),
        # Rules that already hold grant their part; the nearest rule is chosen for the rest.
        (
            rule("doctors", DOCTOR) + rule("printers", COLLEAGUE, scopes=["print"]),
            [IS_DOCTOR],
            ["view", "print"],
            "printers",
            [(EMPLOYEE, "email")],
        ),
    ],
)
def test_need_claims_comes_from_the_nearest_rule(
    text: str,
    claims: list[Claim],
    scopes: list[str],
    nearest: str,
    needed: list[tuple[str, str]],
) -> None:
    decision = ask(text, claims, scopes, can_supply=[(EMPLOYEE, CLIENT)])
    assert decision.outcome == "need_claims"
    assert decision.rule_ids == (nearest,)
    assert [(entry.type, entry.name) for entry in decision.need_claims] == needed


BADGE = 'claim = "badge"\nexists = true'


@pytest.mark.parametrize(
    ("text", "claims", "scopes", "nearest", "needed"),
    [
        # Each scope its own rule: what each needs, in the order the scopes were asked for.
        (
            rule("doctors", DOCTOR) + rule("colleagues", COLLEAGUE, scopes=["print"]),
            [],
            ["view", "print"],
            ("doctors", "colleagues"),
            [(EMPLOYEE, "role"), (EMPLOYEE, "email")],
        ),
        (
            rule("doctors", DOCTOR) + rule("colleagues", COLLEAGUE, scopes=["print"]),
            [],
            ["print", "view"],
            ("colleagues", "doctors"),
            [(EMPLOYEE, "email"), (EMPLOYEE, "role")],
        ),
        # Two rules missing one claim: asked for once.
        (
            rule("colleagues", COLLEAGUE)
            + rule("dr-mail", 'claim = "email"\nprefix = "dr."', BADGE, scopes=["print"]),
            [],
            ["view", "print"],
            ("colleagues", "dr-mail"),
            [(EMPLOYEE, "email"), (EMPLOYEE, "badge")],
        ),
        # Per scope, the nearest: for view the rule missing one claim, not the one missing two.
        (
            rule("both", DOCTOR, COLLEAGUE, scopes=["view", "print"])
            + rule("doctors", DOCTOR)
            + rule("badges", BADGE, scopes=["print"]),
            [],
            ["view", "print"],
            ("doctors", "badges"),
            [(EMPLOYEE, "role"), (EMPLOYEE, "badge")],
        ),
        # A rule nearest for one scope is left out when another chosen rule grants it too: its
        # claims would bring the grant no nearer.
        (
            rule("badges", BADGE) + rule("both", DOCTOR, COLLEAGUE, scopes=["view", "print"]),
            [],
            ["view", "print"],
            ("both",),
            [(EMPLOYEE, "role"), (EMPLOYEE, "email")],
        ),
        # Claims already sent count per rule: only what is still missing.
        (
            rule("doctors", DOCTOR, BADGE) + rule("colleagues", COLLEAGUE, scopes=["print"]),
            [IS_DOCTOR],
            ["view", "print"],
            ("doctors", "colleagues"),
            [(EMPLOYEE, "badge"), (EMPLOYEE, "email")],
        ),
    ],
)
def test_need_claims_for_several_scopes_covers_every_scope_not_granted(
    text: str,
    claims: list[Claim],
    scopes: list[str],
    nearest: tuple[str, ...],
    needed: list[tuple[str, str]],
) -> None:
    decision = ask(text, claims, scopes, can_supply=[(EMPLOYEE, CLIENT)])
    assert decision.outcome == "need_claims"
    assert decision.rule_ids == nearest
    assert [(entry.type, entry.name) for entry in decision.need_claims] == needed
    summary = decision.summary.replace("'doctors'", "")  # the rule's name, not a value
    shown = json.dumps([entry.as_dict() for entry in decision.need_claims]) + summary
    assert "doctor" not in shown and "@example.com" not in shown and "dr." not in shown
    # Sending what was asked for, with passing values, grants every scope.
    values = {"role": ["doctor"], "email": "dr.bob@example.com", "badge": "b-7"}
    sent = [claim(name, values[name]) for _, name in needed]
    assert ask(text, [*claims, *sent], scopes, can_supply=[(EMPLOYEE, CLIENT)]).outcome == "grant"


def test_a_summary_for_several_rules_says_which_could_grant_what() -> None:
    text = rule("doctors", DOCTOR) + rule("colleagues", COLLEAGUE, scopes=["print", "delete"])
    decision = ask(text, [], ["view", "print", "delete"], can_supply=[(EMPLOYEE, CLIENT)])
    assert decision.summary == (
        "Rule 'doctors' could grant 'view' and rule 'colleagues' could grant 'print', 'delete' on"
        " resource set 'X-ray' with 2 more claims: 'role', 'email'."
    )


def test_one_scope_no_rule_could_grant_still_denies_the_whole_request() -> None:
    text = rule("doctors", DOCTOR) + rule("staff", VIA_IDP, scopes=["print"])
    decision = ask(text, [], ["view", "print"], can_supply=[(EMPLOYEE, CLIENT)])
    assert (decision.outcome, decision.need_claims) == ("deny", ())
    assert "grants 'print'" in decision.summary


@pytest.mark.parametrize(
    ("text", "claims", "summary"),
    [
        (
            rule("staff", VIA_IDP),
            [],
            "Denied: no rule that holds, or that this client could still satisfy, grants 'view'"
            " on resource set 'X-ray'.",
        ),
        (
            rule("doctors", DOCTOR),
            [claim("role", ["nurse"])],
            "Denied: no rule that holds, or that this client could still satisfy, grants 'view'"
            " on resource set 'X-ray'.",
        ),
        (
            rule("diary", sets='names = ["Diary"]'),
            [],
            "Denied: no rule of 'alice' covers resource set 'X-ray'.",
        ),
        ("", [], "Denied: no rule of 'alice' covers resource set 'X-ray'."),
    ],
)
def test_deny_when_no_rule_can_be_satisfied(text: str, claims: list[Claim], summary: str) -> None:
    decision = ask(text, claims, can_supply=[(EMPLOYEE, CLIENT)])
    assert decision.outcome == "deny"
    assert decision.rule_ids == () and decision.need_claims == ()
    assert decision.summary == summary


def test_deny_explains_a_condition_the_client_cannot_supply() -> None:
    decision = ask(rule("staff", VIA_IDP), can_supply=[(EMPLOYEE, CLIENT)])
    assert reasons(decision) == {
        "staff": [
            "condition 1 on 'affiliation' failed: no claim 'affiliation' was given (accepted types"
            f" ['{SAML}'], accepted issuers ['{IDP}']); this client cannot supply one"
        ]
    }


@pytest.mark.parametrize(
    ("condition", "value"),
    [
        (f'{DOCTOR}\nhint = "Your role at the hospital"', "Your role at the hospital"),
        (DOCTOR, "a value for 'role'"),
        ("claim = \"staff_id\"\nregex = 'S-[0-9]{4}'", "a value for 'staff_id'"),
        ('claim = "level"\none_of = ["secret-7", "secret-8"]', "a value for 'level'"),
    ],
)
def test_need_claims_hints_never_reveal_the_value(condition: str, value: str) -> None:
    decision = ask(rule("r", condition))
    (needed,) = decision.need_claims
    assert needed.value == value
    shown = json.dumps([entry.as_dict() for entry in decision.need_claims]) + decision.summary
    for secret in ("doctor", "S-[0-9]", "secret-"):
        assert secret not in shown


@pytest.mark.parametrize(
    ("condition", "can_supply", "claim_type", "issuers"),
    [
        (DOCTOR, [("urn:b", CLIENT), ("urn:a", "x"), ("urn:c", CLIENT)], "urn:a", []),
        (
            f'{DOCTOR}\nissuers = ["{IDP}"]',
            [(OIDC, CLIENT), (OIDC, IDP), (SAML, IDP), ("urn:a", CLIENT)],
            SAML,
            [IDP],  # a verified type, and the rule demands an issuer: the entry says whose word
        ),
        (f'{DOCTOR}\ntypes = ["{OIDC}", "urn:z"]', [("urn:a", CLIENT), (OIDC, CLIENT)], OIDC, []),
    ],
)
def test_the_type_asked_for_is_the_first_the_client_can_supply(
    condition: str, can_supply: list[tuple[str, str]], claim_type: str, issuers: list[str]
) -> None:
    (needed,) = ask(rule("r", condition), can_supply=can_supply).need_claims
    expected: dict[str, Any] = {"type": claim_type, "name": "role", "value": "a value for 'role'"}
    if issuers:
        expected["value"] += f" vouched for by {IDP}"
        expected["issuers"] = issuers
    assert needed.as_dict() == expected


def test_two_missing_conditions_on_one_claim_ask_for_it_once() -> None:
    decision = ask(rule("r", COLLEAGUE, 'claim = "email"\nprefix = "dr."'))
    assert [entry.as_dict() for entry in decision.need_claims] == [
        {"type": OIDC, "name": "email", "value": "a value for 'email'"}
    ]


def test_the_explanation_never_contains_claim_values() -> None:
    claims = [
        claim("role", ["chief-surgeon-xyz"]),
        claim("email", "private-address-xyz@x.org", OIDC),
    ]
    decision = ask(
        TWO_RULES + rule("all", 'claim = "role"\nexists = true'), claims, ["view", "print"]
    )
    assert decision.outcome == "deny"
    assert "xyz" not in json.dumps(decision.as_dict())


def test_decision_as_dict() -> None:
    decision = ask(TWO_RULES, [IS_DOCTOR], ["view", "print"])
    assert decision.as_dict() == {
        "decision": "need_claims",
        "rules": ["colleagues"],
        "need_claims": [{"type": OIDC, "name": "email", "value": "a value for 'email'"}],
        "explanation": [
            {
                "rule": "doctors",
                "holds": True,
                "reasons": [
                    "condition 1 on 'role' holds: an accepted claim contains 'doctor'",
                    "grants 'view'",
                ],
            },
            {
                "rule": "colleagues",
                "holds": False,
                "reasons": [
                    "condition 1 on 'email' failed: no claim 'email' was given (accepted types"
                    f" ['{OIDC}']); this client can supply one"
                ],
            },
        ],
        "summary": "Rule 'colleagues' could grant 'print' on resource set 'X-ray' with 1 more"
        " claim: 'email'.",
    }


class _Noted(str):
    """A rule's text that notes each time it is put into a sentence, i.e. into a reason."""

    def __new__(cls, text: str, noted: list[str]) -> _Noted:
        self = super().__new__(cls, text)
        self.noted = noted
        return self

    def __format__(self, spec: str) -> str:
        self.noted.append(str(self))
        return super().__format__(spec)


def test_the_explanation_is_built_only_when_asked_and_then_kept() -> None:
    noted: list[str] = []

    def noting(r: Rule) -> Rule:
        sets = replace(r.resource_sets, description=_Noted(r.resource_sets.description, noted))
        conditions = tuple(
            replace(c, description=_Noted(c.description, noted)) for c in r.conditions
        )
        return replace(r, resource_sets=sets, conditions=conditions)

    text = TWO_RULES + rule("diary", sets='names = ["Diary"]')
    rules = RuleSet(noting(r) for r in parse_rules(text).rules)
    decision = decide(
        rules,
        owner="alice",
        resource_set=XRAY,
        scopes=["view", "print"],
        claims=[IS_DOCTOR],
        can_supply=SUPPLY,
    )
    assert (decision.outcome, decision.rule_ids) == ("need_claims", ("colleagues",))
    assert [needed.name for needed in decision.need_claims] == ["email"]
    assert decision.summary.startswith("Rule 'colleagues' could grant 'print'")
    assert noted == []  # deciding wrote no reason

    verdicts = decision.explain()
    # The missing email claim's reason names the claim, not what the rule wants of it.
    assert noted == ["contains 'doctor'", "names ['Diary']"]
    assert [verdict.id for verdict in verdicts] == ["doctors", "colleagues", "diary"]
    assert decision.explain() is verdicts
    assert decision.as_dict()["explanation"] == [verdict.as_dict() for verdict in verdicts]
    assert len(noted) == 2  # built once, however often asked
    assert decision.as_dict() == ask(text, [IS_DOCTOR], ["view", "print"]).as_dict()


# -- the rule file's errors ---------------------------------------------------------------------

BASE = '[[rules]]\nid = "r"\nowner = "alice"\nscopes = ["view"]\n'
CONDITION = BASE + "[[rules.conditions]]\n"
SETS = BASE + "[rules.resource_sets]\n"


# Each mistake and what the file's reader says of it (owners' rules get the same messages).
FILE_ERRORS = [
    ("rules = [", "end of document: invalid TOML: Invalid value"),
    ('[[rules]]\nid = "r"\nid = "s"\n', "line 3, column 9: invalid TOML: Cannot overwrite a value"),
    ("[[rules]]\nid = r\n", "line 2, column 6: invalid TOML: Invalid value"),
    ("a = " + "[" * 5000 + "]" * 5000, "invalid TOML: values are nested too deeply"),
    ("policy = 1", "top level: unknown key 'policy'"),
    ('[rules]\nid = "r"', "rules: must be an array of tables ([[rules]])"),
    ("rules = [1]", "rules[0]: must be a table"),
    ('[[rules]]\nowner = "alice"\nscopes = ["view"]', "rules[0]: missing 'id'"),
    ('[[rules]]\nid = "r"\nscopes = ["view"]', "rules[0]: missing 'owner'"),
    ('[[rules]]\nid = "r"\nowner = "alice"', "rules[0]: missing 'scopes'"),
    (BASE.replace('"r"', '""'), "rules[0].id: must be a non-empty string"),
    (BASE.replace('"r"', "5"), "rules[0].id: must be a non-empty string"),
    (BASE.replace('"alice"', '["alice"]'), "rules[0].owner: must be a non-empty string"),
    (BASE.replace('["view"]', "[]"), "rules[0].scopes: must be a non-empty array of non-empty strings"),
    (BASE + "clients = []", "rules[0].clients: must be a non-empty array of non-empty strings"),
    (BASE + 'clients = "app"', "rules[0].clients: must be a non-empty array of non-empty strings"),
    (CONDITION + 'claim = "r"\ncontains_any = "a"', "rules[0].conditions[0].contains_any: must be a non-empty array of JSON values"),
    (CONDITION + 'claim = "r"\ncontains_any = []', "rules[0].conditions[0].contains_any: must be a non-empty array of JSON values"),
    (BASE.replace('["view"]', '["view", ""]'), "rules[0].scopes: must be a non-empty array of non-empty strings"),
    (BASE.replace('["view"]', '"view"'), "rules[0].scopes: must be a non-empty array of non-empty strings"),
    (BASE + "description = 1", "rules[0].description: must be a string"),
    (BASE + 'colour = "red"', "rules[0]: unknown key 'colour'"),
    (rule("x") + rule("y") + rule("x"), "rules[2].id: duplicate id 'x'"),
    (BASE + 'resource_sets = "all"', "rules[0].resource_sets: must be a table"),
    (SETS + 'kinds = ["photo"]', "rules[0].resource_sets: unknown key 'kinds'"),
    (SETS + 'all = "yes"', "rules[0].resource_sets.all: must be true or false"),
    (SETS + 'all = true\nids = ["a"]', "rules[0].resource_sets: 'all = true' cannot be combined with ids, types or names"),
    (SETS, "rules[0].resource_sets: name the sets with ids, types or names, or set all = true"),
    (SETS + "all = false", "rules[0].resource_sets: name the sets with ids, types or names, or set all = true"),
    (SETS + "ids = []", "rules[0].resource_sets.ids: must be a non-empty array of non-empty strings"),
    (SETS + "types = [1]", "rules[0].resource_sets.types: must be a non-empty array of non-empty strings"),
    (SETS + 'names = "Diary"', "rules[0].resource_sets.names: must be a non-empty array of non-empty strings"),
    (BASE + "conditions = 1", "rules[0].conditions: must be an array of tables ([[rules.conditions]])"),
    (BASE + "conditions = [1]", "rules[0].conditions[0]: must be a table"),
    (CONDITION + "exists = true", "rules[0].conditions[0]: missing 'claim'"),
    (CONDITION + 'claim = ""\nexists = true', "rules[0].conditions[0].claim: must be a non-empty string"),
    (CONDITION + 'claim = "role"\nstarts_with = "d"', "rules[0].conditions[0]: unknown operator 'starts_with'"),
    (
        CONDITION + 'claim = "role"',
        "rules[0].conditions[0]: missing an operator, one of equals, one_of, contains, contains_any,"
        " prefix, suffix, exists, regex",
    ),
    (
        CONDITION + 'claim = "role"\nequals = "a"\nprefix = "a"',
        "rules[0].conditions[0]: more than one operator ('equals', 'prefix'); a condition has"
        " exactly one",
    ),
    (CONDITION + 'claim = "d"\nequals = 2024-01-01', "rules[0].conditions[0].equals: must be a JSON value (quote dates and times as strings)"),
    (CONDITION + 'claim = "d"\ncontains = { at = 10:00:00 }', "rules[0].conditions[0].contains: must be a JSON value (quote dates and times as strings)"),
    (CONDITION + 'claim = "d"\none_of = []', "rules[0].conditions[0].one_of: must be a non-empty array of JSON values"),
    (CONDITION + 'claim = "d"\none_of = "a"', "rules[0].conditions[0].one_of: must be a non-empty array of JSON values"),
    (CONDITION + 'claim = "d"\none_of = [2024-01-01]', "rules[0].conditions[0].one_of: must be a non-empty array of JSON values"),
    (CONDITION + 'claim = "d"\nprefix = ""', "rules[0].conditions[0].prefix: must be a non-empty string"),
    (CONDITION + 'claim = "d"\nsuffix = ["a"]', "rules[0].conditions[0].suffix: must be a non-empty string"),
    (CONDITION + 'claim = "d"\nexists = false', "rules[0].conditions[0].exists: must be true (a condition cannot require a claim's absence)"),
    (CONDITION + 'claim = "d"\nexists = "yes"', "rules[0].conditions[0].exists: must be true (a condition cannot require a claim's absence)"),
    (CONDITION + 'claim = "d"\nregex = ""', "rules[0].conditions[0].regex: must be a non-empty string"),
    (CONDITION + "claim = \"d\"\nregex = '(a'", "rules[0].conditions[0].regex: invalid RE2 pattern: missing ): (a"),
    (CONDITION + "claim = \"d\"\nregex = '(a)\\1'", "rules[0].conditions[0].regex: invalid RE2 pattern: invalid escape sequence: \\1"),
    (CONDITION + "claim = \"d\"\nregex = '(?=a)b'", "rules[0].conditions[0].regex: invalid RE2 pattern: invalid perl operator: (?="),
    (CONDITION + 'claim = "d"\nexists = true\ntypes = []', "rules[0].conditions[0].types: must be a non-empty array of non-empty strings"),
    (CONDITION + 'claim = "d"\nexists = true\nissuers = "x"', "rules[0].conditions[0].issuers: must be a non-empty array of non-empty strings"),
    (CONDITION + 'claim = "d"\nexists = true\nhint = 5', "rules[0].conditions[0].hint: must be a non-empty string"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "error"), FILE_ERRORS)
def test_rule_file_errors(text: str, error: str) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_rules(text, "policies.toml")
    assert raised.value.errors == [error]
    assert str(raised.value) == error
    assert raised.value.source == "policies.toml"


def test_one_rule_table_is_checked_as_the_file_checks_it() -> None:
    """`parse_rule_table` (owners' rules) says what the file's reader says of the same table."""
    checked = 0
    for text, error in FILE_ERRORS:
        if not error.startswith("rules[0]"):
            continue
        try:
            table = tomllib.loads(text)["rules"][0]
        except (tomllib.TOMLDecodeError, KeyError, TypeError):
            continue
        with pytest.raises(PolicyError) as raised:
            parse_rule_table(table, "rules[0]")
        assert raised.value.errors == [error]
        checked += 1
    assert checked > 30


def test_a_file_may_not_use_the_ids_of_owners_rules() -> None:
    with pytest.raises(PolicyError) as raised:
        parse_rules(rule("o-mine"))
    assert raised.value.errors == [
        "rules[0].id: ids starting with 'o-' are kept for owners' own rules (made on their policy"
        " pages); choose another id than 'o-mine'"
    ]
    # An owner's rule has one.
    assert parse_rule_table(tomllib.loads(rule("o-mine"))["rules"][0]).id == "o-mine"


@pytest.mark.parametrize(
    "text",
    [
        rule("a"),
        rule(
            "b", f'{DOCTOR}\ntypes = ["{EMPLOYEE}", "a"]\nhint = "Role"', scopes=["print", "view"]
        ),
        BASE + 'description = "mine"\n[rules.resource_sets]\nids = ["s2", "s1"]\ntypes = ["t"]\n'
        '[[rules.conditions]]\nclaim = "n"\none_of = [1, "1", {a = [true]}]\nissuers = ["i"]\n'
        '[[rules.conditions]]\nclaim = "e"\nexists = true\n'
        "[[rules.conditions]]\nclaim = \"r\"\nregex = 'a.*'\n",
        BASE + 'clients = ["c2", "c1"]\n[[rules.conditions]]\nclaim = "roles"\n'
        'contains_any = ["a", 1]\ntypes = ["urn:umaserver:claim-type:account"]\n',
    ],
)
def test_a_rule_table_reads_back_as_the_same_rule(text: str) -> None:
    table = tomllib.loads(text)["rules"][0]
    read = parse_rule_table(table)
    assert parse_rule_table(rule_table(read)) == read
    assert parse_rule_table(json.loads(json.dumps(rule_table(read)))) == read
    again = rule_table(read)
    assert again == rule_table(parse_rule_table(again))


def test_every_error_is_reported_at_once() -> None:
    text = (
        '[[rules]]\nid = "a"\nscopes = []\ncolour = 1\n'
        '[[rules.conditions]]\nclaim = "role"\nstarts_with = "d"\n'
        '[[rules.conditions]]\nclaim = "x"\nregex = "("\n' + rule("a", "claim = 7\nexists = true")
    )
    with pytest.raises(PolicyError) as raised:
        parse_rules(text)
    expected = [
        "rules[0]: unknown key 'colour'",
        "rules[0]: missing 'owner'",
        "rules[0].scopes: must be a non-empty array of non-empty strings",
        "rules[0].conditions[0]: unknown operator 'starts_with'",
        "rules[0].conditions[1].regex: invalid RE2 pattern: missing ): (",
        "rules[1].conditions[0].claim: must be a non-empty string",
        "rules[1].id: duplicate id 'a'",
    ]
    assert raised.value.errors == expected
    assert str(raised.value) == "\n".join(expected)


def test_an_empty_file_has_no_rules() -> None:
    assert parse_rules("").rules == ()
    assert parse_rules("rules = []").rules == ()


def test_rules_keep_file_order_and_values() -> None:
    rules = parse_rules(
        rule("b", owner="bob")
        + rule("a", f'{DOCTOR}\ntypes = ["{EMPLOYEE}"]\nhint = "Role"', scopes=["view", "print"])
    )
    assert [r.id for r in rules.rules] == ["b", "a"]
    (alices,) = rules.rules_for("alice")
    assert alices.scopes == ("view", "print")
    (condition,) = alices.conditions
    assert (condition.claim, condition.operator, condition.operand) == (
        "role",
        "contains",
        "doctor",
    )
    assert condition.types == frozenset({EMPLOYEE}) and condition.issuers is None
    assert condition.hint == "Role"


# -- loading the file ---------------------------------------------------------------------------


def test_load_rules(tmp_path: Path) -> None:
    assert load_rules(tmp_path / "missing.toml").rules == ()
    good = tmp_path / "good.toml"
    good.write_text(rule("r"), encoding="utf-8")
    assert [r.id for r in load_rules(good).rules] == ["r"]
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff" + rule("r").encode())
    with pytest.raises(PolicyError, match=r"^byte 0: not UTF-8 text$") as raised:
        load_rules(binary)
    assert raised.value.source == str(binary)
    with pytest.raises(PolicyError, match=r"^cannot read the file: Is a directory$"):
        load_rules(tmp_path)


def test_the_example_file_is_valid_and_shows_every_feature() -> None:
    rules = load_rules(EXAMPLE_FILE)
    assert rules.rules and all(r.owner == "alice" for r in rules.rules)
    operators = {c.operator for r in rules.rules for c in r.conditions}
    assert operators == set(OPERATORS)
    raw = tomllib.loads(EXAMPLE_FILE.read_text(encoding="utf-8"))["rules"]
    selectors = {key for entry in raw for key in entry.get("resource_sets", {})}
    assert selectors == {"all", "ids", "types", "names"}
    conditions = [c for r in rules.rules for c in r.conditions]
    assert any(c.issuers for c in conditions) and any(c.hint for c in conditions)
    assert any(not r.conditions for r in rules.rules)

    # What `make run` demonstrates: a photo set of alice's, a doctor's custom pushed claim grants
    # view and print; a colleague's e-mail in OIDC claims grants view.
    photo = ResourceSetRef("rs-1", "Holiday", PHOTO)
    can_supply = frozenset({(EMPLOYEE, CLIENT), (OIDC, CLIENT)})

    def outcome(claims: list[Claim], scopes: list[str]) -> str:
        return decide(
            rules,
            owner="alice",
            resource_set=photo,
            scopes=scopes,
            claims=claims,
            can_supply=can_supply,
        ).outcome

    assert outcome([IS_DOCTOR], ["view", "print"]) == "grant"
    assert outcome([IS_COLLEAGUE], ["view"]) == "grant"
    assert outcome([], ["view"]) == "need_claims"


# -- the store that reloads the file ------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RuleFile:
    """Writes the rule file the way a careful editor does (new file, renamed over the old one),
    each time with a newer mtime, so every change is visible however coarse the file system's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mtime_ns = 1_700_000_000 * 10**9

    def write(self, text: str) -> None:
        self.mtime_ns += 10**9
        staged = self.path.with_suffix(".new")
        staged.write_text(text, encoding="utf-8")
        os.utime(staged, ns=(self.mtime_ns, self.mtime_ns))
        staged.replace(self.path)


def ids(store: PolicyStore) -> list[str]:
    return [r.id for r in store.rules.rules]


@pytest.fixture
def rule_file(tmp_path: Path) -> RuleFile:
    found = RuleFile(tmp_path / "policies.toml")
    found.write(rule("first"))
    return found


@pytest.fixture
def watched() -> Iterator[Callable[[PolicyStore], PolicyStore]]:
    """Starts a store's thread, and stops it when the test ends."""
    started: list[PolicyStore] = []

    def start(store: PolicyStore) -> PolicyStore:
        store.start()
        started.append(store)
        return store

    yield start
    for store in started:
        store.stop()


Watch = Callable[[PolicyStore], PolicyStore]


def idle(seconds: float = 0.3) -> None:
    """Lets the store's thread run a few of its ticks (it reads the clock every 0.1 s at most)."""
    threading.Event().wait(seconds)


def test_store_reloads_a_changed_file_after_the_interval(
    rule_file: RuleFile, watched: Watch
) -> None:
    clock = Clock()
    store = watched(PolicyStore(rule_file.path, check_interval=1.0, clock=clock))
    assert ids(store) == ["first"]
    rule_file.write(rule("second") + rule("third"))
    clock.now += 0.5
    idle()
    assert ids(store) == ["first"]  # not looked at again yet
    clock.now += 0.5
    wait_until(lambda: ids(store) == ["second", "third"])


def test_store_keeps_the_old_rules_when_the_file_breaks(
    rule_file: RuleFile, watched: Watch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    store = watched(PolicyStore(rule_file.path, clock=clock))
    before = store.rules
    rule_file.write(rule("second") + 'colour = "red"\n')

    def about_this_file() -> list[logging.LogRecord]:
        # Only this store's lines: the watchers of apps from earlier tests may still be running
        # until they are collected, and log about their own files.
        return [r for r in caplog.records if str(rule_file.path) in r.getMessage()]

    with caplog.at_level(logging.INFO, logger="umaserver.policy"):
        clock.now += 1
        wait_until(about_this_file)
        assert store.rules is before
        clock.now += 1
        idle()
        assert store.rules is before  # not parsed again until the file changes
    (record,) = about_this_file()
    assert record.levelno == logging.ERROR and record.name == "umaserver.policy"
    assert record.getMessage() == (
        f"rule file {rule_file.path} is broken; keeping the rules loaded before:\n"
        "rules[0]: unknown key 'colour'"
    )
    rule_file.write(rule("fixed"))
    clock.now += 1
    wait_until(lambda: ids(store) == ["fixed"])


def test_store_has_no_rules_while_the_file_is_gone(
    rule_file: RuleFile, watched: Watch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    store = watched(PolicyStore(rule_file.path, clock=clock))
    rule_file.path.unlink()
    with caplog.at_level(logging.WARNING, logger="umaserver.policy"):
        clock.now += 1
        wait_until(lambda: store.rules.rules == ())
        wait_until(lambda: "is gone" in caplog.text)
    rule_file.write(rule("back"))
    clock.now += 1
    wait_until(lambda: ids(store) == ["back"])


def test_store_starts_without_a_file_and_refuses_a_broken_one(
    tmp_path: Path, watched: Watch
) -> None:
    clock = Clock()
    store = watched(PolicyStore(tmp_path / "policies.toml", clock=clock))
    assert store.rules.rules == ()
    RuleFile(tmp_path / "policies.toml").write(rule("new"))
    clock.now += 1
    wait_until(lambda: ids(store) == ["new"])
    broken = RuleFile(tmp_path / "broken.toml")
    broken.write("rules = [")
    with pytest.raises(PolicyError, match="invalid TOML"):
        PolicyStore(broken.path)


def test_store_notices_a_change_within_two_seconds(rule_file: RuleFile, watched: Watch) -> None:
    store = watched(PolicyStore(rule_file.path))  # the defaults: a real clock, one check a second
    rule_file.write(rule("changed"))
    wait_until(lambda: ids(store) == ["changed"], timeout=2)


def test_without_its_thread_the_store_never_reads_the_file(rule_file: RuleFile) -> None:
    clock = Clock()
    store = PolicyStore(rule_file.path, clock=clock)
    rule_file.write(rule("second"))
    clock.now += 5
    assert ids(store) == ["first"]  # reading the rules never looks at the file
    store.check()  # the thread's one step
    assert ids(store) == ["second"]


def test_readers_do_not_wait_for_a_reload_in_progress(rule_file: RuleFile, watched: Watch) -> None:
    clock = Clock()
    store = watched(PolicyStore(rule_file.path, clock=clock))
    rule_file.write(rule("second"))
    answers: list[RuleSet] = []
    with store._lock:  # the thread is checking the file (here: blocked in it)
        clock.now += 1
        reader = threading.Thread(target=lambda: answers.append(store.rules))
        reader.start()
        reader.join(timeout=5)
        assert [r.id for r in answers[0].rules] == ["first"]
    wait_until(lambda: ids(store) == ["second"])


def test_store_readers_from_many_threads_see_whole_rule_sets(
    rule_file: RuleFile, watched: Watch
) -> None:
    store = watched(PolicyStore(rule_file.path, check_interval=0))
    seen: set[tuple[str, ...]] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.add(tuple(r.id for r in store.rules.rules))

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    for n in range(20):
        rule_file.write(rule(f"a{n}") + rule(f"b{n}"))
        idle(0.01)
    wait_until(lambda: ids(store) == ["a19", "b19"])
    stop.set()
    for reader in readers:
        reader.join()
    assert all(
        entry == ("first",) or entry == (f"a{entry[0][1:]}", f"b{entry[0][1:]}") for entry in seen
    )
    assert ids(store) == ["a19", "b19"]


# -- evidence speaks of one person (issue 9, item 1) ---------------------------------------------

OTHER_IDP = "https://other-idp.example.com"
ONE_PERSON = rule(
    "one-person",
    f'claim = "email"\nsuffix = "@example.com"\nissuers = ["{IDP}"]',
    f'claim = "department"\nequals = "research"\nissuers = ["{IDP}"]',
)


def about(subject: str | None, name: str, value: Any, issuer: str = IDP) -> Claim:
    return replace(claim(name, value, OIDC, issuer), subject=subject)


@pytest.mark.parametrize(
    ("claims", "outcome"),
    [
        ([about("bob", "email", "b@example.com"), about("bob", "department", "research")], "grant"),
        (
            [about("bob", "email", "b@example.com"), about("eve", "department", "research")],
            "need_claims",
        ),
        (  # a claim of no subject (gathered before subjects were kept) is another person too
            [about("bob", "email", "b@example.com"), about(None, "department", "research")],
            "need_claims",
        ),
        (  # several people, one of whom has it all
            [
                about("bob", "email", "b@example.com"),
                about("eve", "department", "research"),
                about("eve", "email", "e@example.com"),
            ],
            "grant",
        ),
        (  # a failing value of one person does not make another's final
            [about("bob", "email", "b@other.test"), about("eve", "email", "e@example.com")],
            "need_claims",
        ),
    ],
    ids=["one-person", "two-people", "one-without-subject", "one-of-two-has-all", "reachable"],
)
def test_conditions_naming_one_issuer_hold_on_one_subject(
    claims: list[Claim], outcome: str
) -> None:
    decision = ask(ONE_PERSON, claims)
    assert decision.outcome == outcome, reasons(decision)


def test_subjects_of_different_issuers_or_of_unnamed_ones_do_not_matter() -> None:
    text = rule(
        "two-sources",
        f'claim = "email"\nsuffix = "@example.com"\nissuers = ["{IDP}"]',
        f'claim = "department"\nequals = "research"\nissuers = ["{OTHER_IDP}"]',
    )
    claims = [
        about("bob", "email", "b@example.com"),
        about("bob@other", "department", "research", issuer=OTHER_IDP),
        about("eve", "department", "sales", issuer="https://unnamed.example"),
    ]
    assert ask(text, claims, can_supply=SUPPLY | {(OIDC, OTHER_IDP)}).outcome == "grant"


def test_stopping_ends_the_thread(rule_file: RuleFile) -> None:
    store = PolicyStore(rule_file.path, check_interval=0)
    store.start()
    thread = store._thread
    store.stop()
    assert thread is not None and not thread.is_alive()
    rule_file.write(rule("after"))
    idle(0.1)
    assert ids(store) == ["first"]


_WORDS = st.sampled_from(["a", "b", "c"])
_SELECTORS = st.one_of(
    st.just(ResourceSetSelector()),
    st.builds(
        lambda ids, types, names: ResourceSetSelector(
            everything=False, ids=frozenset(ids), types=frozenset(types), names=frozenset(names)
        ),
        st.sets(_WORDS),
        st.sets(_WORDS),
        st.sets(_WORDS),
    ),
)


@given(
    selectors=st.lists(st.tuples(st.sampled_from(["alice", "bob"]), _SELECTORS), max_size=12),
    asked=st.builds(ResourceSetRef, _WORDS, _WORDS, st.one_of(st.none(), _WORDS)),
)
def test_the_coverage_index_finds_exactly_the_rules_that_cover_a_set(
    selectors: list[tuple[str, ResourceSetSelector]], asked: ResourceSetRef
) -> None:
    rules = RuleSet(
        Rule(f"r{n}", owner, ("view",), selector) for n, (owner, selector) in enumerate(selectors)
    )
    for owner in ("alice", "bob", "carol"):
        owned = rules.rules_for(owner)
        expected = [i for i, rule in enumerate(owned) if rule.resource_sets.covers(asked)]
        assert rules.covering(owner, asked) == expected


def test_a_rule_set_says_whether_an_owner_reads_a_claim_type() -> None:
    rules = parse_rules(
        """
[[rules]]
id = "typed"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
equals = "doctor"
types = ["urn:example:employee"]

[[rules]]
id = "any-type"
owner = "bob"
scopes = ["view"]
[[rules.conditions]]
claim = "email"
suffix = "@example.com"

[[rules]]
id = "no-conditions"
owner = "carol"
scopes = ["view"]
"""
    )
    account = "urn:umaserver:claim-type:account"
    assert not rules.reads_type("alice", account)
    assert rules.reads_type("alice", "urn:example:employee")
    assert rules.reads_type("bob", account)  # a condition naming no types accepts any
    assert not rules.reads_type("carol", account) and not rules.reads_type("dave", account)
    assert rules.reads_type("alice", "urn:example:employee")  # asked again: the same answer

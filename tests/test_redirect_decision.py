"""The rule engine and the redirect profile (issue 11): claims this server gathers from the
requesting party who signs in here, which entry need_claims offers (pushed claims first, else one
redirect), whose word an entry asks for (`issuers`), and refusing a pushed redirect claim object.
No Flask, no database."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from umaserver.claims.model import REDIRECT_TYPE, ClaimsError, read_claim_objects, suppliable
from umaserver.claims.oidc_issuers import OidcIssuer
from umaserver.policy.decision import Decision, NeededClaim, RedirectNeed, decide, redirect_label
from umaserver.policy.rule_file import parse_rules
from umaserver.services.decision import (
    gatherable,
    redirect_claims_of_user,
    sign_in_providers,
)
from umaserver.storage.records import Claim, User

from .test_policy_engine import (
    CLIENT,
    COLLEAGUE,
    DOCTOR,
    EMPLOYEE,
    IDP,
    OIDC,
    SAML,
    XRAY,
    reasons,
    rule,
)

AS = "https://as.example"  # this server's issuer: a local user's attributes
OP = "https://op.example"  # a sign-in provider this server is a relying party of
OTHER_IDP = "https://other-idp.example"
REDIRECT = REDIRECT_TYPE
# What a client registered for the employee type can push.
PUSH = frozenset({(EMPLOYEE, CLIENT)})
# What this server can gather by redirecting a requesting party with a person behind the AAT.
GATHER = frozenset({(REDIRECT, AS), (REDIRECT, OP)})

BY_REDIRECT = f'types = ["{REDIRECT}"]'
PUSHED = f'types = ["{EMPLOYEE}"]'
DOCTOR_PUSHED = f"{DOCTOR}\n{PUSHED}"
COLLEAGUE_GATHERED = f"{COLLEAGUE}\n{BY_REDIRECT}"
BADGE_PUSHED = f'claim = "badge"\nexists = true\n{PUSHED}'


def ask(
    text: str,
    claims: Iterable[Claim] = (),
    can_supply: Iterable[tuple[str, str]] = PUSH,
    can_gather: Iterable[tuple[str, str]] = GATHER,
    scopes: Sequence[str] = ("view",),
) -> Decision:
    return decide(
        parse_rules(text),
        owner="alice",
        resource_set=XRAY,
        scopes=scopes,
        claims=list(claims),
        can_supply=frozenset(can_supply),
        can_gather=frozenset(can_gather),
    )


def pushed(name: str, value: Any) -> Claim:
    return Claim(EMPLOYEE, name, value, CLIENT, CLIENT, 1_700_000_000)


def shared(name: str, value: Any, issuer: str = AS, subject: str = "sub-bob") -> Claim:
    """A claim this server gathered from the requesting party who signed in here."""
    return Claim(REDIRECT, name, value, issuer, CLIENT, 1_700_000_000, subject)


def entries(decision: Decision) -> list[dict[str, Any]]:
    return [needed.as_dict() for needed in decision.need_claims]


# -- which entry: the nearest rule, pushed claims first, else one redirect -------------------------


@pytest.mark.parametrize(
    ("text", "claims", "can_gather", "outcome", "rule_ids", "needed", "redirect"),
    [
        pytest.param(
            rule("r", COLLEAGUE_GATHERED),
            [],
            GATHER,
            "need_claims",
            ("r",),
            [],
            RedirectNeed(("r",), ("email",), (AS, OP)),
            id="redirect-only-rule",
        ),
        pytest.param(
            rule("r", f'{COLLEAGUE_GATHERED}\nissuers = ["{OP}"]'),
            [],
            GATHER,
            "need_claims",
            ("r",),
            [],
            RedirectNeed(("r",), ("email",), (OP,)),
            id="redirect-from-one-provider",
        ),
        pytest.param(
            rule("r", COLLEAGUE_GATHERED),
            [],
            frozenset(),
            "deny",
            (),
            [],
            None,
            id="client-credentials-no-person",
        ),
        pytest.param(
            rule("r", f'{COLLEAGUE_GATHERED}\nissuers = ["{OTHER_IDP}"]'),
            [],
            GATHER,
            "deny",
            (),
            [],
            None,
            id="an-issuer-this-server-cannot-gather-from",
        ),
        pytest.param(
            rule("gathered", COLLEAGUE_GATHERED) + rule("pushed", DOCTOR_PUSHED),
            [],
            GATHER,
            "need_claims",
            ("pushed",),
            [(EMPLOYEE, "role")],
            None,
            id="tie-goes-to-the-rule-satisfied-by-pushing",
        ),
        pytest.param(
            rule("pushed", DOCTOR_PUSHED, BADGE_PUSHED) + rule("gathered", COLLEAGUE_GATHERED),
            [],
            GATHER,
            "need_claims",
            ("gathered",),
            [],
            RedirectNeed(("gathered",), ("email",), (AS, OP)),
            id="fewer-missing-wins-over-pushing",
        ),
        pytest.param(
            rule("r", DOCTOR_PUSHED, COLLEAGUE_GATHERED),
            [],
            GATHER,
            "need_claims",
            ("r",),
            [(EMPLOYEE, "role")],
            None,
            id="push-first",
        ),
        pytest.param(
            rule("r", DOCTOR_PUSHED, COLLEAGUE_GATHERED),
            [pushed("role", ["doctor"])],
            GATHER,
            "need_claims",
            ("r",),
            [],
            RedirectNeed(("r",), ("email",), (AS, OP)),
            id="then-redirect",
        ),
        pytest.param(
            rule("r", DOCTOR_PUSHED, COLLEAGUE_GATHERED),
            [pushed("role", ["doctor"]), shared("email", "bob@example.com")],
            GATHER,
            "grant",
            ("r",),
            [],
            None,
            id="then-grant",
        ),
        pytest.param(
            rule("r", DOCTOR_PUSHED, COLLEAGUE_GATHERED),
            [pushed("role", ["doctor"]), shared("email", "bob@elsewhere.org")],
            GATHER,
            "deny",
            (),
            [],
            None,
            id="a-shared-value-that-fails-is-final",
        ),
        pytest.param(
            # No types: pushed or gathered; the client can push it, so it is asked for.
            rule("r", COLLEAGUE),
            [],
            GATHER,
            "need_claims",
            ("r",),
            [(EMPLOYEE, "email")],
            None,
            id="pushable-and-gatherable-is-pushed",
        ),
        pytest.param(
            # Two redirect conditions and one ticket: one redirect for both.
            rule("r", COLLEAGUE_GATHERED, f'{DOCTOR}\n{BY_REDIRECT}\nissuers = ["{AS}"]'),
            [],
            GATHER,
            "need_claims",
            ("r",),
            [],
            RedirectNeed(("r",), ("email", "role"), (AS, OP)),
            id="one-redirect-for-several-claims",
        ),
    ],
)
def test_which_entry(
    text: str,
    claims: list[Claim],
    can_gather: frozenset[tuple[str, str]],
    outcome: str,
    rule_ids: tuple[str, ...],
    needed: list[tuple[str, str]],
    redirect: RedirectNeed | None,
) -> None:
    decision = ask(text, claims, can_gather=can_gather)
    assert (decision.outcome, decision.rule_ids) == (outcome, rule_ids), reasons(decision)
    assert [(entry.type, entry.name) for entry in decision.need_claims] == needed
    assert decision.redirect == redirect
    if redirect is not None:  # never mixed with other entries
        assert decision.need_claims == ()


def test_several_scopes_pushed_claims_first_then_one_redirect_for_the_rest() -> None:
    # view needs a pushed role (rule "pushed"), print an email shared by signing in ("gathered").
    text = rule("pushed", DOCTOR_PUSHED) + rule("gathered", COLLEAGUE_GATHERED, scopes=["print"])
    scopes = ["view", "print"]
    first = ask(text, scopes=scopes)
    assert (first.outcome, first.rule_ids, first.redirect) == (
        "need_claims",
        ("pushed", "gathered"),
        None,
    )
    assert [(e.type, e.name) for e in first.need_claims] == [(EMPLOYEE, "role")]
    assert first.summary == (
        "Rule 'pushed' could grant 'view' and rule 'gathered' could grant 'print' on resource set"
        " 'X-ray' with 1 more claim: 'role'; then the requesting party can share 'email' by"
        " signing in here."
    )
    # Nothing pushable left: one redirect, for the rule of what is left.
    then = ask(text, [pushed("role", ["doctor"])], scopes=scopes)
    assert (then.outcome, then.rule_ids, then.need_claims) == ("need_claims", ("gathered",), ())
    assert then.redirect == RedirectNeed(("gathered",), ("email",), (AS, OP))
    shared_email = shared("email", "bob@example.com")
    assert ask(text, [pushed("role", ["doctor"]), shared_email], scopes=scopes).outcome == "grant"


def test_several_scopes_gathered_by_redirect_share_one_redirect() -> None:
    text = rule("colleagues", COLLEAGUE_GATHERED) + rule(
        "doctors", f'{DOCTOR}\n{BY_REDIRECT}\nissuers = ["{AS}"]', scopes=["print"]
    )
    decision = ask(text, scopes=["view", "print"])
    assert (decision.outcome, decision.need_claims) == ("need_claims", ())
    assert decision.redirect == RedirectNeed(("colleagues", "doctors"), ("email", "role"), (AS, OP))
    assert decision.as_dict()["redirect_required"] == {
        "rules": ["colleagues", "doctors"],
        "claims": ["email", "role"],
        "issuers": [AS, OP],
    }


def test_a_client_that_cannot_push_what_the_rule_accepts_is_offered_a_redirect() -> None:
    text = rule("r", f'{DOCTOR}\ntypes = ["{EMPLOYEE}", "{REDIRECT}"]')
    assert [(e.type, e.name) for e in ask(text).need_claims] == [(EMPLOYEE, "role")]
    other = [("urn:other", CLIENT)]
    assert ask(text, can_supply=other).redirect == RedirectNeed(("r",), ("role",), (AS, OP))
    assert ask(text, can_supply=other, can_gather=()).outcome == "deny"


# -- redirect claims satisfy only conditions accepting claim-client-redirect-1.0 -------------------


@pytest.mark.parametrize(
    ("condition", "claim", "holds"),
    [
        (f"{DOCTOR}\n{BY_REDIRECT}", shared("role", ["doctor"]), True),
        (DOCTOR, shared("role", ["doctor"]), True),  # any type accepted
        (f'{DOCTOR}\ntypes = ["urn:custom"]', shared("role", ["doctor"]), False),
        (DOCTOR_PUSHED, shared("role", ["doctor"]), False),
        (f"{DOCTOR}\n{BY_REDIRECT}", pushed("role", ["doctor"]), False),
        (f'{DOCTOR}\n{BY_REDIRECT}\nissuers = ["{AS}"]', shared("role", ["doctor"]), True),
        (f'{DOCTOR}\n{BY_REDIRECT}\nissuers = ["{OP}"]', shared("role", ["doctor"]), False),
        (f'{DOCTOR}\n{BY_REDIRECT}\nissuers = ["{OP}"]', shared("role", ["doctor"], OP), True),
        (f'{DOCTOR}\nissuers = ["{AS}"]', shared("role", ["doctor"]), True),
    ],
)
def test_redirect_claims_satisfy_only_conditions_accepting_them(
    condition: str, claim: Claim, holds: bool
) -> None:
    decision = ask(rule("r", condition), [claim])
    assert decision.explain()[0].holds is holds
    assert (decision.outcome == "grant") is holds


def test_a_custom_condition_is_not_satisfied_by_a_shared_claim_of_its_name() -> None:
    decision = ask(
        rule("r", f'{DOCTOR}\ntypes = ["urn:custom"]'),
        [shared("role", ["doctor"])],
        can_supply=[("urn:custom", CLIENT)],
    )
    assert decision.outcome == "need_claims" and decision.redirect is None
    assert entries(decision) == [
        {"type": "urn:custom", "name": "role", "value": "a value for 'role'"}
    ]
    assert reasons(decision)["r"] == [
        "condition 1 on 'role' failed: a claim 'role' was given, but not from an accepted source"
        " (accepted types ['urn:custom']); this client can supply one"
    ]


# -- the explanation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "claims", "can_supply", "reason"),
    [
        (
            COLLEAGUE_GATHERED,
            [],
            PUSH,
            f"condition 1 on 'email' failed: no claim 'email' was given (accepted types ['{REDIRECT}']);"
            " this client cannot supply one; the requesting party can share one by signing in here",
        ),
        (
            COLLEAGUE,
            [],
            PUSH,
            "condition 1 on 'email' failed: no claim 'email' was given (any type and issuer"
            " accepted); this client can supply one; the requesting party can also share one by"
            " signing in here",
        ),
        (
            COLLEAGUE_GATHERED,
            [shared("email", "bob@example.com")],
            PUSH,
            "condition 1 on 'email' holds: an accepted claim ends with '@example.com' (shared by"
            " the requesting party on signing in here)",
        ),
        (
            COLLEAGUE_GATHERED,
            [shared("email", "bob@elsewhere.org")],
            PUSH,
            "condition 1 on 'email' failed: no accepted claim ends with '@example.com' (the claims"
            " the requesting party shared on signing in here included)",
        ),
        (
            COLLEAGUE,
            [pushed("email", "bob@example.com")],
            PUSH,
            "condition 1 on 'email' holds: an accepted claim ends with '@example.com'",
        ),
    ],
)
def test_the_explanation_says_what_signing_in_here_gives(
    condition: str, claims: list[Claim], can_supply: frozenset[tuple[str, str]], reason: str
) -> None:
    decision = ask(rule("r", condition), claims, can_supply)
    assert reasons(decision)["r"][0] == reason


def test_a_redirect_decision_as_dict_and_summary() -> None:
    decision = ask(rule("r", COLLEAGUE_GATHERED))
    assert decision.summary == (
        "Rule 'r' could grant 'view' on resource set 'X-ray' with 1 more claim this client cannot"
        f" supply: 'email'; the requesting party can share it by signing in here (accepted issuers"
        f" ['{AS}', '{OP}'])."
    )
    answer = decision.as_dict()
    assert list(answer) == [
        "decision",
        "rules",
        "need_claims",
        "redirect_required",
        "explanation",
        "summary",
    ]
    assert answer["need_claims"] == []
    assert answer["redirect_required"] == {"rules": ["r"], "claims": ["email"], "issuers": [AS, OP]}


def test_a_push_first_summary_says_a_redirect_follows() -> None:
    decision = ask(rule("r", DOCTOR_PUSHED, COLLEAGUE_GATHERED))
    assert decision.summary == (
        "Rule 'r' could grant 'view' on resource set 'X-ray' with 1 more claim: 'role'; then the"
        " requesting party can share 'email' by signing in here."
    )
    assert "redirect_required" not in decision.as_dict()


# -- the label of a redirect_required entry --------------------------------------------------------


@pytest.mark.parametrize(
    ("need", "label"),
    [
        (RedirectNeed(("r",), ("email",), (AS,)), "Sign in to share your 'email'"),
        (
            RedirectNeed(("r",), ("email", "role"), (AS, OP)),
            "Sign in to share your 'email' and 'role'",
        ),
        (
            RedirectNeed(("r", "s"), ("a", "b", "c"), ("https://a.example", OP)),
            "Sign in to share your 'a', 'b' and 'c'",
        ),
    ],
)
def test_redirect_label_names_the_claims_never_where_to_sign_in(
    need: RedirectNeed, label: str
) -> None:
    # The spec keeps the choice of claims source from the client: the label names no issuer.
    assert redirect_label(need) == label


# -- need_claims says whose word is wanted (issuers) ------------------------------------------------


SUPPLY_VERIFIED = frozenset(
    {(EMPLOYEE, CLIENT), (OIDC, CLIENT), (OIDC, IDP), (OIDC, OTHER_IDP), (SAML, IDP)}
)


@pytest.mark.parametrize(
    ("condition", "entry"),
    [
        (
            f'{COLLEAGUE}\ntypes = ["{OIDC}"]\nissuers = ["{IDP}"]',
            {
                "type": OIDC,
                "name": "email",
                "value": f"a value for 'email' vouched for by {IDP}",
                "issuers": [IDP],
            },
        ),
        (
            f'{COLLEAGUE}\ntypes = ["{OIDC}"]\nissuers = ["{OTHER_IDP}", "{IDP}", "{AS}"]',
            {
                "type": OIDC,
                "name": "email",
                "value": f"a value for 'email' vouched for by {IDP} or {OTHER_IDP}",
                "issuers": [IDP, OTHER_IDP],
            },
        ),
        (
            f'{COLLEAGUE}\ntypes = ["{SAML}"]\nissuers = ["{IDP}"]\nhint = "Your work e-mail"',
            {"type": SAML, "name": "email", "value": "Your work e-mail", "issuers": [IDP]},
        ),
        (  # a verified type, no issuer demanded: anyone's word, as today
            f'{COLLEAGUE}\ntypes = ["{OIDC}"]',
            {"type": OIDC, "name": "email", "value": "a value for 'email'"},
        ),
        (  # a plain type naming the client as issuer: the client's own word, as today
            f'{COLLEAGUE}\ntypes = ["{EMPLOYEE}"]\nissuers = ["{CLIENT}"]',
            {"type": EMPLOYEE, "name": "email", "value": "a value for 'email'"},
        ),
    ],
)
def test_an_entry_names_the_issuers_whose_word_is_wanted(
    condition: str, entry: dict[str, Any]
) -> None:
    decision = ask(rule("r", condition), can_supply=SUPPLY_VERIFIED)
    assert entries(decision) == [entry]
    assert "issuers" not in entry or all(isinstance(i, str) for i in entry["issuers"])


def test_two_conditions_on_one_verified_claim_ask_for_an_issuer_both_accept() -> None:
    text = rule(
        "r",
        f'{COLLEAGUE}\ntypes = ["{OIDC}"]\nissuers = ["{IDP}", "{OTHER_IDP}"]',
        f'claim = "email"\nprefix = "dr."\ntypes = ["{OIDC}"]\nissuers = ["{OTHER_IDP}"]',
    )
    assert entries(ask(text, can_supply=SUPPLY_VERIFIED)) == [
        {
            "type": OIDC,
            "name": "email",
            "value": f"a value for 'email' vouched for by {OTHER_IDP}",
            "issuers": [OTHER_IDP],
        }
    ]


def test_needed_claim_as_dict_has_issuers_only_when_some() -> None:
    assert NeededClaim("t", "n", "v").as_dict() == {"type": "t", "name": "n", "value": "v"}
    assert NeededClaim("t", "n", "v", ("a", "b")).as_dict() == {
        "type": "t",
        "name": "n",
        "value": "v",
        "issuers": ["a", "b"],
    }


@pytest.mark.parametrize(
    "condition",
    [
        f'claim = "level"\none_of = ["secret-7", "secret-8"]\ntypes = ["{OIDC}"]\nissuers = ["{IDP}"]',
        f"claim = \"staff_id\"\nregex = 'secret-[0-9]+'\n{BY_REDIRECT}",
        f'claim = "unit"\nequals = "secret-ward"\nissuers = ["{AS}"]',
        f'claim = "unit"\nsuffix = "secret-ward"\n{BY_REDIRECT}\nissuers = ["{OP}"]',
    ],
)
def test_hints_labels_and_summaries_never_reveal_the_value(condition: str) -> None:
    decision = ask(rule("r", condition), can_supply=SUPPLY_VERIFIED)
    assert decision.outcome == "need_claims"
    shown = json.dumps(entries(decision)) + decision.summary
    if decision.redirect is not None:
        shown += redirect_label(decision.redirect) + json.dumps(decision.redirect.as_dict())
    assert "secret" not in shown


# -- pushing claim-client-redirect-1.0 --------------------------------------------------------------


@pytest.mark.parametrize("push_types", [(EMPLOYEE,), (EMPLOYEE, REDIRECT)])
def test_pushing_a_redirect_claim_object_is_refused(push_types: tuple[str, ...]) -> None:
    objects = [
        {"type": EMPLOYEE, "value": {"role": ["doctor"]}},
        {"type": REDIRECT, "value": {"scope": "x"}},
    ]
    with pytest.raises(ClaimsError) as raised:
        read_claim_objects(objects, CLIENT, push_types, verifiers=None, now=1)  # type: ignore[arg-type]
    assert raised.value.description == (
        f"claims[1]: claims of type {REDIRECT} are not pushed: redirect the requesting party to"
        " the requesting_party_claims_endpoint instead, with the redirect_required entry's value"
        " as scope"
    )


# -- the service's helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("providers", "has_person", "pairs"),
    [
        ((), True, {(REDIRECT, AS)}),
        ((OP, AS), True, {(REDIRECT, AS), (REDIRECT, OP)}),
        ((OP,), False, set()),
    ],
)
def test_gatherable(providers: tuple[str, ...], has_person: bool, pairs: set[Any]) -> None:
    assert gatherable(AS, providers, has_person) == frozenset(pairs)


def test_a_local_users_attributes_as_redirect_claims() -> None:
    user = User("sub-bob", "bob", None, {"email": "bob@example.com", "role": ["doctor"]})
    claims = redirect_claims_of_user(user, AS, CLIENT, 1_700_000_123)
    assert claims == (
        Claim(REDIRECT, "email", "bob@example.com", AS, CLIENT, 1_700_000_123, "sub-bob"),
        Claim(REDIRECT, "role", ["doctor"], AS, CLIENT, 1_700_000_123, "sub-bob"),
    )
    # They hold where a rule accepts this server's word about the requesting party.
    text = rule("r", f'{DOCTOR}\n{BY_REDIRECT}\nissuers = ["{AS}"]', COLLEAGUE_GATHERED)
    assert ask(text, claims).outcome == "grant"
    assert redirect_claims_of_user(replace(user, claims={}), AS, CLIENT, 1) == ()


def _provider(issuer: str, client_id: str | None = None, name: str = "") -> OidcIssuer:
    if client_id is None:
        return OidcIssuer(issuer=issuer, audiences=("aud",), jwks_uri="https://keys.test/jwks")
    return OidcIssuer(
        issuer=issuer,
        audiences=(),
        jwks_uri="https://keys.test/jwks",
        client_id=client_id,
        client_secret="s3cret",
        display_name=name,
        authorization_endpoint="https://op.test/authorize",
        token_endpoint="https://op.test/token",
    )


@pytest.mark.parametrize(
    ("providers", "expected"),
    [
        ([], {}),
        # Providers whose ID tokens are only believed when pushed: nobody signs in there.
        ([_provider(OP), _provider(IDP)], {}),
        # Those with a client_id of ours, by the name shown (the issuer by default).
        ([_provider(OP, "our-id", "Example Accounts"), _provider(IDP)], {OP: "Example Accounts"}),
        ([_provider(OP, "our-id")], {OP: OP}),
    ],
)
def test_sign_in_providers(providers: list[OidcIssuer], expected: dict[str, str]) -> None:
    assert sign_in_providers(providers) == expected


class _Issuers:
    def issuers(self, claim_type: str) -> tuple[str, ...]:
        return (IDP,)


def test_no_client_supplies_redirect_claims() -> None:
    pairs = suppliable(CLIENT, (EMPLOYEE, REDIRECT, OIDC), _Issuers())  # type: ignore[arg-type]
    assert pairs == frozenset({(EMPLOYEE, CLIENT), (OIDC, CLIENT), (OIDC, IDP)})

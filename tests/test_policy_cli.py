"""`python -m umaserver policy check` and `policy explain`: JSON on stdout, every error named."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from umaserver.config import load_config
from umaserver.services.owner_rule_form import rule_from_form
from umaserver.services.owner_rules import add_owner_rule
from umaserver.storage import describe

from .conftest import CLI, Party, Store, make_client, store_owner_rule_as_is
from .flows import DOCTORS_AND_BOBS_PHOTOS, DOCTORS_AND_FAMILY, EMPLOYEE

BROKEN = """
[[rules]]
id = "a"
owner = "alice"
scopes = []

[[rules]]
id = "a"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
regex = "(unclosed"
"""


def test_check_a_valid_file_lists_its_rules(cli: CLI, tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(DOCTORS_AND_FAMILY, encoding="utf-8")
    assert cli.json("policy", "check", str(path)) == {
        "file": str(path),
        "valid": True,
        "rules": ["doctors", "family"],
        # With a config, the owners' rules in its database (none made yet) are checked too.
        "database": describe(load_config(cli.config_path).database),
        "owner_rules": [],
        "owner_rules_enabled": True,
    }


def test_check_defaults_to_the_configured_file(cli: CLI, config_path: Path) -> None:
    (config_path.parent / "policies.toml").write_text(DOCTORS_AND_FAMILY, encoding="utf-8")
    assert cli.json("policy", "check")["rules"] == ["doctors", "family"]


def test_check_the_example_file(cli: CLI) -> None:
    example = Path(__file__).resolve().parent.parent / "policies.example.toml"
    assert cli.json("policy", "check", str(example))["valid"] is True


def test_check_names_every_error_at_once(cli: CLI, tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(BROKEN, encoding="utf-8")
    result = cli("policy", "check", str(path))
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0] == f"{path}:"
    assert "rules[0].scopes: must be a non-empty array of non-empty strings" in lines
    assert "rules[1].id: duplicate id 'a'" in lines
    assert any(
        line.startswith("rules[1].conditions[0].regex: invalid RE2 pattern") for line in lines
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "There is no rule file"),
        ("[[rules]\n", "invalid TOML"),
    ],
)
def test_check_refuses_a_missing_or_unreadable_file(
    cli: CLI, tmp_path: Path, text: str | None, message: str
) -> None:
    path = tmp_path / "rules.toml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    result = cli("policy", "check", str(path))
    assert result.exit_code == 1
    assert message in result.stderr
    assert result.stdout == ""


def test_check_does_not_need_a_config_for_an_explicit_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(DOCTORS_AND_FAMILY, encoding="utf-8")
    result = CLI(tmp_path / "no-such-config.toml")("policy", "check", str(path))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["valid"] is True


# -- policy explain ------------------------------------------------------------------------------


@pytest.fixture
def rules_text() -> str:
    return DOCTORS_AND_BOBS_PHOTOS


@pytest.fixture
def photos(http: FlaskClient, rs: Party) -> str:
    created = http.post(
        "/rs/resource_set", json={"name": "Photos", "scopes": ["view"]}, headers=rs.auth
    )
    rs_id: str = created.json["_id"]
    return rs_id


def explain(cli: CLI, tmp_path: Path, rs_id: str, claims: Any, *extra: str) -> Any:
    claims_file = tmp_path / "claims.json"
    claims_file.write_text(claims if isinstance(claims, str) else json.dumps(claims))
    return cli(
        "policy",
        "explain",
        "--owner",
        "alice",
        "--resource-set",
        rs_id,
        "--scope",
        "view",
        "--claims",
        str(claims_file),
        *extra,
    )


def test_explain_a_grant(cli: CLI, tmp_path: Path, photos: str) -> None:
    result = explain(cli, tmp_path, photos, [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "decision": "grant",
        "rules": ["doctors"],
        "need_claims": [],
        "explanation": [
            {
                "rule": "doctors",
                "holds": True,
                "reasons": [
                    "condition 1 on 'role' holds: an accepted claim contains 'doctor'",
                    "grants 'view'",
                ],
            }
        ],
        "summary": "Granted 'view' on resource set 'Photos' by rule 'doctors'.",
    }


def test_explain_need_claims_for_a_client(
    cli: CLI, store: Store, tmp_path: Path, photos: str
) -> None:
    client_id, _ = make_client(store, "bob's app", (EMPLOYEE,))
    result = explain(cli, tmp_path, photos, [], "--client", client_id)
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["decision"] == "need_claims"
    assert answer["need_claims"] == [
        {"type": EMPLOYEE, "name": "role", "value": "Your role at the hospital"}
    ]
    # A client that may push no type the rule accepts is refused instead.
    other_id, _ = make_client(store, "other app", ("urn:example:other",))
    answer = json.loads(explain(cli, tmp_path, photos, [], "--client", other_id).stdout)
    assert answer["decision"] == "deny"
    assert "this client cannot supply one" in answer["explanation"][0]["reasons"][0]


def test_explain_a_refusal_without_showing_the_claim_value(
    cli: CLI, tmp_path: Path, photos: str
) -> None:
    result = explain(
        cli, tmp_path, photos, [{"type": EMPLOYEE, "value": {"role": ["secret-nurse"]}}]
    )
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["decision"] == "deny"
    assert answer["explanation"][0]["reasons"][0] == (
        "condition 1 on 'role' failed: no accepted claim contains 'doctor'"
    )
    assert "secret-nurse" not in result.stdout


@pytest.mark.parametrize(
    ("claims", "extra", "message"),
    [
        ("{not json", (), "The claims file is not JSON"),
        ('{"type": "x"}', (), "must be a JSON array of objects"),
        ('[{"type": "x", "value": 3}]', (), "must be a JSON array of objects"),
        ("[]", ("--client", "nobody"), "There is no client 'nobody'."),
    ],
)
def test_explain_errors_are_sentences(
    cli: CLI, tmp_path: Path, photos: str, claims: str, extra: tuple[str, ...], message: str
) -> None:
    result = explain(cli, tmp_path, photos, claims, *extra)
    assert result.exit_code == 1
    assert message in result.stderr
    assert result.stdout == ""


def test_explain_only_an_owners_own_set(cli: CLI, tmp_path: Path, photos: str) -> None:
    for rs_id in (photos, "never-registered"):
        result = cli(
            "policy",
            "explain",
            "--owner",
            "bob",
            "--resource-set",
            rs_id,
            "--scope",
            "view",
            "--claims",
            "-",
            input="[]",
        )
        assert result.exit_code == 1
        assert result.stderr.strip() == f"'bob' has no resource set {rs_id!r}."


def test_explain_a_type_the_client_may_not_push(
    cli: CLI, store: Store, tmp_path: Path, photos: str
) -> None:
    client_id, _ = make_client(store, "bob's app", (EMPLOYEE,))
    pushed = [{"type": "urn:example:other", "value": {"role": ["doctor"]}}]
    result = explain(cli, tmp_path, photos, pushed, "--client", client_id)
    assert result.exit_code == 1
    assert "may not push claims of type 'urn:example:other'" in result.stderr


def test_explain_without_a_client_supposes_one_that_may_push_anything(
    cli: CLI, tmp_path: Path, photos: str
) -> None:
    # As the server would answer a client registered for the rule's claim type: need_claims.
    answer = json.loads(explain(cli, tmp_path, photos, []).stdout)
    assert answer["decision"] == "need_claims"
    assert answer["need_claims"] == [
        {"type": EMPLOYEE, "name": "role", "value": "Your role at the hospital"}
    ]


@pytest.mark.parametrize(
    ("condition", "decision"),
    [
        # No SAML identity provider is configured: no client could supply this.
        ('types = ["claim-client-assertion-saml-1.0"]\nissuers = ["https://idp.example"]', "deny"),
        # Only a client vouches for plain claims, and no client is called that.
        (f'types = ["{EMPLOYEE}"]\nissuers = ["https://idp.example"]', "deny"),
        (f'types = ["{EMPLOYEE}"]', "need_claims"),
    ],
)
def test_explain_without_a_client_supposes_only_what_a_client_could_supply(
    cli: CLI, config_path: Path, tmp_path: Path, photos: str, condition: str, decision: str
) -> None:
    rules = '[[rules]]\nid = "r"\nowner = "alice"\nscopes = ["view"]\n[[rules.conditions]]\n'
    rules += f'claim = "role"\ncontains = "doctor"\n{condition}\n'
    (config_path.parent / "policies.toml").write_text(rules, encoding="utf-8")
    assert json.loads(explain(cli, tmp_path, photos, []).stdout)["decision"] == decision


# -- policy explain --requesting-party (issue 11): claims gathered by redirect ------------------

REDIRECT = "claim-client-redirect-1.0"
SERVER = "http://uma.test"  # the issuer of the tests' config: this server vouches for its users
COLLEAGUES_SIGNED_IN = f"""
[[rules]]
id = "colleagues"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "email"
suffix = "@example.com"
types = ["{REDIRECT}"]
issuers = ["{SERVER}"]
"""
DOCTOR_COLLEAGUES = (
    COLLEAGUES_SIGNED_IN
    + f"""[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
"""
)


def signed_in_rules(config_path: Path, text: str = COLLEAGUES_SIGNED_IN) -> None:
    (config_path.parent / "policies.toml").write_text(text, encoding="utf-8")


def person(cli: CLI, username: str, *claims: str) -> None:
    arguments = [argument for claim in claims for argument in ("--claim", claim)]
    result = cli("user", "create", username, *arguments)
    assert result.exit_code == 0, result.stderr


def test_explain_a_requesting_party_whose_attributes_hold(
    cli: CLI, config_path: Path, tmp_path: Path, photos: str
) -> None:
    signed_in_rules(config_path)
    person(cli, "bob", "email=bob@example.com")
    answer = json.loads(explain(cli, tmp_path, photos, [], "--requesting-party", "bob").stdout)
    assert answer["decision"] == "grant"
    assert answer["explanation"][0]["reasons"] == [
        "condition 1 on 'email' holds: an accepted claim ends with '@example.com' (shared by the"
        " requesting party on signing in here)",
        "grants 'view'",
    ]
    # Without a person behind the request, nobody can share it: no client can supply it.
    answer = json.loads(explain(cli, tmp_path, photos, []).stdout)
    assert answer["decision"] == "deny"
    assert answer["explanation"][0]["reasons"][0].endswith("; this client cannot supply one")


def test_explain_without_a_client_never_supposes_one_pushing_redirect_claims(
    cli: CLI, config_path: Path, tmp_path: Path, photos: str
) -> None:
    # A condition of the redirect type naming no issuer: still not a claim any client pushes.
    signed_in_rules(config_path, COLLEAGUES_SIGNED_IN.replace(f'issuers = ["{SERVER}"]\n', ""))
    answer = json.loads(explain(cli, tmp_path, photos, []).stdout)
    assert (answer["decision"], answer["need_claims"]) == ("deny", [])


def test_explain_a_requesting_party_whose_attributes_fail(
    cli: CLI, config_path: Path, tmp_path: Path, photos: str
) -> None:
    signed_in_rules(config_path)
    person(cli, "eve", "email=eve@secret-elsewhere.org")
    result = explain(cli, tmp_path, photos, [], "--requesting-party", "eve")
    answer = json.loads(result.stdout)
    assert answer["decision"] == "deny"
    assert answer["explanation"][0]["reasons"] == [
        "condition 1 on 'email' failed: no accepted claim ends with '@example.com' (the claims the"
        " requesting party shared on signing in here included)"
    ]
    assert "secret-elsewhere" not in result.stdout


def test_explain_a_requesting_party_without_the_attribute_needs_a_redirect(
    cli: CLI, config_path: Path, tmp_path: Path, photos: str
) -> None:
    signed_in_rules(config_path)
    person(cli, "carol", 'role=["doctor"]')
    answer = json.loads(explain(cli, tmp_path, photos, [], "--requesting-party", "carol").stdout)
    assert answer["decision"] == "need_claims"
    assert answer["need_claims"] == []
    assert answer["redirect_required"] == {
        "rules": ["colleagues"],
        "claims": ["email"],
        "issuers": [SERVER],
        "label": "Sign in to share your 'email'",
    }
    assert answer["explanation"][0]["reasons"] == [
        "condition 1 on 'email' failed: no claim 'email' was given (accepted types"
        f" ['{REDIRECT}'], accepted issuers ['{SERVER}']); this client cannot supply one; the"
        " requesting party can share one by signing in here"
    ]
    assert "signing in here" in answer["summary"]


def test_explain_a_requesting_party_with_pushed_claims_too(
    cli: CLI, store: Store, config_path: Path, tmp_path: Path, photos: str
) -> None:
    signed_in_rules(config_path, DOCTOR_COLLEAGUES)
    person(cli, "bob", "email=bob@example.com")
    client_id, _ = make_client(store, "bob's app", (EMPLOYEE,))
    as_bob = ("--client", client_id, "--requesting-party", "bob")
    answer = json.loads(explain(cli, tmp_path, photos, [], *as_bob).stdout)
    assert answer["decision"] == "need_claims"
    assert answer["need_claims"] == [
        {"type": EMPLOYEE, "name": "role", "value": "a value for 'role'"}
    ]
    doctor = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]
    assert json.loads(explain(cli, tmp_path, photos, doctor, *as_bob).stdout)["decision"] == (
        "grant"
    )


@pytest.mark.parametrize("option", ["--as", "--requesting-party"])
def test_explain_an_unknown_requesting_party(
    cli: CLI, tmp_path: Path, photos: str, option: str
) -> None:
    result = explain(cli, tmp_path, photos, [], option, "nobody")
    assert result.exit_code == 1
    assert result.stderr.strip() == "There is no user 'nobody' (--as names a local user)."
    assert result.stdout == ""


def test_explain_as_a_person_without_a_claims_file(
    cli: CLI, config_path: Path, photos: str
) -> None:
    signed_in_rules(config_path)
    person(cli, "bob", "email=bob@example.com")
    base = ["policy", "explain", "--owner", "alice", "--resource-set", photos, "--scope", "view"]
    assert json.loads(cli(*base, "--as", "bob").stdout)["decision"] == "grant"
    assert json.loads(cli(*base).stdout)["decision"] == "deny"  # no claims, no person


def test_explain_refuses_a_pushed_redirect_claim_object(
    cli: CLI, tmp_path: Path, photos: str
) -> None:
    result = explain(cli, tmp_path, photos, [{"type": REDIRECT, "value": {"scope": "x"}}])
    assert result.exit_code == 1
    assert "redirect the requesting party" in result.stderr


# -- owners' rules in the database ---------------------------------------------------------------


def test_check_and_explain_include_the_owners_rules(
    cli: CLI, store: Store, tmp_path: Path, photos: str
) -> None:
    friends = rule_from_form(
        "alice",
        photos,
        {
            "scopes": ["view"],
            "conditions-0-claim": ["friend"],
            "conditions-0-operator": ["equals"],
            "conditions-0-value": ["true"],
        },
    )
    add_owner_rule(store, "alice", friends, int(time.time()))
    checked = cli.json("policy", "check")
    assert checked["rules"] == ["doctors", "bobs-photos"]
    assert checked["owner_rules"] == [{"owner": "alice", "id": friends.id}]

    result = explain(cli, tmp_path, photos, [{"type": EMPLOYEE, "value": {"friend": True}}])
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert (answer["decision"], answer["rules"]) == ("grant", [friends.id])
    # The file's rules of the owner first, then the owner's own.
    assert [verdict["rule"] for verdict in answer["explanation"]] == ["doctors", friends.id]
    assert answer["explanation"][1]["reasons"] == [
        "condition 1 on 'friend' holds: an accepted claim equals true",
        "grants 'view'",
    ]


def test_check_names_a_broken_stored_rule_by_owner_and_id(
    cli: CLI, store: Store, config_path: Path, photos: str
) -> None:
    assert store_owner_rule_as_is(store, "alice", "o-old", {"scopes": ["view"], "colour": 1})
    result = cli("policy", "check")
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"{describe(load_config(config_path).database)}: owners' rules:",
        "owner 'alice': o-old: unknown key 'colour'",
    ]


def test_turned_off_explain_leaves_the_owners_rules_out(
    cli: CLI, store: Store, tmp_path: Path, config_path: Path, photos: str
) -> None:
    add_owner_rule(store, "alice", rule_from_form("alice", photos, {"scopes": ["view"]}), 0)
    assert explain(cli, tmp_path, photos, []).stdout.count('"decision": "grant"') == 1
    text = config_path.read_text(encoding="utf-8").replace('policies = "policies.toml"\n', "")
    config_path.write_text(text + '[policies]\nfile = "policies.toml"\nowner_rules = false\n')
    answer = json.loads(explain(cli, tmp_path, photos, []).stdout)
    assert answer["decision"] == "need_claims"
    assert [verdict["rule"] for verdict in answer["explanation"]] == ["doctors"]
    assert cli.json("policy", "check")["owner_rules_enabled"] is False


EDITORS_THROUGH = """
[[rules]]
id = "editors"
owner = "alice"
scopes = ["view"]
clients = ["CLIENT"]
[[rules.conditions]]
claim = "roles"
contains_any = ["editor", "admin"]
types = ["urn:umaserver:claim-type:account"]
"""


def test_explain_a_requesting_partys_account_claims_and_the_rules_clients(
    cli: CLI, config_path: Path, tmp_path: Path, photos: str
) -> None:
    viewer = cli.json("client", "create", "--name", "Viewer")["client_id"]
    signed_in_rules(config_path, EDITORS_THROUGH.replace("CLIENT", viewer))
    person(cli, "bob", 'roles=["viewer", "admin"]')
    person(cli, "carol", "roles=viewer")
    asked = ["--requesting-party", "bob", "--client", viewer]
    answer = json.loads(explain(cli, tmp_path, photos, [], *asked).stdout)
    assert answer["decision"] == "grant"
    assert answer["explanation"][0]["reasons"] == [
        "condition 1 on 'roles' holds: an accepted claim contains at least one of 'editor',"
        " 'admin'",
        "grants 'view'",
    ]
    asked[1] = "carol"
    answer = json.loads(explain(cli, tmp_path, photos, [], *asked).stdout)
    assert (answer["decision"], answer["need_claims"]) == ("deny", [])
    # Without a client named, a rule for some clients only does not hold, and says why.
    answer = json.loads(explain(cli, tmp_path, photos, [], "--requesting-party", "bob").stdout)
    assert answer["decision"] == "deny"
    assert answer["explanation"][0]["reasons"][0] == (
        f"holds only for the clients {viewer!r}: no acting client was named"
    )

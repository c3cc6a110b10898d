"""Seed files through the command line, as people run them: `seed apply FILE [--prune]` and `db
export`; the parties they make sign in and get tokens through the app."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

import umaserver
from umaserver import create_app, secrets_at_rest
from umaserver.claims.model import ACCOUNT_CLAIM_TYPE
from umaserver.config import load_config

from .conftest import (
    CLI,
    ROOT,
    FakeClock,
    open_store,
    stored_client,
    stored_user,
    write_config,
)
from .oidc_fixtures import jwks_of, make_rsa_key
from .pages_helpers import sign_in

OP = "https://accounts.example.com"

SEED = f"""\
# alice and bob, a resource server and a client app
[[users]]
username = "alice"
password = "alice's long password"
claims = {{ email = "alice@example.com", roles = ["doctor"] }}

[[users]]
username = "bob"
password_env = "BOB_PASSWORD"

[[clients]]
client_id = "photo-server"
secret = "photo-server-secret"
name = "Photo server"
redirect_uris = ["http://127.0.0.1:9000/cb"]
push_claims = ["https://example.com/claims/employee"]

[[clients]]
client_id = "photo-app"
name = "Photo app"
redirect_uris = ["http://127.0.0.1:9001/cb"]

[[links]]
user = "alice"
issuer = "{OP}"
subject = "248289761001"
"""

EVERYONE = ["user:alice", "user:bob", "client:photo-server", "client:photo-app", f"link:alice@{OP}"]


def seeding_cli(folder: Path) -> CLI:
    """A CLI on a prepared database whose config knows the provider the links name."""
    (folder / "policies.toml").write_text("", encoding="utf-8")
    (folder / "jwks.json").write_text(json.dumps(jwks_of([make_rsa_key("k")])))
    extra = (
        f'[[oidc_issuers]]\nissuer = "{OP}"\njwks_file = "jwks.json"\n'
        'client_id = "uma"\nclient_secret = "s"\n'
    )
    cli = CLI(write_config(folder, extra=extra))
    cli.json("init")
    return cli


@pytest.fixture
def seeding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CLI:
    monkeypatch.setenv("BOB_PASSWORD", "bob's long password")
    return seeding_cli(tmp_path)


def seed_file(folder: Path, text: str, name: str = "seed.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def apply(cli: CLI, path: Path, *more: str) -> Any:
    return cli.json("seed", "apply", str(path), *more)


def refused(cli: CLI, path: Path) -> str:
    result = cli("seed", "apply", str(path))
    assert result.exit_code == 1, result.stdout
    assert result.stdout == ""
    return str(result.stderr)


def app_of(cli: CLI) -> FlaskClient:
    return create_app(load_config(cli.config_path), clock=FakeClock()).test_client()


def token(http: FlaskClient, client_id: str, secret: str) -> Any:
    return http.post(
        "/token",
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(client_id, secret),
    )


def test_apply_creates_then_keeps_then_changes(seeding: CLI, tmp_path: Path) -> None:
    path = seed_file(tmp_path, SEED)
    assert apply(seeding, path) == {"created": EVERYONE, "changed": [], "kept": []}
    # Idempotent: the same file again changes nothing.
    assert apply(seeding, path) == {"created": [], "changed": [], "kept": EVERYONE}

    changed = SEED.replace('"doctor"', '"nurse"').replace("Photo app", "Photo app 2")
    assert apply(seeding, seed_file(tmp_path, changed)) == {
        "created": [],
        "changed": ["user:alice", "client:photo-app"],
        "kept": ["user:bob", "client:photo-server", f"link:alice@{OP}"],
    }
    users = {u["username"]: u for u in seeding.json("user", "list")["users"]}
    assert users["alice"]["links"] == [{"issuer": OP, "subject": "248289761001"}]
    listed = {c["client_id"]: c for c in seeding.json("client", "list")}
    assert listed["photo-app"]["client_name"] == "Photo app 2"
    # client create's defaults: a confidential client with redirect URIs gets every grant, a
    # public one the code flow only.
    assert listed["photo-server"]["grant_types"] == [
        "client_credentials",
        "urn:ietf:params:oauth:grant-type:uma-ticket",
        "authorization_code",
        "refresh_token",
    ]
    assert listed["photo-app"]["token_endpoint_auth_method"] == "none"
    assert listed["photo-app"]["grant_types"] == ["authorization_code", "refresh_token"]


def test_seeded_parties_sign_in_and_get_tokens(seeding: CLI, tmp_path: Path) -> None:
    apply(seeding, seed_file(tmp_path, SEED))
    http = app_of(seeding)
    assert sign_in(http, "alice", "alice's long password").status_code == 303
    assert sign_in(app_of(seeding), "bob", "bob's long password").status_code == 303
    assert sign_in(app_of(seeding), "bob", "alice's long password").status_code == 200
    answer = token(http, "photo-server", "photo-server-secret")
    assert answer.status_code == 200, answer.json
    assert answer.json["access_token"]
    assert token(http, "photo-server", "photo-server-secreT").status_code == 401


def test_a_changed_password_ends_the_users_sessions(seeding: CLI, tmp_path: Path) -> None:
    apply(seeding, seed_file(tmp_path, SEED))
    http = app_of(seeding)
    assert sign_in(http, "alice", "alice's long password").status_code == 303
    assert "signed in as <strong>alice" in http.get("/").text
    # The same password again is no change, and the session lives on.
    assert apply(seeding, seed_file(tmp_path, SEED))["kept"] == EVERYONE
    assert "signed in as <strong>alice" in http.get("/").text
    new = SEED.replace("alice's long password", "alice's new password")
    assert apply(seeding, seed_file(tmp_path, new))["changed"] == ["user:alice"]
    assert "signed in as <strong>alice" not in http.get("/").text
    assert sign_in(app_of(seeding), "alice", "alice's long password").status_code == 200
    assert sign_in(app_of(seeding), "alice", "alice's new password").status_code == 303


def test_a_changed_secret_replaces_the_old_one(seeding: CLI, tmp_path: Path) -> None:
    apply(seeding, seed_file(tmp_path, SEED))
    new = SEED.replace("photo-server-secret", "photo-server-secret-2")
    assert apply(seeding, seed_file(tmp_path, new))["changed"] == ["client:photo-server"]
    http = app_of(seeding)
    assert token(http, "photo-server", "photo-server-secret").status_code == 401
    assert token(http, "photo-server", "photo-server-secret-2").status_code == 200


PARTIES_ONLY_BOB = """\
[[users]]
username = "bob"
password_env = "BOB_PASSWORD"

[[clients]]
client_id = "photo-server"
secret = "photo-server-secret"
name = "Photo server"
redirect_uris = ["http://127.0.0.1:9000/cb"]
push_claims = ["https://example.com/claims/employee"]
"""


def test_prune_removes_only_what_a_seed_created(seeding: CLI, tmp_path: Path) -> None:
    # carol and a client made by hand, and a hand-made dave that the seed names: never pruned.
    seeding.json("user", "create", "carol")
    seeding.json("user", "create", "dave")
    by_hand = seeding.json("client", "create", "--name", "By hand")["client_id"]
    with_dave = SEED + '\n[[users]]\nusername = "dave"\n'
    assert apply(seeding, seed_file(tmp_path, with_dave))["kept"] == ["user:dave"]
    # Without --prune, what the file leaves out stays.
    path = seed_file(tmp_path, PARTIES_ONLY_BOB, "fewer.toml")
    assert apply(seeding, path) == {
        "created": [],
        "changed": [],
        "kept": ["user:bob", "client:photo-server"],
    }
    assert len(seeding.json("user", "list")["users"]) == 4
    assert apply(seeding, path, "--prune") == {
        "created": [],
        "changed": [],
        "kept": ["user:bob", "client:photo-server"],
        "removed": [f"link:alice@{OP}", "user:alice", "client:photo-app"],
    }
    users = [u["username"] for u in seeding.json("user", "list")["users"]]
    assert sorted(users) == ["bob", "carol", "dave"]
    clients = [c["client_id"] for c in seeding.json("client", "list")]
    assert sorted(clients) == sorted(["photo-server", by_hand])
    # Pruned already: nothing more to remove.
    assert apply(seeding, path, "--prune")["removed"] == []
    # A seed party deleted by hand is forgotten; made again by the seed, it is the seed's again.
    seeding.json("user", "delete", "bob")
    assert apply(seeding, path, "--prune")["created"] == ["user:bob"]
    # A user the file links is kept, though it lists no users.
    only_link = seed_file(tmp_path, SEED[SEED.index("[[links]]") :], "link.toml")
    apply(seeding, seed_file(tmp_path, SEED))
    assert apply(seeding, only_link, "--prune") == {
        "created": [],
        "changed": [],
        "kept": [f"link:alice@{OP}"],
        "removed": ["user:bob", "client:photo-app", "client:photo-server"],
    }
    empty = seed_file(tmp_path, "", "empty.toml")
    assert apply(seeding, empty, "--prune")["removed"] == [f"link:alice@{OP}", "user:alice"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            SEED + '\n[[clients]]\nclient_id = "x"\nname = "X"\nsecret = "sixteen-chars-ok"\n'
            'colour = "blue"\n',
            "seed.toml: line 32: clients[2].colour: unknown key",
        ),
        (
            SEED.replace('secret = "photo-server-secret"', 'secret = "short"'),
            "seed.toml: line 13: clients[0].secret: must be at least 16 characters",
        ),
        (
            SEED.replace('client_id = "photo-app"', 'client_id = "photo app"'),
            "seed.toml: line 19: clients[1].client_id: must be 1 to 64 characters of A-Z, a-z,"
            " 0-9 and . _ ~ -",
        ),
        (
            SEED.replace('client_id = "photo-app"', f'client_id = "{"a" * 65}"'),
            "seed.toml: line 19: clients[1].client_id: must be 1 to 64 characters",
        ),
        (
            SEED.replace('"http://127.0.0.1:9001/cb"', '"http://example.com/cb"'),
            "seed.toml: line 21: clients[1].redirect_uris: 'http://example.com/cb' must be"
            " https; http only on a loopback host",
        ),
        (
            SEED.replace('redirect_uris = ["http://127.0.0.1:9001/cb"]', ""),
            "seed.toml: line 18: clients[1]: a public client (no secret) without redirect_uris"
            " has no grant type to use",
        ),
        (
            SEED.replace('password_env = "BOB_PASSWORD"', 'password_env = "NO_SUCH_VARIABLE"'),
            "seed.toml: line 9: users[1].password_env: the environment variable"
            " NO_SUCH_VARIABLE is not set",
        ),
        (
            SEED.replace('"alice\'s long password"', '"eleven char"'),
            "seed.toml: line 4: users[0].password: Choose a password of at least 12 characters.",
        ),
        (
            SEED.replace('"alice\'s long password"', '"' + "p" * 1025 + '"'),
            "seed.toml: line 4: users[0].password: Choose a password of at most 1024 characters",
        ),
        (
            SEED.replace('username = "bob"', 'username = "client:bob"'),
            "seed.toml: line 8: users[1].username: The username must not contain ':'",
        ),
        (
            SEED.replace('username = "bob"', 'username = "alice"'),
            "seed.toml: line 8: users[1].username: given twice (first in users[0])",
        ),
        (
            SEED.replace(f'issuer = "{OP}"', 'issuer = "https://elsewhere.example"'),
            "seed.toml: line 25: links[0].issuer: The issuer 'https://elsewhere.example' is not"
            " configured in [[oidc_issuers]]",
        ),
        (
            SEED.replace('user = "alice"', 'user = "nobody"'),
            "seed.toml: line 24: links[0].user: There is no user 'nobody'.",
        ),
        (
            SEED.replace(
                '["https://example.com/claims/employee"]', '["claim-client-redirect-1.0"]'
            ),
            "seed.toml: line 16: clients[0].push_claims: claim-client-redirect-1.0 is gathered by"
            " this server, not pushed by a client.",
        ),
        (
            SEED.replace("roles = [", "since = 2024-01-01, roles = ["),
            "seed.toml: line 5: users[0].claims: must hold strings, numbers, booleans, arrays and"
            " tables only, not a date or time",
        ),
        (
            SEED + '\n[[clients]]\nclient_id = "x"\nname = "X"\ngrant_types = ["implicit"]\n'
            'redirect_uris = ["http://127.0.0.1:1/cb"]\n',
            "seed.toml: line 31: clients[2].grant_types: 'implicit' is not one of",
        ),
        ("[[users]\n", "seed.toml: not valid TOML:"),
        (
            '[[users]]\nusername = "carol"\npassword_hash = "hunter2"\n',
            "seed.toml: line 3: users[0].password_hash: must be an argon2id (or scrypt) hash",
        ),
        (
            '[[users]]\nusername = "carol"\npassword = "a"\npassword_env = "BOB_PASSWORD"\n',
            "seed.toml: line 1: users[0]: give one of password, password_env and password_hash",
        ),
        (
            '[[clients]]\nclient_id = "c"\nname = "C"\nsecret_digest = "abc"\n',
            "seed.toml: line 4: clients[0].secret_digest: must be a SHA-256 digest",
        ),
        (
            '[[users]]\nusername = "carol"\n[users.claims]\nemail = "c@example.com"\n'
            "since = 2024-01-01\n",
            "seed.toml: line 3: users[0].claims: must hold strings, numbers, booleans",
        ),
        (
            '[[users]]\nusername = "carol"\n\n[extra]\nkey = 1\n',
            "seed.toml: line 4: extra: unknown key",
        ),
    ],
)
def test_a_bad_file_is_refused_whole_with_its_place_and_line(
    seeding: CLI, tmp_path: Path, text: str, message: str
) -> None:
    error = refused(seeding, seed_file(tmp_path, text))
    assert message in error
    # Nothing was written, not even the entries without a problem.
    assert seeding.json("user", "list") == {"users": []}
    assert seeding.json("client", "list") == []


def test_every_problem_is_reported_at_once(seeding: CLI, tmp_path: Path) -> None:
    text = (
        SEED.replace('secret = "photo-server-secret"', 'secret = "short"')
        .replace('name = "Photo app"', 'name = "Photo app"\ncolour = "blue"')
        .replace('user = "alice"', 'user = "nobody"')
    )
    error = refused(seeding, seed_file(tmp_path, text))
    assert error.splitlines() == [
        f"{tmp_path / 'seed.toml'}: line 13: clients[0].secret: must be at least 16 characters",
        f"{tmp_path / 'seed.toml'}: line 21: clients[1].colour: unknown key",
    ]
    # Once the file reads, what it asks of the database is named in the same run.
    text = text.replace('secret = "short"', 'secret = "long-enough-secret"').replace(
        'name = "Photo app"\ncolour = "blue"', 'name = "Photo app"'
    )
    text = text.replace('"http://127.0.0.1:9001/cb"', '"http://example.com/cb"')
    error = refused(seeding, seed_file(tmp_path, text))
    assert [line.split(": ", 2)[2].split(":")[0] for line in error.splitlines()] == [
        "clients[1].redirect_uris",
        "links[0].user",
    ]


def test_a_client_never_switches_between_public_and_confidential(
    seeding: CLI, tmp_path: Path
) -> None:
    apply(seeding, seed_file(tmp_path, SEED))
    switched = SEED.replace('name = "Photo app"', 'name = "Photo app"\nsecret = "a-secret-at-last"')
    error = refused(seeding, seed_file(tmp_path, switched))
    assert (
        "line 18: clients[1]: the client 'photo-app' is public: it cannot become confidential"
        in error
    )
    made_public = SEED.replace('secret = "photo-server-secret"\n', "")
    error = refused(seeding, seed_file(tmp_path, made_public))
    assert "clients[0]: the client 'photo-server' is confidential: it cannot become public" in error


def test_a_link_held_by_another_user_is_refused(seeding: CLI, tmp_path: Path) -> None:
    seeding.json("user", "create", "carol")
    seeding.json("user", "link", "carol", "--issuer", OP, "--subject", "248289761001")
    error = refused(seeding, seed_file(tmp_path, SEED))
    assert (
        "line 26: links[0].subject: The identity '248289761001' at"
        f" {OP} is linked to another user ('carol'); unlink it there first." in error
    )
    assert [u["username"] for u in seeding.json("user", "list")["users"]] == ["carol"]


def test_export_then_apply_on_a_fresh_database_gives_the_same_parties(
    seeding: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply(seeding, seed_file(tmp_path, SEED))
    by_hand = seeding.json(
        "client",
        "create",
        "--name",
        'Quotes " and \\ and ünïcode',
        "--scope",
        "uma_protection",
        "--logo-uri",
        "https://example.com/logo.png",
    )
    exported = seeding("db", "export")
    assert exported.exit_code == 0, exported.stderr
    text = exported.stdout
    assert "alice's long password" not in text and "photo-server-secret" not in text
    assert "password_hash = " in text and "secret_digest = " in text
    # Applied to the database it came from: nothing changes.
    again = seed_file(tmp_path, text, "exported.toml")
    assert apply(seeding, again)["changed"] == []

    fresh_folder = tmp_path / "fresh"
    fresh_folder.mkdir()
    fresh = seeding_cli(fresh_folder)
    report = apply(fresh, again)
    assert report["changed"] == [] and report["kept"] == []
    assert len(report["created"]) == 6
    assert fresh.json("user", "list")["users"][0]["links"] == [
        {"issuer": OP, "subject": "248289761001"}
    ]

    def without_ids(listed: Any) -> Any:
        return [{k: v for k, v in u.items() if k != "sub"} for u in listed["users"]]

    assert without_ids(fresh.json("user", "list")) == without_ids(seeding.json("user", "list"))

    def without_times(listed: Any) -> Any:
        return [{k: v for k, v in c.items() if k != "client_id_issued_at"} for c in listed]

    assert without_times(fresh.json("client", "list")) == without_times(
        seeding.json("client", "list")
    )
    # The same passwords sign in, the same secrets get tokens.
    http = app_of(fresh)
    assert sign_in(http, "alice", "alice's long password").status_code == 303
    assert token(http, "photo-server", "photo-server-secret").status_code == 200
    assert token(http, by_hand["client_id"], by_hand["client_secret"]).status_code == 200
    # And the export of the copy is the export of the original.
    assert fresh("db", "export").stdout == text


def test_apply_works_whatever_the_rule_file_says(seeding: CLI, tmp_path: Path) -> None:
    (tmp_path / "policies.toml").write_text("this is [[ not a rule file", encoding="utf-8")
    path = seed_file(tmp_path, SEED)
    assert apply(seeding, path)["created"] == EVERYONE
    (tmp_path / "policies.toml").unlink()
    assert apply(seeding, path)["kept"] == EVERYONE
    assert "[[users]]" in seeding("db", "export").stdout


def test_a_seeded_user_has_the_declared_claims_and_a_hashed_password(
    seeding: CLI, tmp_path: Path
) -> None:
    apply(seeding, seed_file(tmp_path, SEED))
    store = open_store(load_config(seeding.config_path).database)
    alice = stored_user(store, "alice")
    assert alice is not None and alice.claims == {
        "email": "alice@example.com",
        "roles": ["doctor"],
    }
    assert alice.password_hash is not None and alice.password_hash.startswith("$argon2id$")
    assert secrets_at_rest.check_password("alice's long password", alice.password_hash)
    client = stored_client(store, "photo-server")
    assert client is not None and client.check_secret("photo-server-secret")
    assert client.push_claim_types == ("https://example.com/claims/employee",)


# -- the example the README uses -------------------------------------------------------------------

EXAMPLE = Path(umaserver.__file__).parent / "examples" / "seed.toml"


def test_the_example_seed_gives_the_readme_its_parties(tmp_path: Path) -> None:
    example_rules = (ROOT / "policies.example.toml").read_text(encoding="utf-8")
    (tmp_path / "policies.toml").write_text(example_rules, encoding="utf-8")
    cli = CLI(write_config(tmp_path))
    cli.json("init")
    assert apply(cli, EXAMPLE) == {
        "created": ["user:alice", "user:bob", "client:photo-server", "client:viewer"],
        "changed": [],
        "kept": [],
    }
    http = app_of(cli)
    assert sign_in(http, "alice", "alice's example password").status_code == 303
    assert sign_in(app_of(cli), "bob", "bob's example password").status_code == 303
    answer = token(http, "photo-server", "photo-server-example-secret")
    assert answer.status_code == 200, answer.json
    aat = cli.json(
        "token", "issue", "--client", "viewer", "--user", "bob", "--scope", "uma_authorization"
    )
    assert aat["access_token"]
    # The viewer may push every claim type the example rules read from a client (not this
    # server's own: account claims, and the claims a person shares by the redirect profile).
    (viewer,) = [c for c in cli.json("client", "list") if c["client_id"] == "viewer"]
    read = {
        claim_type
        for rule in tomllib.loads(example_rules)["rules"]
        for condition in rule.get("conditions", [])
        for claim_type in condition.get("types", [])
    }
    own = {ACCOUNT_CLAIM_TYPE, "claim-client-redirect-1.0"}
    assert read - own <= set(viewer["uma_push_claim_types"])


def test_the_readme_section_applies_as_written(seeding: CLI, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Declaring parties in a seed file\n", 1)[1].split("\n## ", 1)[0]
    (toml_block,) = re.findall(r"```toml\n(.*?)```", section, re.DOTALL)
    (sh_block,) = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    printed = sh_block.strip().splitlines()[-1].removeprefix("# ")
    assert apply(seeding, seed_file(tmp_path, toml_block)) == json.loads(printed)


def test_a_missing_file_is_named(seeding: CLI, tmp_path: Path) -> None:
    assert (
        refused(seeding, tmp_path / "nowhere.toml")
        == f"{tmp_path / 'nowhere.toml'}: no such file\n"
    )


def test_export_refuses_a_claim_toml_cannot_hold(seeding: CLI) -> None:
    seeding.json("user", "create", "carol", "--claim", "nickname=null")
    result = seeding("db", "export")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        "The database cannot be exported as a seed file: users 'carol': claims: a value of"
        " NoneType (JSON null) has no place in a seed file (TOML).\n"
    )


def test_a_client_registered_without_a_name_is_exported_under_its_id(seeding: CLI) -> None:
    issued = seeding.json("registration-token", "issue")
    reply = app_of(seeding).post(
        "/register",
        json={"grant_types": ["client_credentials"]},
        headers={"Authorization": f"Bearer {issued['initial_access_token']}"},
    )
    assert reply.status_code == 201, reply.json
    client_id = reply.json["client_id"]
    text = seeding("db", "export").stdout
    assert f'client_id = "{client_id}"\n# Registered without a name' in text
    assert f'name = "{client_id}"' in text
    (seeding.config_path.parent / "fresh").mkdir()
    fresh = seeding_cli(seeding.config_path.parent / "fresh")
    assert apply(fresh, seed_file(seeding.config_path.parent, text))["created"] == [
        f"client:{client_id}"
    ]


def test_a_client_may_take_its_secret_in_the_form(seeding: CLI, tmp_path: Path) -> None:
    text = (
        '[[clients]]\nclient_id = "poster"\nname = "Poster"\nsecret = "poster-secret-0123"\n'
        'token_endpoint_auth_method = "client_secret_post"\n'
    )
    apply(seeding, seed_file(tmp_path, text))
    form = {
        "grant_type": "client_credentials",
        "scope": "uma_protection",
        "client_id": "poster",
        "client_secret": "poster-secret-0123",
    }
    assert app_of(seeding).post("/token", data=form).status_code == 200
    exported = seeding("db", "export").stdout
    assert 'token_endpoint_auth_method = "client_secret_post"' in exported
    assert apply(seeding, seed_file(tmp_path, exported, "exported.toml"))["kept"] == [
        "client:poster"
    ]


def test_db_reset_keeps_what_the_seed_made_for_prune(seeding: CLI, tmp_path: Path) -> None:
    apply(seeding, seed_file(tmp_path, SEED))
    reset = seeding.json("db", "reset", "--keep-parties")
    assert "seeded_parties" not in reset["kept"] and "seeded_parties" not in reset["forgotten"]
    assert apply(seeding, seed_file(tmp_path, SEED))["kept"] == EVERYONE
    empty = seed_file(tmp_path, "", "empty.toml")
    assert apply(seeding, empty, "--prune")["removed"] == [
        f"link:alice@{OP}",
        "user:alice",
        "user:bob",
        "client:photo-app",
        "client:photo-server",
    ]

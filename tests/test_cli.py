"""The command line: JSON on stdout, sentences on stderr, exit 1 (2 for usage)."""

from __future__ import annotations

import gc
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from umaserver import create_app, secrets_at_rest
from umaserver.config import Config, load_config
from umaserver.services import accounts
from umaserver.serving import issuer_mismatch
from umaserver.storage import describe
from umaserver.storage.migrations import current_version
from umaserver.storage.records import User

from .conftest import (
    CLI,
    ROOT,
    Store,
    dump_database,
    open_store,
    stored_client,
    stored_user,
    write_config,
)
from .oidc_fixtures import jwks_of, make_rsa_key


# A test's PostgreSQL database is made prepared (test_postgresql.py has init on an empty one).
@pytest.mark.sqlite_only
def test_init_is_safe_twice(cli: CLI, config_path: Path) -> None:
    first = cli.json("init")
    assert first == {
        "database": describe(load_config(config_path).database),
        "status": "ready",
        "schema_version_found": 0,
        "schema_version": current_version(),
    }
    assert cli.json("init") == {**first, "schema_version_found": current_version()}


def test_client_create_prints_id_and_secret_once_stored_as_digest(
    cli: CLI, store: Store, config_path: Path
) -> None:
    made = cli.json(
        "client",
        "create",
        "--name",
        "Photos RS",
        "--redirect-uri",
        "https://rs.example/cb",
        "--push-claims",
        "urn:example:roles",
        "--push-claims",
        "claim-client-claims-oidc-1.0",
    )
    assert set(made) == {"client_id", "client_secret"}
    stored = stored_client(store, made["client_id"])
    assert stored is not None
    assert stored.redirect_uris == ("https://rs.example/cb",)
    assert stored.push_claim_types == ("urn:example:roles", "claim-client-claims-oidc-1.0")
    assert stored.check_secret(made["client_secret"])
    assert made["client_secret"] not in dump_database(config_path.parent / "uma.db")


def test_user_create_takes_json_values_and_password_from_stdin(cli: CLI, store: Store) -> None:
    made = cli.json(
        "user",
        "create",
        "alice",
        "--password-stdin",
        "--claim",
        'roles=["doctor"]',
        "--claim",
        "verified=true",
        "--claim",
        "name=Alice A",
        input="correct horse\n",
    )
    found = stored_user(store, "alice")
    assert found is not None and found.sub == made["sub"]
    assert found.claims == {"roles": ["doctor"], "verified": True, "name": "Alice A"}
    assert found.password_hash is not None and "correct horse" not in found.password_hash
    assert found.password_hash.startswith("$argon2id$")
    assert secrets_at_rest.check_password("correct horse", found.password_hash)


def test_user_list_set_password_and_delete(cli: CLI, store: Store) -> None:
    alice = cli.json("user", "create", "alice")["sub"]
    bob = cli.json("user", "create", "bob", "--password-stdin", input="old passphrase\n")["sub"]
    assert cli.json("user", "list") == {
        "users": [
            {"username": "alice", "sub": alice, "links": []},
            {"username": "bob", "sub": bob, "links": []},
        ]
    }
    assert cli.json(
        "user", "set-password", "bob", "--password-stdin", input="new passphrase\n"
    ) == {
        "username": "bob",
        "password_set": True,
        "sessions_ended": 0,
    }
    found = stored_user(store, "bob")
    assert found is not None and found.password_hash is not None
    assert found.password_hash.startswith("$argon2id$")
    assert secrets_at_rest.check_password("new passphrase", found.password_hash)
    assert not secrets_at_rest.check_password("old passphrase", found.password_hash)
    assert cli.json("user", "delete", "bob") == {"deleted": "bob"}
    assert stored_user(store, "bob") is None
    assert cli.json("user", "list") == {"users": [{"username": "alice", "sub": alice, "links": []}]}


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (
            ("user", "set-password", "nobody", "--password-stdin"),
            "pw\n",
            "There is no user 'nobody'.",
        ),
        (("user", "set-password", "alice", "--password-stdin"), "\n", "No password was read"),
        (
            ("user", "set-password", "alice", "--password-stdin"),
            "eleven char\n",
            "Choose a password of at least 12 characters.",
        ),
        (
            ("user", "set-password", "alice", "--password-stdin"),
            "p" * 1025 + "\n",
            "Choose a password of at most 1024 characters: sign-in reads no more.",
        ),
        (
            ("user", "create", "carol", "--password-stdin"),
            "eleven char\n",
            "Choose a password of at least 12 characters.",
        ),
        (("user", "delete", "nobody"), None, "There is no user 'nobody'."),
    ],
)
def test_user_commands_refuse(
    cli: CLI, args: tuple[str, ...], stdin: str | None, message: str
) -> None:
    cli.json("user", "create", "alice")
    result = cli(*args, input=stdin)
    assert result.exit_code == 1
    assert message in result.stderr


def test_token_issue_and_revoke(cli: CLI, http: FlaskClient) -> None:
    client_id = cli.json("client", "create", "--name", "rs")["client_id"]
    cli.json("user", "create", "alice")
    issued = cli.json(
        "token", "issue", "--client", client_id, "--user", "alice", "--scope", "uma_protection"
    )
    assert issued["token_type"] == "Bearer" and issued["expires_in"] == 3600
    auth = {"Authorization": f"Bearer {issued['access_token']}"}
    assert http.get("/rs/resource_set", headers=auth).status_code == 200
    assert cli.json("token", "revoke", issued["access_token"]) == {"revoked": True}
    assert http.get("/rs/resource_set", headers=auth).status_code == 401
    again = cli("token", "revoke", issued["access_token"])
    assert again.exit_code == 1 and again.stderr.strip() == "No live token matches."


# -- clients as /register makes them -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            [],
            {
                "grant_types": [
                    "client_credentials",
                    "urn:ietf:params:oauth:grant-type:uma-ticket",
                ],
                "response_types": [],
                "token_endpoint_auth_method": "client_secret_basic",
                "scope": "uma_protection uma_authorization",
            },
        ),
        (
            ["--redirect-uri", "http://127.0.0.1:9000/cb", "--scope", "uma_protection"],
            {
                "redirect_uris": ["http://127.0.0.1:9000/cb"],
                "grant_types": [
                    "client_credentials",
                    "urn:ietf:params:oauth:grant-type:uma-ticket",
                    "authorization_code",
                    "refresh_token",
                ],
                "response_types": ["code"],
                "scope": "uma_protection",
            },
        ),
        (
            [
                "--public",
                "--redirect-uri",
                "https://app.test/cb",
                "--logo-uri",
                "https://app.test/logo.png",
                "--client-uri",
                "https://app.test/",
                "--scope",
                "http://docs.kantarainitiative.org/uma/scopes/authz.json",
            ],
            {
                "grant_types": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_method": "none",
                "scope": "uma_authorization",
                "logo_uri": "https://app.test/logo.png",
                "client_uri": "https://app.test/",
            },
        ),
        (
            ["--grant-type", "client_credentials", "--grant-type", "client_credentials"],
            {"grant_types": ["client_credentials"]},
        ),
        (
            [
                "--grant-type",
                "urn:ietf:params:oauth:grant-type:uma-ticket",
                "--claims-redirect-uri",
                "https://app.test/claims",
                "--claims-redirect-uri",
                "http://127.0.0.1:9000/claims",
            ],
            {
                "grant_types": ["urn:ietf:params:oauth:grant-type:uma-ticket"],
                "claims_redirect_uris": ["https://app.test/claims", "http://127.0.0.1:9000/claims"],
            },
        ),
    ],
)
def test_client_create_makes_the_client_register_would(
    cli: CLI, args: list[str], expected: dict[str, object]
) -> None:
    made = cli.json("client", "create", "--name", "app", *args)
    assert ("client_secret" in made) is ("--public" not in args)
    (listed,) = cli.json("client", "list")
    assert listed["client_id"] == made["client_id"] and listed["client_name"] == "app"
    assert {key: listed[key] for key in expected} == expected
    assert listed["registered_at_register"] is False
    assert "client_secret" not in listed
    if "client_secret" in made:
        assert made["client_secret"] not in json.dumps(listed)


def test_client_list_delete_and_rotate_secret(cli: CLI, http: FlaskClient) -> None:
    assert cli.json("client", "list") == []
    first = cli.json("client", "create", "--name", "one", "--push-claims", "custom")
    second = cli.json("client", "create", "--name", "two")
    listed = cli.json("client", "list")
    assert [c["client_id"] for c in listed] == [first["client_id"], second["client_id"]]
    assert listed[0]["uma_push_claim_types"] == ["custom"]

    def token(made: dict[str, str], secret: str) -> int:
        return http.post(
            "/token",
            data={"grant_type": "client_credentials", "scope": "uma_protection"},
            auth=(made["client_id"], secret),
        ).status_code

    assert token(first, first["client_secret"]) == 200
    rotated = cli.json("client", "rotate-secret", first["client_id"])
    assert rotated["client_id"] == first["client_id"]
    assert rotated["client_secret"] != first["client_secret"]
    assert token(first, first["client_secret"]) == 401
    assert token(first, rotated["client_secret"]) == 200

    assert cli.json("client", "delete", first["client_id"]) == {"deleted": first["client_id"]}
    assert [c["client_id"] for c in cli.json("client", "list")] == [second["client_id"]]
    assert token(first, rotated["client_secret"]) == 401


def test_a_public_client_has_no_secret_to_rotate(cli: CLI) -> None:
    made = cli.json("client", "create", "--name", "p", "--public", "--redirect-uri", "https://a/cb")
    result = cli("client", "rotate-secret", made["client_id"])
    assert result.exit_code == 1
    assert result.stderr == "A public client has no secret to rotate.\n"


def test_registration_token_issue_prints_the_token_once(
    cli: CLI, config_path: Path, http: FlaskClient
) -> None:
    issued = cli.json(
        "registration-token", "issue", "--push-claims", "custom", "--expires-in", "60"
    )
    assert issued["token_type"] == "Bearer" and issued["expires_in"] == 60
    assert issued["push_claim_types"] == ["custom"]
    assert issued["initial_access_token"].startswith("uma_iat_")
    assert issued["initial_access_token"] not in dump_database(config_path.parent / "uma.db")
    reply = http.post(
        "/register",
        json={"grant_types": ["client_credentials"], "uma_push_claim_types": ["custom"]},
        headers={"Authorization": f"Bearer {issued['initial_access_token']}"},
    )
    assert reply.status_code == 201
    (listed,) = cli.json("client", "list")
    assert listed["uma_push_claim_types"] == ["custom"]
    assert listed["registered_at_register"] is True
    default = cli.json("registration-token", "issue")
    assert default["expires_in"] == 86400 and default["push_claim_types"] == []


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["client", "create", "--name", " "], 1, "The client name must not be empty."),
        (["client", "create", "--name", "x", "--redirect-uri", "/cb"], 1, "must be an absolute"),
        (
            ["client", "create", "--name", "x", "--redirect-uri", "http://a.test/cb"],
            1,
            "must be https; http only on a loopback host",
        ),
        (
            ["client", "create", "--name", "x", "--redirect-uri", "https://*.a.test/cb"],
            1,
            "must not hold a wildcard",
        ),
        (
            ["client", "create", "--name", "x", "--redirect-uri", "https://a.test/cb#x"],
            1,
            "must not have a fragment",
        ),
        (
            ["client", "create", "--name", "x", "--public", "--grant-type", "client_credentials"],
            1,
            "a public client (token_endpoint_auth_method none) may not use client_credentials",
        ),
        (["client", "create", "--name", "x", "--public"], 1, "give at least one grant type"),
        (
            ["client", "create", "--name", "x", "--grant-type", "authorization_code"],
            1,
            "the authorization_code grant needs at least one redirect URI",
        ),
        (["client", "create", "--name", "x", "--grant-type", "implicit"], 2, "Invalid value"),
        (["client", "create", "--name", "x", "--scope", "admin"], 1, "The scope 'admin' is"),
        (["client", "create", "--name", "x", "--logo-uri", "ftp://a/l"], 1, "--logo-uri:"),
        (["client", "delete", "nope"], 1, "There is no client 'nope'."),
        (["client", "rotate-secret", "nope"], 1, "There is no client 'nope'."),
        (["registration-token", "issue", "--expires-in", "0"], 2, "Invalid value"),
        (
            ["registration-token", "issue", "--push-claims", "claim-client-redirect-1.0"],
            1,
            "gathered by this server",
        ),
        (
            ["client", "create", "--name", "x", "--push-claims", "claim-client-redirect-1.0"],
            1,
            "gathered by this server",
        ),
        (
            [
                "client",
                "create",
                "--name",
                "x",
                "--push-claims",
                "urn:umaserver:claim-type:account",
            ],
            1,
            "this server's own word about a person's account: no client pushes",
        ),
        (
            ["registration-token", "issue", "--push-claims", "urn:umaserver:claim-type:account"],
            1,
            "this server's own word about a person's account: no client pushes",
        ),
        (["client", "create"], 2, "Missing option '--name'"),
        (["user", "create", "bad name"], 1, "no white space"),
        (["user", "create", "u", "--claim", "novalue"], 1, "NAME=VALUE"),
        (["user", "create", "u", "--claim", "a=1", "--claim", "a=2"], 1, "given twice"),
        (
            ["token", "issue", "--client", "nope", "--user", "x", "--scope", "uma_protection"],
            1,
            "There is no client 'nope'.",
        ),
        (
            ["token", "issue", "--client", "c", "--user", "x", "--scope", "admin"],
            2,
            "Invalid value",
        ),
        (["frobnicate"], 2, "No such command"),
    ],
)
def test_errors_are_sentences_on_stderr(cli: CLI, args: list[str], code: int, message: str) -> None:
    result = cli(*args)
    assert result.exit_code == code
    assert message in result.stderr
    assert result.stdout == ""


def test_taken_username_and_unknown_user(cli: CLI) -> None:
    cli.json("user", "create", "alice")
    result = cli("user", "create", "alice")
    assert result.exit_code == 1 and "taken" in result.stderr
    client_id = cli.json("client", "create", "--name", "rs")["client_id"]
    result = cli(
        "token", "issue", "--client", client_id, "--user", "bob", "--scope", "uma_protection"
    )
    assert result.exit_code == 1 and result.stderr.strip() == "There is no user 'bob'."


def test_bad_config_is_reported_line_per_key(tmp_path: Path) -> None:
    path = write_config(tmp_path, issuer="ftp://x/", extra="colour = 1\n")
    result = CLI(path)("init")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"{path}: issuer: must be an absolute http(s) URL",
        f"{path}: colour: unknown key",
    ]


def test_config_flag_wins_over_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: CLI
) -> None:
    monkeypatch.setenv("UMASERVER_CONFIG", str(tmp_path / "does-not-exist.toml"))
    assert json.loads(cli("init").stdout)["status"] == "ready"


def test_serve_on_a_port_in_use_says_so_in_a_sentence(
    cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `serve` sets up logging for its process; this one is pytest's, so put it back afterwards.
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", "--host", "127.0.0.1", "--port", str(port))
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Cannot listen on 127.0.0.1:{port}: Address already in use."


@pytest.mark.parametrize(
    ("issuer", "host", "port", "said"),
    [
        ("http://127.0.0.1:8080", None, 8080, None),
        ("http://127.0.0.1:8080", "127.0.0.1", None, None),
        ("http://127.0.0.1:8080", None, 0, None),  # a free port: nothing to compare
        ("https://uma.example", "10.0.0.5", 8443, "port 8443, but the issuer https://uma.example says port 443"),
        ("http://127.0.0.1:8080", None, 9090, "port 9090, but the issuer http://127.0.0.1:8080 says port 8080"),
        ("http://127.0.0.1:8080", "192.168.1.5", None, "address 192.168.1.5, but the issuer http://127.0.0.1:8080 says 127.0.0.1"),
        ("http://127.0.0.1:8080", "0.0.0.0", None, None),  # noqa: S104 (every address, the issuer's among them)
        ("http://uma.example:8080", "192.168.1.5", 8080, None),  # a name: a proxy may be in front
    ],
)  # fmt: skip
def test_serve_names_an_issuer_that_points_elsewhere(
    issuer: str, host: str | None, port: int | None, said: str | None
) -> None:
    found = issuer_mismatch(issuer, host, port)
    if said is None:
        assert found is None
    else:
        assert found is not None and found.startswith(f"This server listens on {said}: ")
        assert "Change `issuer` in the configuration" in found


def test_serve_with_a_port_the_issuer_does_not_name_warns_once_at_start(
    cli: CLI, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    with socket.socket() as taken:  # taken: serve stops right after its start
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="umaserver"):
            result = cli("serve", "--host", "127.0.0.1", "--port", str(port))
    assert result.exit_code == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"This server listens on port {port}, but the issuer http://uma.test says port 80:"
        " clients follow the issuer's URLs (the discovery document), not this one. Change"
        " `issuer` in the configuration to match, or serve where it says."
    ]


def test_serve_sets_its_startup_objects_aside_from_garbage_collection_before_it_serves(
    cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app, the modules and the rule file live as long as the process: a full collection
    must not walk them again and again while requests wait (serving.freeze_startup_objects)."""
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    frozen_when_served: list[int] = []

    class Server:
        effective_host, effective_port = "127.0.0.1", 1

        def run(self) -> None:
            frozen_when_served.append(gc.get_freeze_count())
            gc.unfreeze()  # this is pytest's process: give its objects back to the collector

    monkeypatch.setattr("umaserver.serving.make_server", lambda *args: Server())
    assert gc.get_freeze_count() == 0
    result = cli("serve")
    assert result.exit_code == 0, result.stderr
    assert frozen_when_served and frozen_when_served[0] > 10_000


def test_the_wsgi_module_sets_its_startup_objects_aside_too(config_path: Path) -> None:
    """`app.py`, which gunicorn and waitress-serve import, does what `serve` does."""
    shown = subprocess.run(
        [sys.executable, "-c", "import gc, app; print(gc.get_freeze_count())"],
        cwd=ROOT,
        env={**os.environ, "UMASERVER_CONFIG": str(config_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(shown.stdout.split()[-1]) > 10_000


# -- user names and clients' own names are apart -----------------------------------------------


@pytest.mark.parametrize("username", ["client:abc", "alice:admin", ":", "client:"])
def test_a_username_with_a_colon_is_refused(cli: CLI, store: Store, username: str) -> None:
    result = cli("user", "create", username)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "The username must not contain ':': names like client:<id> belong to clients acting for"
        " themselves."
    )
    assert stored_user(store, username) is None


def test_the_service_refuses_a_colon_too(store: Store) -> None:
    with pytest.raises(accounts.ReservedUsername, match="must not contain ':'"):
        accounts.create_user(store, 0, "client:abc", None, {})
    assert stored_user(store, "client:abc") is None


def user_from_before_names_were_checked(database: Path, username: str) -> None:
    """A user stored as an older version did, without the check (through the contract)."""
    store = open_store(database)
    try:
        assert store.add_user(User(f"sub-{username}", username, None, {}), 0)
    finally:
        store.close()


def test_init_and_serve_refuse_a_database_holding_a_user_named_with_a_colon(
    cli: CLI, config_path: Path, config: Config
) -> None:
    cli.json("init")
    user_from_before_names_were_checked(config.database, "client:abc")
    user_from_before_names_were_checked(config.database, "bob:x")
    expected = (
        "The database holds users whose names contain ':', which names clients acting for"
        " themselves (client:<id>): 'bob:x', 'client:abc'. Rename or remove them (back the"
        " database up first), then start again."
    )
    for command in (["init"], ["serve", "--port", "0"], ["client", "create", "--name", "x"]):
        result = cli(*command)
        assert result.exit_code == 1, command
        assert result.stderr.strip() == expected
    with pytest.raises(accounts.ClashingUsernames) as caught:
        create_app(config)
    assert caught.value.usernames == ["bob:x", "client:abc"]


# -- identities at external OpenID Connect providers, linked to users ----------------------------

OP = "https://op.example"


@pytest.fixture
def linking_cli(tmp_path: Path) -> CLI:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    (tmp_path / "jwks.json").write_text(json.dumps(jwks_of([make_rsa_key("k")])))
    extra = (
        f'[[oidc_issuers]]\nissuer = "{OP}"\njwks_file = "jwks.json"\n'
        'client_id = "uma"\nclient_secret = "s"\n'
    )
    return CLI(write_config(tmp_path, extra=extra))


def test_user_link_and_unlink(linking_cli: CLI) -> None:
    cli = linking_cli
    alice = cli.json("user", "create", "alice")["sub"]
    assert cli.json("user", "link", "alice", "--issuer", OP, "--subject", "a-1") == {
        "username": "alice",
        "linked": {"issuer": OP, "subject": "a-1"},
    }
    cli.json("user", "link", "alice", "--issuer", OP, "--subject", "a-2")
    assert cli.json("user", "list") == {
        "users": [
            {
                "username": "alice",
                "sub": alice,
                "links": [{"issuer": OP, "subject": "a-1"}, {"issuer": OP, "subject": "a-2"}],
            }
        ]
    }
    assert cli.json("user", "unlink", "alice", "--issuer", OP, "--subject", "a-1") == {
        "username": "alice",
        "unlinked": {"issuer": OP, "subject": "a-1"},
    }
    (listed,) = cli.json("user", "list")["users"]
    assert listed["links"] == [{"issuer": OP, "subject": "a-2"}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("link", "alice", "--issuer", "https://elsewhere.example", "--subject", "a"),
            "The issuer 'https://elsewhere.example' is not configured in [[oidc_issuers]]"
            " (configured: https://op.example)",
        ),
        (
            ("link", "alice", "--issuer", OP + "/", "--subject", "a"),
            "The issuer 'https://op.example/' is not configured",
        ),
        (("link", "nobody", "--issuer", OP, "--subject", "a"), "There is no user 'nobody'."),
        (
            ("link", "bob", "--issuer", OP, "--subject", "taken"),
            "The identity 'taken' at https://op.example is linked to another user ('alice');"
            " unlink it there first.",
        ),
        (
            ("link", "alice", "--issuer", OP, "--subject", "taken"),
            "The identity 'taken' at https://op.example is linked to 'alice' already.",
        ),
        (
            ("link", "alice", "--issuer", OP, "--subject", "x" * 256),
            "The subject must be 1 to 255 printable characters.",
        ),
        (
            ("unlink", "bob", "--issuer", OP, "--subject", "taken"),
            "The identity 'taken' at https://op.example is not linked to 'bob'.",
        ),
        (
            ("unlink", "alice", "--issuer", OP, "--subject", "never"),
            "The identity 'never' at https://op.example is not linked to 'alice'.",
        ),
        (("unlink", "nobody", "--issuer", OP, "--subject", "taken"), "There is no user 'nobody'."),
    ],
)
def test_user_link_and_unlink_refuse(linking_cli: CLI, args: tuple[str, ...], message: str) -> None:
    cli = linking_cli
    cli.json("user", "create", "alice")
    cli.json("user", "create", "bob")
    cli.json("user", "link", "alice", "--issuer", OP, "--subject", "taken")
    result = cli("user", *args)
    assert result.exit_code == 1
    assert message in result.stderr
    # Nothing changed.
    users = {u["username"]: u["links"] for u in cli.json("user", "list")["users"]}
    assert users == {"alice": [{"issuer": OP, "subject": "taken"}], "bob": []}


def test_user_link_without_any_configured_provider(cli: CLI) -> None:
    cli.json("user", "create", "alice")
    result = cli("user", "link", "alice", "--issuer", OP, "--subject", "a")
    assert result.exit_code == 1
    assert "(configured: none)" in result.stderr


def test_identifiers_never_read_as_options() -> None:
    """One random id in 64 would start with "-" and be taken for an option on the command line
    (a flaky `client rotate-secret <id>` showed it)."""
    assert not any(secrets_at_rest.new_id().startswith("-") for _ in range(20_000))

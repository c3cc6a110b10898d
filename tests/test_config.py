"""The TOML settings: typed, validated, every error at once, unknown keys refused, no default secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from umaserver.config import (
    ConfigError,
    FetchSettings,
    KeycloakSettings,
    Limits,
    TokenSettings,
    load_config,
)
from umaserver.sharing_config import MailSettings, SharingSettings

from .conftest import ROOT, SECRET
from .oidc_fixtures import jwks_of, make_rsa_key
from .saml_fixtures import make_idp_key

GOOD = f'''issuer = "https://uma.example"
database = "data/uma.db"
policies = "rules.toml"
secret_key = "{SECRET}"
'''


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return path


def errors_of(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    prefix = f"{tmp_path / 'c.toml'}: "
    assert all(line.startswith(prefix) for line in caught.value.errors)
    return [line.removeprefix(prefix) for line in caught.value.errors]


def test_defaults_and_relative_paths(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.issuer == "https://uma.example"
    assert config.database == tmp_path / "data" / "uma.db"
    assert config.policies == tmp_path / "rules.toml"
    assert config.limits.max_body_bytes == 1024 * 1024
    assert config.limits.claims_per_object == 500
    assert config.limits.claim_objects_per_request == 32
    assert config.limits.claims_per_ticket == 2000
    assert config.limits.claim_value_bytes == 16 * 1024
    assert config.lifetimes.ticket == 300
    assert config.lifetimes.authorization_code == 60
    assert config.lifetimes.refresh_token == 30 * 24 * 3600
    assert config.server.port == 8080
    assert config.maintenance.prune_interval == 300
    assert config.registration.open is False
    assert config.server.connection_limit == 1000
    assert config.server.request_head_timeout == 10
    assert config.server.body_timeout == 30
    assert config.server.channel_timeout == 60
    assert config.server.idle_timeout == 10
    assert config.limits.owner_rules_per_owner == 200
    assert config.limits.conditions_per_rule == 20
    assert config.limits.rule_value_bytes == 1024
    assert config.url("/rs") == "https://uma.example/rs"
    assert config.server.trusted_proxies == ()
    assert (config.sessions.idle_timeout, config.sessions.absolute_timeout) == (1800, 43200)
    assert (config.signin.max_failures, config.signin.window, config.signin.lockout) == (
        5,
        900,
        900,
    )
    assert config.signin.account_max_failures == 20
    assert config.signin.min_password_length == 12
    assert config.registration.per_address_per_hour == 20
    assert SECRET not in repr(config)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD.replace('issuer = "https://uma.example"', 'issuer = "https://uma.example/"'),
            ["issuer: must not end with a slash"],
        ),
        (
            GOOD.replace('"https://uma.example"', '"uma.example"'),
            ["issuer: must be an absolute http(s) URL"],
        ),
        (
            GOOD.replace(f'secret_key = "{SECRET}"', 'secret_key = ""'),
            [
                'secret_key: must be at least 32 characters; make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
            ],
        ),
        (GOOD.replace(f'secret_key = "{SECRET}"\n', ""), ["secret_key: missing"]),
        (GOOD + "colour = 1\n", ["colour: unknown key"]),
        (
            GOOD + "[limits]\nmax_body_bytes = 0\n",
            ["limits.max_body_bytes: must be greater than 0"],
        ),
        (GOOD + "[limits]\nmax_body = 10\n", ["limits.max_body: unknown key"]),
        (
            GOOD
            + "[limits]\nclaims_per_object = 0\nclaim_objects_per_request = -1\n"
            + 'claims_per_ticket = "many"\nclaim_value_bytes = 1.5\n',
            [
                "limits.claims_per_object: must be greater than 0",
                "limits.claim_objects_per_request: must be greater than 0",
                "limits.claims_per_ticket: must be an integer, not a string",
                "limits.claim_value_bytes: must be an integer, not a float",
            ],
        ),
        (
            GOOD + "[limits]\nclaims_per_ticket = true\n",
            ["limits.claims_per_ticket: must be an integer, not a boolean"],
        ),
        (GOOD + "[server]\nport = true\n", ["server.port: must be an integer, not a boolean"]),
        (GOOD + "[server]\nport = 70000\n", ["server.port: must be between 1 and 65535"]),
        (
            GOOD + "[server]\nconnection_limit = 0\nrequest_head_timeout = -1\n",
            [
                "server.connection_limit: must be greater than 0",
                "server.request_head_timeout: must be greater than 0",
            ],
        ),
        (
            GOOD + '[server]\nbody_timeout = "30s"\nchannel_timeout = 1.5\n',
            [
                "server.body_timeout: must be an integer, not a string",
                "server.channel_timeout: must be an integer, not a float",
            ],
        ),
        (GOOD + "[server]\nhead_timeout = 5\n", ["server.head_timeout: unknown key"]),
        (GOOD + "[server]\nidle_timeout = 0\n", ["server.idle_timeout: must be greater than 0"]),
        (
            GOOD
            + "[limits]\nowner_rules_per_owner = 0\nconditions_per_rule = -1\n"
            + "rule_value_bytes = 1.5\n",
            [
                "limits.owner_rules_per_owner: must be greater than 0",
                "limits.conditions_per_rule: must be greater than 0",
                "limits.rule_value_bytes: must be an integer, not a float",
            ],
        ),
        (
            GOOD + '[lifetimes]\nticket = "5m"\n',
            ["lifetimes.ticket: must be an integer, not a string"],
        ),
        (
            GOOD + "[lifetimes]\nauthorization_code = 0\nrefresh_token = -1\n",
            [
                "lifetimes.authorization_code: must be greater than 0",
                "lifetimes.refresh_token: must be greater than 0",
            ],
        ),
        (
            GOOD + '[lifetimes]\nauthorization_code = "1m"\nrefresh_token = 1.5\n',
            [
                "lifetimes.authorization_code: must be an integer, not a string",
                "lifetimes.refresh_token: must be an integer, not a float",
            ],
        ),
        (GOOD + "server = 3\n", ["server: must be a table, not an integer"]),
        (
            GOOD + "[maintenance]\nprune_interval = 0\n",
            ["maintenance.prune_interval: must be greater than 0"],
        ),
        (
            GOOD + '[maintenance]\nprune_interval = "5m"\n',
            ["maintenance.prune_interval: must be an integer, not a string"],
        ),
        (
            GOOD + "[maintenance]\nprune_every = 60\n",
            ["maintenance.prune_every: unknown key"],
        ),
        (GOOD + "maintenance = 1\n", ["maintenance: must be a table, not an integer"]),
        (
            GOOD + '[registration]\nopen = "yes"\n',
            ["registration.open: must be true or false, not a string"],
        ),
        (GOOD + "[registration]\nopened = true\n", ["registration.opened: unknown key"]),
        (GOOD + "registration = true\n", ["registration: must be a table, not a boolean"]),
        (
            GOOD + '[sessions]\nidle_timeout = 0\nabsolute_timeout = "12h"\nidle = 5\n',
            [
                "sessions.idle_timeout: must be greater than 0",
                "sessions.absolute_timeout: must be an integer, not a string",
                "sessions.idle: unknown key",
            ],
        ),
        (
            GOOD + "[signin]\nmax_failures = 0\nwindow = -1\nlockout = true\ntries = 3\n",
            [
                "signin.max_failures: must be greater than 0",
                "signin.window: must be greater than 0",
                "signin.lockout: must be an integer, not a boolean",
                "signin.tries: unknown key",
            ],
        ),
        (GOOD + "signin = 5\n", ["signin: must be a table, not an integer"]),
        (
            GOOD + "[signin]\nmin_password_length = 0\n",
            ["signin.min_password_length: must be greater than 0"],
        ),
        (
            GOOD + "[signin]\nmin_password_length = 1025\n",
            [
                "signin.min_password_length: must be at most 1024 (the longest password sign-in"
                " reads)"
            ],
        ),
        (
            GOOD + "[registration]\nper_address_per_hour = 0\n",
            ["registration.per_address_per_hour: must be greater than 0"],
        ),
        (
            GOOD + "[signin]\nmax_failures = 10\naccount_max_failures = 9\n",
            [
                "signin.account_max_failures: must be at least max_failures (the account from"
                " anywhere counts every address's failures)"
            ],
        ),
        (
            GOOD + '[server]\ntrusted_proxies = ["10.0.0.1", "proxy.example", "10.0.0.0/33"]\n',
            [
                "server.trusted_proxies: 'proxy.example' is not an IP address or network",
                "server.trusted_proxies: '10.0.0.0/33' is not an IP address or network",
            ],
        ),
        (
            GOOD + '[server]\ntrusted_proxies = "10.0.0.1"\n',
            ["server.trusted_proxies: must be an array of non-empty strings"],
        ),
        (
            "database = 3\n",
            [
                "issuer: missing",
                "database: must be a string, not an integer",
                "policies: missing",
                "secret_key: missing",
            ],
        ),
    ],
)
def test_every_error_is_reported_one_line_per_key(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    assert errors_of(tmp_path, text) == expected


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    (line,) = errors_of(tmp_path, "issuer = ")
    assert line.startswith("not valid TOML")
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml")


def test_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UMASERVER_CONFIG", str(write(tmp_path, GOOD)))
    assert load_config().issuer == "https://uma.example"
    monkeypatch.delenv("UMASERVER_CONFIG")
    with pytest.raises(ConfigError, match="--config FILE or set UMASERVER_CONFIG"):
        load_config()


def test_the_example_is_complete_but_has_no_secret(tmp_path: Path) -> None:
    text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
    assert errors_of(tmp_path, text) == [
        'secret_key: must be at least 32 characters; make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
    ]
    config = load_config(
        write(tmp_path, text.replace('secret_key = ""', f'secret_key = "{SECRET}"'))
    )
    assert config.issuer == "http://127.0.0.1:8080"
    assert config.limits == Limits()  # the example says the defaults
    assert config.fetch == FetchSettings()
    assert config.maintenance.prune_interval == 300
    assert config.registration.open is False
    # Open registration's limit is shown commented out, beside the one `open = false`.
    assert text.count("\nopen = false\n") == 1
    assert "\n# per_address_per_hour = 20\n" in text
    assert config.policies == tmp_path / "policies.example.toml"
    assert config.owner_rules is True


def test_the_rule_file_alone_or_a_policies_table(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, GOOD)).owner_rules is True
    table = GOOD.replace('policies = "rules.toml"\n', "")
    config = load_config(
        write(tmp_path, table + '[policies]\nfile = "r.toml"\nowner_rules = false\n')
    )
    assert (config.policies, config.owner_rules) == (tmp_path / "r.toml", False)
    config = load_config(write(tmp_path, table + '[policies]\nfile = "r.toml"\n'))
    assert (config.policies, config.owner_rules) == (tmp_path / "r.toml", True)
    assert errors_of(tmp_path, table + "[policies]\nowner_rules = 1\nowner = true\n") == [
        "policies.file: missing",
        "policies.owner_rules: must be true or false, not an integer",
        "policies.owner: unknown key",
    ]


def test_fetch_settings_are_read_and_checked(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.fetch == FetchSettings(5, 256 * 1024, 86400, 3600, False, 4)
    assert config.fetch.allow_loopback is False
    text = (
        GOOD + "[fetch]\ntimeout = 2\nmax_bytes = 1000\ncache_lifetime = 60\nretry_max = 120\n"
        "allow_loopback = true\nconcurrency = 2\n"
    )
    assert load_config(write(tmp_path, text)).fetch == FetchSettings(2, 1000, 60, 120, True, 2)
    bad = (
        GOOD + '[fetch]\ntimeout = 0\nallow_loopback = "yes"\nfollow_redirects = true\n'
        "concurrency = 0\n"
    )
    assert errors_of(tmp_path, bad) == [
        "fetch.timeout: must be greater than 0",
        "fetch.concurrency: must be greater than 0",
        "fetch.allow_loopback: must be true or false, not a string",
        "fetch.follow_redirects: unknown key",
    ]


def test_registration_may_be_opened(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD + "[registration]\nopen = true\n"))
    assert config.registration.open is True
    limited = "[registration]\nopen = true\nper_address_per_hour = 3\n"
    assert load_config(write(tmp_path, GOOD + limited)).registration.per_address_per_hour == 3
    shorter = "[signin]\nmin_password_length = 8\n"
    assert load_config(write(tmp_path, GOOD + shorter)).signin.min_password_length == 8


# -- claims, SAML identity providers, OpenID Connect issuers -------------------------------------

OP = '[[oidc_issuers]]\nissuer = "https://op.example"\naudiences = ["app"]\n'
IDP = '[[saml_idps]]\nentity_id = "https://idp.example"\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[claims]\nclock_skew = -1\nsaml_allow_sha1 = "no"\ncolour = 1\n',
            [
                "claims.clock_skew: must not be negative",
                "claims.saml_allow_sha1: must be true or false, not a string",
                "claims.colour: unknown key",
            ],
        ),
        ("saml_idps = 3\n", ["saml_idps: must be an array of tables ([[saml_idps]])"]),
        (IDP, ["saml_idps[0].certificates: missing"]),
        (IDP + "certificates = []\n", ["saml_idps[0].certificates: must not be empty"]),
        (
            IDP + 'certificates = ["absent.pem"]\n',
            [
                "saml_idps[0].certificates[0]: cannot read {dir}/absent.pem: No such file or directory"
            ],
        ),
        (
            IDP + 'certificates = ["idp.pem"]\nattributes = []\nname_id_as_sub = "yes"\n',
            [
                "saml_idps[0].attributes: must not be empty",
                "saml_idps[0].name_id_as_sub: must be true or false, not a string",
            ],
        ),
        (
            IDP + 'certificates = ["idp.pem"]\n' + IDP + 'certificates = ["idp.pem"]\n',
            ["saml_idps: the entity_id 'https://idp.example' is listed twice"],
        ),
        (OP, ["oidc_issuers[0]: give exactly one of jwks_file and jwks_uri"]),
        (
            OP + 'jwks_file = "jwks.json"\njwks_uri = "https://op.example/jwks"\n',
            ["oidc_issuers[0]: give exactly one of jwks_file and jwks_uri"],
        ),
        (
            OP + 'jwks_uri = "http://op.example/jwks"\n',
            [
                "oidc_issuers[0]: 'jwks_uri' of OIDC issuer 'https://op.example' must use https;"
                " plain http is allowed only for loopback hosts (127.0.0.0/8, ::1, localhost)"
            ],
        ),
        (
            OP + 'jwks_file = "absent.json"\n',
            [
                "oidc_issuers[0]: JWKS file '{dir}/absent.json' of OIDC issuer"
                " 'https://op.example' cannot be read: No such file or directory"
            ],
        ),
        (
            OP + 'jwks_file = "jwks.json"\nalgorithms = []\ncolour = 1\n',
            [
                "oidc_issuers[0].algorithms: must not be empty",
                "oidc_issuers[0].colour: unknown key",
            ],
        ),
        (
            OP + 'jwks_file = "jwks.json"\nalgorithms = ["HS256"]\n',
            [
                "oidc_issuers[0]: algorithm 'HS256' of OIDC issuer 'https://op.example' is not"
                " allowed for ID tokens; use asymmetric ones: ES256, ES384, ES512, Ed25519,"
                " EdDSA, PS256, PS384, PS512, RS256, RS384, RS512"
            ],
        ),
        (
            OP + 'jwks_file = "jwks.json"\n' + OP + 'jwks_file = "jwks.json"\n',
            ["oidc_issuers: the issuer 'https://op.example' is listed twice"],
        ),
        (
            "[claims]\nid_token_max_lifetime = 0\n[claims.x]\n",
            [
                "claims.id_token_max_lifetime: must be greater than 0",
                "claims.x: unknown key",
            ],
        ),
        (
            '[claims]\nid_token_max_lifetime = "1 day"\n',
            ["claims.id_token_max_lifetime: must be an integer, not a string"],
        ),
        (
            OP + 'jwks_file = "jwks.json"\nclient_audiences = ["app"]\n',
            ["oidc_issuers[0].client_audiences: must be a table of non-empty strings"],
        ),
        (
            OP + 'jwks_file = "jwks.json"\nclient_audiences = { "cl-1" = "" }\n',
            ["oidc_issuers[0].client_audiences: must be a table of non-empty strings"],
        ),
        (
            '[[oidc_issuers]]\nissuer = "https://op.example"\njwks_file = "jwks.json"\n',
            ["oidc_issuers[0].audiences: missing"],
        ),
        (
            IDP + 'certificates = ["idp.pem"]\nrecipients = []\n',
            ["saml_idps[0].recipients: must not be empty"],
        ),
        (
            IDP + 'certificates = ["idp.pem"]\nrecipients = "https://app.example/acs"\n',
            ["saml_idps[0].recipients: must be an array of non-empty strings"],
        ),
    ],
)
def test_claim_sources_are_checked_with_everything_else(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    (tmp_path / "idp.pem").write_text(make_idp_key().certificate_pem, encoding="utf-8")
    (tmp_path / "jwks.json").write_text(json.dumps(jwks_of([make_rsa_key("k")])))
    lines = [line.replace("{dir}", str(tmp_path)) for line in expected]
    # Reported together with an error elsewhere in the file: every error at once.
    assert errors_of(tmp_path, GOOD + "colour = 1\n" + text) == [*lines, "colour: unknown key"]


def test_the_examples_of_claim_sources_work_once_uncommented(tmp_path: Path) -> None:
    text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
    text = text.replace('secret_key = ""', f'secret_key = "{SECRET}"')
    # Uncomment the example tables: lines "# [[...]]", "# key = value" below them.
    start = text.index("# [[saml_idps]]")
    head, examples = text[:start], text[start:]
    uncommented = "\n".join(
        line[2:] if line.startswith("# ") and ("=" in line or line.startswith("# [[")) else line
        for line in examples.splitlines()
    )
    (tmp_path / "idp-signing.pem").write_text(make_idp_key().certificate_pem, encoding="utf-8")
    config = load_config(write(tmp_path, head + uncommented + "\n"))
    (idp,) = config.saml_idps
    assert idp.entity_id == "https://idp.example.com/saml"
    assert idp.attributes == ("mail", "eduPersonAffiliation")
    (issuer,) = config.oidc_issuers
    assert issuer.jwks_uri == "https://accounts.example.com/.well-known/jwks.json"
    assert issuer.algorithms == ("RS256", "ES256")
    assert dict(issuer.client_audiences) == {"cl-photo-app": "photo-client-at-example"}
    assert issuer.signs_in and issuer.discovers and issuer.display_name == "Example Accounts"
    assert idp.recipients == ("https://photo-app.example.com/saml/acs",)
    assert config.claims.id_token_max_lifetime == 86400


def test_an_oidc_issuer_may_name_audiences_per_client_only(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text(json.dumps(jwks_of([make_rsa_key("k")])))
    text = (
        GOOD + '[[oidc_issuers]]\nissuer = "https://op.example"\njwks_file = "jwks.json"\n'
        'client_audiences = { "cl-1" = "app-1", "cl-2" = "app-2" }\n'
    )
    (issuer,) = load_config(write(tmp_path, text)).oidc_issuers
    assert issuer.audiences == ()
    assert dict(issuer.client_audiences) == {"cl-1": "app-1", "cl-2": "app-2"}


def test_sign_in_settings_are_read(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            GOOD
            + '[server]\ntrusted_proxies = ["127.0.0.1", "10.0.0.0/8", "::1"]\n'
            + "[sessions]\nidle_timeout = 60\nabsolute_timeout = 600\n"
            + "[signin]\nmax_failures = 3\nwindow = 30\nlockout = 120\n",
        )
    )
    assert config.server.trusted_proxies == ("127.0.0.1", "10.0.0.0/8", "::1")
    assert (config.sessions.idle_timeout, config.sessions.absolute_timeout) == (60, 600)
    assert (config.signin.max_failures, config.signin.window, config.signin.lockout) == (3, 30, 120)


# -- sign-in providers: OpenID Connect providers people sign in at ------------------------------

RP = (
    '[[oidc_issuers]]\nissuer = "https://op.example"\njwks_file = "jwks.json"\n'
    'client_id = "uma-at-op"\nclient_secret = "s3cret"\n'
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[[oidc_issuers]]\nissuer = "https://op.example"\njwks_file = "jwks.json"\n'
            'client_id = "uma-at-op"\n',
            ["oidc_issuers[0].client_secret: missing (client_id is given)"],
        ),
        (
            OP + 'jwks_file = "jwks.json"\nclient_secret = "s"\nscopes = ["openid"]\n',
            [
                "oidc_issuers[0]: client_secret, scopes only apply to a sign-in provider;"
                " give its client_id too"
            ],
        ),
        (
            OP + 'jwks_file = "jwks.json"\ntoken_endpoint = "https://op.example/token"\n',
            [
                "oidc_issuers[0]: token_endpoint only apply to a sign-in provider;"
                " give its client_id too"
            ],
        ),
        (
            RP + 'client_id = ""\n'.replace("client_id", "display_name"),
            ["oidc_issuers[0].display_name: must not be empty"],
        ),
        (
            RP + 'scopes = ["email", "profile"]\n',
            [
                "oidc_issuers[0]: 'scopes' of OIDC issuer 'https://op.example' must include"
                ' "openid" (OpenID Connect sign-in)'
            ],
        ),
        (RP + "scopes = []\n", ["oidc_issuers[0].scopes: must not be empty"]),
        (
            RP + 'scopes = "openid"\n',
            ["oidc_issuers[0].scopes: must be an array of non-empty strings"],
        ),
        (
            RP + 'authorization_endpoint = "https://op.example/auth"\n',
            [
                "oidc_issuers[0]: OIDC issuer 'https://op.example': give both"
                " 'authorization_endpoint' and 'token_endpoint' (or neither, to find them by"
                " discovery)"
            ],
        ),
        (
            RP + 'userinfo_endpoint = "https://op.example/me"\n',
            [
                "oidc_issuers[0]: OIDC issuer 'https://op.example': 'userinfo_endpoint' is given"
                " with the other endpoints (or found by discovery with them)"
            ],
        ),
        (
            RP + 'authorization_endpoint = "https://op.example/auth"\n'
            'token_endpoint = "http://op.example/token"\n',
            [
                "oidc_issuers[0]: 'token_endpoint' of OIDC issuer 'https://op.example' must use"
                " https; plain http is allowed only for loopback hosts (127.0.0.0/8, ::1,"
                " localhost)"
            ],
        ),
        (
            RP + 'authorization_endpoint = "op.example/auth"\n'
            'token_endpoint = "https://op.example/token"\n',
            [
                "oidc_issuers[0]: 'authorization_endpoint' of OIDC issuer 'https://op.example'"
                " must be an absolute http(s) URL"
            ],
        ),
        (
            RP.replace("https://op.example", "http://op.example"),
            [
                "oidc_issuers[0]: 'issuer' of OIDC issuer 'http://op.example' must use https"
                " (its endpoints are found by discovery); plain http is allowed only for"
                " loopback hosts (127.0.0.0/8, ::1, localhost)"
            ],
        ),
        (
            "[claims]\nprovider_timeout = 0\nprovider_max_bytes = -1\n",
            [
                "claims.provider_timeout: must be greater than 0",
                "claims.provider_max_bytes: must be greater than 0",
            ],
        ),
    ],
)
def test_sign_in_providers_are_checked_with_everything_else(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    (tmp_path / "jwks.json").write_text(json.dumps(jwks_of([make_rsa_key("k")])))
    assert errors_of(tmp_path, GOOD + "colour = 1\n" + text) == [*expected, "colour: unknown key"]


def test_a_sign_in_provider_needs_no_audiences_and_has_defaults(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text(json.dumps(jwks_of([make_rsa_key("k")])))
    (issuer,) = load_config(write(tmp_path, GOOD + RP)).oidc_issuers
    assert issuer.signs_in and issuer.discovers
    assert (issuer.client_id, issuer.client_secret) == ("uma-at-op", "s3cret")
    assert "s3cret" not in repr(issuer)
    assert issuer.audiences == ()
    assert issuer.scopes == ("openid", "email", "profile")
    assert issuer.display_name == "https://op.example"
    assert issuer.discovery_url == "https://op.example/.well-known/openid-configuration"
    assert issuer.authorization_endpoint is None


def test_a_sign_in_provider_with_its_endpoints_given(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text(json.dumps(jwks_of([make_rsa_key("k")])))
    text = (
        GOOD
        + RP.replace("https://op.example", "http://127.0.0.1:9000")
        + 'display_name = "Example ID"\nscopes = ["openid", "email"]\naudiences = ["app"]\n'
        'authorization_endpoint = "http://127.0.0.1:9000/auth"\n'
        'token_endpoint = "http://127.0.0.1:9000/token"\n'
        'userinfo_endpoint = "http://localhost:9000/me"\n'
    )
    (issuer,) = load_config(write(tmp_path, text)).oidc_issuers
    assert issuer.signs_in and not issuer.discovers
    assert issuer.display_name == "Example ID"
    assert issuer.scopes == ("openid", "email")
    assert issuer.audiences == ("app",)
    assert issuer.userinfo_endpoint == "http://localhost:9000/me"


def test_an_issuer_without_client_id_does_not_sign_in(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text(json.dumps(jwks_of([make_rsa_key("k")])))
    (issuer,) = load_config(write(tmp_path, GOOD + OP + 'jwks_file = "jwks.json"\n')).oidc_issuers
    assert not issuer.signs_in and not issuer.discovers
    assert issuer.display_name == "https://op.example"


def test_the_keycloak_and_tokens_examples_work_once_uncommented(tmp_path: Path) -> None:
    text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
    text = text.replace('secret_key = ""', f'secret_key = "{SECRET}"')
    assert load_config(write(tmp_path, text)).keycloak == KeycloakSettings(realm=None)
    for table in ("[keycloak]", "[tokens]"):
        start = text.index(f"# {table}")
        end = text.index("\n\n", start)
        lines = text[start:end].splitlines()
        block = "\n".join(line[2:] for line in lines if not line.startswith("# # "))
        text = text[:start] + block + text[end:]
    config = load_config(write(tmp_path, text))
    assert config.keycloak == KeycloakSettings("demo", "urn:umaserver:claim-type:jwt")
    assert config.tokens == TokenSettings("jwt", "RS256")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[keycloak]\nrealm = "a/b"\n',
            ["keycloak.realm: must be letters, digits, '-', '_' or '.' (a path segment)"],
        ),
        ("[keycloak]\n", ["keycloak.realm: missing"]),
        ('[keycloak]\nclaim_token_type = "x"\n', ["keycloak.realm: missing"]),
        (
            '[keycloak]\nrealm = "r"\nclaim_token_type = "urn:umaserver:claim-type:account"\n',
            [
                "keycloak.claim_token_type: must not be the account claims' type: clients may never push that"
            ],
        ),
        ('[tokens]\nrpt_format = "JWT"\n', ["tokens.rpt_format: must be one of opaque, jwt"]),
        (
            '[tokens]\njwt_algorithm = "HS256"\n',
            ["tokens.jwt_algorithm: must be one of RS256, ES256"],
        ),
        ('[tokens]\nformat = "jwt"\n', ["tokens.format: unknown key"]),
    ],
)
def test_keycloak_and_tokens_errors(tmp_path: Path, text: str, expected: list[str]) -> None:
    assert errors_of(tmp_path, GOOD + text) == expected


def test_sharing_settings_default_and_are_checked(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.sharing == SharingSettings()
    assert (config.sharing.poll_interval, config.sharing.request_lifetime) == (5, 604800)
    assert config.mail is None
    config = load_config(
        write(tmp_path, GOOD + "[sharing]\nrequests = false\nmax_pending_requests = 3\n")
    )
    assert (config.sharing.requests, config.sharing.max_pending_requests) == (False, 3)
    assert errors_of(
        tmp_path, GOOD + '[sharing]\npoll_interval = 0\nrequests = "yes"\nask = true\n'
    ) == [
        "sharing.requests: must be true or false, not a string",
        "sharing.poll_interval: must be greater than 0",
        "sharing.ask: unknown key",
    ]


def test_mail_settings_read_the_password_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mail = '[mail]\nhost = "smtp.example.org"\nfrom = "Photos <photos@example.org>"\n'
    config = load_config(write(tmp_path, GOOD + mail))
    assert config.mail == MailSettings(
        host="smtp.example.org", from_address="Photos <photos@example.org>"
    )
    assert (config.mail.port, config.mail.security, config.mail.password) == (587, "starttls", None)
    config = load_config(write(tmp_path, GOOD + mail + 'security = "tls"\n'))
    assert config.mail is not None and config.mail.port == 465
    monkeypatch.setenv("MAIL_PW", "s3cret")
    config = load_config(
        write(tmp_path, GOOD + mail + 'username = "photos"\npassword_env = "MAIL_PW"\n')
    )
    assert config.mail is not None and config.mail.password == "s3cret"
    assert "s3cret" not in repr(config)
    (tmp_path / "pw").write_text("from-a-file\n", encoding="utf-8")
    config = load_config(
        write(tmp_path, GOOD + mail + 'username = "photos"\npassword_file = "pw"\n')
    )
    assert config.mail is not None and config.mail.password == "from-a-file"


def test_mail_settings_name_every_problem(tmp_path: Path) -> None:
    assert errors_of(tmp_path, GOOD + "[mail]\n") == ["mail.host: missing", "mail.from: missing"]
    assert errors_of(
        tmp_path,
        GOOD
        + '[mail]\nhost = "h"\nfrom = "nobody"\nsecurity = "ssl"\nport = 0\n'
        + 'username = "u"\npassword_env = "NOT_SET_ANYWHERE"\npassword_file = "x"\n',
    ) == [
        "mail.from: must be an e-mail address (photos@example.org or Photos <photos@example.org>)",
        "mail.security: must be one of starttls, tls, none",
        "mail.port: must be between 1 and 65535",
        "mail: give at most one of password_env and password_file",
    ]
    assert errors_of(
        tmp_path, GOOD + '[mail]\nhost = "h"\nfrom = "a@b.org"\npassword_env = "NOT_SET_ANYWHERE"\n'
    ) == [
        "mail.password_env: the environment variable NOT_SET_ANYWHERE is not set",
        "mail: a password is given without a username",
    ]
    assert errors_of(tmp_path, GOOD + '[mail]\nhost = "h"\nfrom = "a@b.org"\nusername = "u"\n') == [
        "mail: username is given: give password_env or password_file too"
    ]


ROTATED = "a-new-secret-key-for-the-rotation-0123456789"


def test_secret_keys_rotate_the_secret_key(tmp_path: Path) -> None:
    rotating = GOOD.replace(f'secret_key = "{SECRET}"', f'secret_keys = ["{ROTATED}", "{SECRET}"]')
    config = load_config(write(tmp_path, rotating))
    assert config.secret_keys == (ROTATED, SECRET)
    assert config.secret_key == ROTATED  # the first signs and derives
    assert ROTATED not in repr(config) and SECRET not in repr(config)
    assert load_config(write(tmp_path, GOOD)).secret_keys == (SECRET,)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            f'secret_key = "{SECRET}"\nsecret_keys = ["{ROTATED}"]',
            ["secret_key: give secret_key or secret_keys, not both"],
        ),
        ("secret_keys = []", ["secret_keys: must not be empty"]),
        (f'secret_keys = "{SECRET}"', ["secret_keys: must be an array of non-empty strings"]),
        (f'secret_keys = ["{SECRET}", ""]', ["secret_keys: must be an array of non-empty strings"]),
        (
            f'secret_keys = ["{ROTATED}", "too-short"]',
            [
                'secret_keys[1]: must be at least 32 characters; make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
            ],
        ),
        (f'secret_keys = ["{SECRET}", "{SECRET}"]', ["secret_keys: a key is listed twice"]),
    ],
    ids=["both", "empty", "a string", "an empty key", "a short key", "a repeated key"],
)
def test_secret_keys_errors(tmp_path: Path, keys: str, expected: list[str]) -> None:
    errors = errors_of(tmp_path, GOOD.replace(f'secret_key = "{SECRET}"', keys))
    assert errors == expected
    assert not any(SECRET in line or ROTATED in line for line in errors)  # never echoed


def test_the_example_documents_secret_keys_in_a_comment(tmp_path: Path) -> None:
    text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
    assert text.count('\nsecret_key = ""\n') == 1
    (line,) = [line for line in text.splitlines() if "secret_keys =" in line]
    assert line.startswith("# secret_keys = [")
    uncommented = text.replace('secret_key = ""\n', "").replace(line, line.removeprefix("# "))
    uncommented = uncommented.replace('"the-new-key"', f'"{ROTATED}"').replace(
        '"the-old-key"', f'"{SECRET}"'
    )
    assert load_config(write(tmp_path, uncommented)).secret_keys == (ROTATED, SECRET)

"""Settings: one TOML file, read once with `tomllib` into a typed, validated object.

Every error is collected and reported at once, one line per key; unknown keys are refused, so a typo
never silently falls back to a default; there is no default secret.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .claim_issuers_config import oidc_issuer, saml_idp
from .claims.model import ACCOUNT_CLAIM_TYPE
from .claims.oidc_issuers import OidcIssuer
from .claims.saml import SamlIdp
from .operations_config import LoggingSettings, MetricsSettings, logging_settings, metrics_settings
from .sharing_config import MailSettings, SharingSettings, mail_settings, sharing_settings
from .storage import Database, PostgreSQLSettings, is_postgresql
from .storage.postgresql import MISSING_DRIVER, driver_missing
from .toml_reader import TableReader, non_empty, positive, valid_port

T = TypeVar("T")

CONFIG_ENV = "UMASERVER_CONFIG"
MIN_SECRET_LENGTH = 32
# The longest password sign-in reads (a longer one is refused unchecked): so also the longest one
# a person may be given.
MAX_PASSWORD_LENGTH = 1024


class ConfigError(Exception):
    """The configuration file is missing or invalid; `errors` holds one line per problem."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    threads: int = 8
    # Connections waitress holds open at once; past it, new ones wait in the listen backlog.
    connection_limit: int = 1000
    # Seconds a request's line and headers may take to arrive, however slowly they trickle.
    request_head_timeout: int = 10
    # Seconds a request's body may take to arrive, counted from the end of its headers.
    body_timeout: int = 30
    # Seconds an idle connection (between requests) is kept open.
    channel_timeout: int = 60
    # Seconds an idle connection is kept open while more than half of `connection_limit` is in use.
    idle_timeout: int = 10
    # Addresses (or networks) of reverse proxies whose X-Forwarded-For is believed.
    trusted_proxies: tuple[str, ...] = ()


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 1024 * 1024
    # Pushed claims: past any of these, 400 invalid_request naming the limit, nothing recorded.
    claims_per_object: int = 500
    claim_objects_per_request: int = 32
    claims_per_ticket: int = 2000
    claim_value_bytes: int = 16 * 1024
    # Shares one owner may have at once (issue 25), counted apart from their other rules.
    shares_per_owner: int = 1000
    # Owners' own rules (issue 27): rules per owner (shares apart), conditions per rule, and the
    # bytes (UTF-8) of one value, hint, description or name in a rule.
    owner_rules_per_owner: int = 200
    conditions_per_rule: int = 20
    rule_value_bytes: int = 1024


@dataclass(frozen=True)
class Lifetimes:
    access_token: int = 3600
    rpt: int = 3600
    ticket: int = 300
    permission: int = 3600
    authorization_code: int = 60
    refresh_token: int = 30 * 24 * 3600
    claims_handle: int = 600
    pct: int = 30 * 24 * 3600


@dataclass(frozen=True)
class ClaimSettings:
    clock_skew: int = 120
    saml_max_bytes: int = 256 * 1024
    saml_allow_sha1: bool = False
    jwks_fetch_timeout: int = 5
    jwks_max_bytes: int = 64 * 1024
    jwks_refresh: int = 3600
    id_token_max_lifetime: int = 86400
    # Calls to a sign-in provider (discovery, code exchange, userinfo): seconds, and bytes of an
    # answer at most.
    provider_timeout: int = 5
    provider_max_bytes: int = 64 * 1024


@dataclass(frozen=True)
class SessionSettings:
    # Seconds a session lives without a request, and at most from its sign-in.
    idle_timeout: int = 1800
    absolute_timeout: int = 43200


@dataclass(frozen=True)
class SigninSettings:
    # `max_failures` failed sign-ins from one address within `window` seconds lock the account
    # from that address, and `account_max_failures` from anywhere lock it from everywhere, for
    # `lockout` seconds. The account-wide count is higher, so that someone who only knows a
    # username cannot lock its owner out with a handful of guesses.
    max_failures: int = 5
    account_max_failures: int = 20
    window: int = 900
    lockout: int = 900
    # The fewest characters of a password `user create`, `user set-password`, `seed apply` and the
    # invitation form accept (the most is what sign-in reads: MAX_PASSWORD_LENGTH).
    min_password_length: int = 12


@dataclass(frozen=True)
class MaintenanceSettings:
    prune_interval: int = 300


@dataclass(frozen=True)
class AuditSettings:
    # `[audit] keep_days`: how long the access history keeps an event; the maintenance job prunes
    # older ones.
    keep_days: int = 90


@dataclass(frozen=True)
class RegistrationSettings:
    # Whether anyone may register a client at /register; when false (the default), registering
    # takes an initial access token from `registration-token issue`.
    open: bool = False
    # Open registration: at most this many clients registered from one address (after
    # `[server] trusted_proxies`) in any hour; one with an initial access token is not counted.
    per_address_per_hour: int = 20


@dataclass(frozen=True)
class FetchSettings:
    # Fetching what registrations point at (scope descriptions, icons, logos, client pages), in
    # the background: seconds for a whole exchange, bytes of a body at most, seconds a result is
    # kept before it is fetched again, and the longest wait (seconds) between retries after
    # failures (the wait doubles from 30 s up to it).
    timeout: int = 5
    max_bytes: int = 256 * 1024
    cache_lifetime: int = 86400
    retry_max: int = 3600
    # Lets fetches reach 127.0.0.0/8 and ::1 (tests, local development); never other private
    # addresses.
    allow_loopback: bool = False
    # How many fetches run at once (threads of each process's job); due URIs are taken
    # round-robin by the registration that queued them.
    concurrency: int = 4


RPT_FORMATS = ("opaque", "jwt")
JWT_ALGORITHMS = ("RS256", "ES256")


@dataclass(frozen=True)
class KeycloakSettings:
    # `[keycloak]`: Keycloak's URL layout for one realm (/realms/NAME/...), beside the standard
    # paths; None (the table absent): none of those paths exist.
    realm: str | None = None
    # The claim type of the claims a client pushes as a claim token of the format
    # urn:ietf:params:oauth:token-type:jwt (Keycloak's); a client pushes it only when it was
    # created or registered with it (--push-claims), as any type.
    claim_token_type: str = "urn:umaserver:claim-type:jwt"  # noqa: S105 (a claim type)


@dataclass(frozen=True)
class TokenSettings:
    # `[tokens]`: "opaque" RPTs (the default), or "jwt": RPTs signed with this server's key
    # (`jwt_algorithm`), published at /jwks.
    rpt_format: str = "opaque"
    jwt_algorithm: str = "RS256"


@dataclass(frozen=True)
class Config:
    issuer: str
    # An SQLite file's path, or a PostgreSQL URL (a str starting with postgresql://), which may
    # hold a password: kept out of repr, named with `storage.describe`.
    database: Database = field(repr=False)
    policies: Path
    # `secret_key`, or `secret_keys` (rotation): the first signs and derives, every one verifies.
    secret_keys: tuple[str, ...] = field(repr=False)
    # `[policies] owner_rules`: owners' own rules (made on their policy pages) count in decisions
    # and may be edited; when false they are ignored and cannot be changed (the file's rules stay).
    owner_rules: bool = True
    server: ServerSettings = ServerSettings()
    limits: Limits = Limits()
    lifetimes: Lifetimes = Lifetimes()
    claims: ClaimSettings = ClaimSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    audit: AuditSettings = AuditSettings()
    registration: RegistrationSettings = RegistrationSettings()
    sessions: SessionSettings = SessionSettings()
    signin: SigninSettings = SigninSettings()
    fetch: FetchSettings = FetchSettings()
    keycloak: KeycloakSettings = KeycloakSettings()
    tokens: TokenSettings = TokenSettings()
    # `[sharing]`: invitations and requests to owners; `[mail]`: notices by e-mail (None: the
    # table is absent, and notices show on the pages only).
    sharing: SharingSettings = field(default_factory=SharingSettings)
    mail: MailSettings | None = None
    # `[metrics]`: the Prometheus endpoint; `[logging]`: how log lines are written.
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    # `[postgresql]`: the connections of a PostgreSQL database (only with a postgresql:// URL).
    postgresql: PostgreSQLSettings = field(default_factory=PostgreSQLSettings)
    saml_idps: tuple[SamlIdp, ...] = ()
    oidc_issuers: tuple[OidcIssuer, ...] = ()
    source: Path | None = None

    @property
    def secret_key(self) -> str:
        """The key that signs and derives now (the first of `secret_keys`)."""
        return self.secret_keys[0]

    def url(self, path: str) -> str:
        """An absolute URL of this server: every URL it hands out is built from `issuer`."""
        return self.issuer + path


def _issuer(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "must be an absolute http(s) URL"
    if value.endswith("/"):
        return "must not end with a slash"
    if parts.query or parts.fragment:
        return "must not have a query or fragment"
    return None


def _secret(value: str) -> str | None:
    if len(value) < MIN_SECRET_LENGTH:
        return (
            f"must be at least {MIN_SECRET_LENGTH} characters; make one with: "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    return None


def _secret_keys(top: TableReader) -> tuple[str, ...]:
    """`secret_key = "..."`, or `secret_keys = ["new", "old"]` while rotating: one of the two."""
    if "secret_keys" not in top.table:
        return (top.take("secret_key", str, check=_secret),)
    if "secret_key" in top.table:
        top.table.pop("secret_key")
        top.errors.append("secret_key: give secret_key or secret_keys, not both")
    keys = top.strings("secret_keys", required=True)
    for index, key in enumerate(keys):
        if (problem := _secret(key)) is not None:
            top.errors.append(f"secret_keys[{index}]: {problem}")
    if len(set(keys)) < len(keys):  # never echoed: a key is a secret
        top.errors.append("secret_keys: a key is listed twice")
    return keys or ("",)


def _database(value: str) -> str | None:
    """A path, or a PostgreSQL URL that libpq can read (its password is never echoed)."""
    if not value.strip():
        return "must not be empty"
    if not is_postgresql(value):
        return None
    if driver_missing():  # installed without the extra
        return MISSING_DRIVER
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(value)
    except ProgrammingError:
        return "is not a PostgreSQL connection URL that libpq can read"
    return None


def _postgresql(reader: TableReader, database: str | None) -> PostgreSQLSettings:
    defaults = PostgreSQLSettings()
    if reader.table and database is not None and not is_postgresql(database):
        reader.errors.append(
            'postgresql: only applies to a PostgreSQL database (database = "postgresql://...")'
        )
    settings = PostgreSQLSettings(
        pool_min=reader.take("pool_min", int, defaults.pool_min, _not_negative),
        pool_max=reader.take("pool_max", int, defaults.pool_max, positive),
        connect_timeout=reader.take("connect_timeout", int, defaults.connect_timeout, positive),
    )
    reader.finish()
    if settings.pool_max < settings.pool_min:
        reader.errors.append("postgresql.pool_max: must be at least pool_min")
    return settings


def _keycloak(reader: TableReader, present: bool) -> KeycloakSettings:
    if not present:
        reader.finish()
        return KeycloakSettings()
    settings = KeycloakSettings(
        realm=reader.take("realm", str, check=_realm),
        claim_token_type=reader.take(
            "claim_token_type", str, KeycloakSettings.claim_token_type, _claim_token_type
        ),
    )
    reader.finish()
    return settings


def _realm(value: str) -> str | None:
    # A path segment as Keycloak's realm names are in practice: no slash, nothing to escape.
    if not value or not all(c.isascii() and (c.isalnum() or c in "-_.") for c in value):
        return "must be letters, digits, '-', '_' or '.' (a path segment)"
    if value in (".", ".."):
        return "must not be '.' or '..'"
    return None


def _claim_token_type(value: str) -> str | None:
    if not value.strip():
        return "must not be empty"
    if value == ACCOUNT_CLAIM_TYPE:
        return "must not be the account claims' type: clients may never push that"
    return None


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    return check


def _not_negative(value: int) -> str | None:
    return None if value >= 0 else "must not be negative"


def _proxies(reader: TableReader) -> tuple[str, ...]:
    proxies = reader.strings("trusted_proxies")
    for value in proxies:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            reader.errors.append(
                f"{reader.where}.trusted_proxies: {value!r} is not an IP address or network"
            )
    return proxies


def _no_repeats(table: str, values: list[str], key: str, errors: list[str]) -> None:
    for value in sorted({v for v in values if values.count(v) > 1}):
        errors.append(f"{table}: the {key} {value!r} is listed twice")


def parse_config(data: dict[str, Any], base: Path, source: Path | None = None) -> Config:
    """Validate a parsed TOML document; relative paths are taken relative to `base`."""
    errors: list[str] = []
    top = TableReader(data, "", errors)
    issuer = top.take("issuer", str, check=_issuer)
    database = top.take("database", str, check=_database)
    # `policies = "FILE"`, or a table: `[policies]` with `file` and `owner_rules`.
    if isinstance(top.table.get("policies"), dict):
        section = top.section("policies")
        policies = section.take("file", str, check=non_empty)
        owner_rules = section.take("owner_rules", bool, True)
        section.finish()
    else:
        policies = top.take("policies", str, check=non_empty)
        owner_rules = True
    secret_keys = _secret_keys(top)

    section = top.section("server")
    server = ServerSettings(
        host=section.take("host", str, ServerSettings.host, non_empty),
        port=section.take("port", int, ServerSettings.port, valid_port),
        threads=section.take("threads", int, ServerSettings.threads, positive),
        **{
            name: section.take(name, int, getattr(ServerSettings, name), positive)
            for name in (
                "connection_limit",
                "request_head_timeout",
                "body_timeout",
                "channel_timeout",
                "idle_timeout",
            )
        },
        trusted_proxies=_proxies(section),
    )
    section.finish()

    section = top.section("limits")
    limits = Limits(
        **{
            name: section.take(name, int, getattr(Limits, name), positive)
            for name in (
                "max_body_bytes",
                "claims_per_object",
                "claim_objects_per_request",
                "claims_per_ticket",
                "shares_per_owner",
                "claim_value_bytes",
                "owner_rules_per_owner",
                "conditions_per_rule",
                "rule_value_bytes",
            )
        }
    )
    section.finish()

    section = top.section("lifetimes")
    lifetimes = Lifetimes(
        **{
            name: section.take(name, int, getattr(Lifetimes, name), positive)
            for name in (
                "access_token",
                "rpt",
                "ticket",
                "permission",
                "authorization_code",
                "refresh_token",
                "claims_handle",
                "pct",
            )
        }
    )
    section.finish()

    section = top.section("claims")
    claims = ClaimSettings(
        clock_skew=section.take("clock_skew", int, ClaimSettings.clock_skew, _not_negative),
        saml_max_bytes=section.take("saml_max_bytes", int, ClaimSettings.saml_max_bytes, positive),
        saml_allow_sha1=section.take("saml_allow_sha1", bool, ClaimSettings.saml_allow_sha1),
        jwks_fetch_timeout=section.take(
            "jwks_fetch_timeout", int, ClaimSettings.jwks_fetch_timeout, positive
        ),
        jwks_max_bytes=section.take("jwks_max_bytes", int, ClaimSettings.jwks_max_bytes, positive),
        jwks_refresh=section.take("jwks_refresh", int, ClaimSettings.jwks_refresh, positive),
        id_token_max_lifetime=section.take(
            "id_token_max_lifetime", int, ClaimSettings.id_token_max_lifetime, positive
        ),
        provider_timeout=section.take(
            "provider_timeout", int, ClaimSettings.provider_timeout, positive
        ),
        provider_max_bytes=section.take(
            "provider_max_bytes", int, ClaimSettings.provider_max_bytes, positive
        ),
    )
    section.finish()

    section = top.section("maintenance")
    maintenance = MaintenanceSettings(
        prune_interval=section.take(
            "prune_interval", int, MaintenanceSettings.prune_interval, positive
        )
    )
    section.finish()

    section = top.section("audit")
    audit = AuditSettings(
        keep_days=section.take("keep_days", int, AuditSettings.keep_days, positive),
    )
    section.finish()

    section = top.section("registration")
    registration = RegistrationSettings(
        open=section.take("open", bool, RegistrationSettings.open),
        per_address_per_hour=section.take(
            "per_address_per_hour", int, RegistrationSettings.per_address_per_hour, positive
        ),
    )
    section.finish()

    section = top.section("sessions")
    sessions = SessionSettings(
        **{
            name: section.take(name, int, getattr(SessionSettings, name), positive)
            for name in ("idle_timeout", "absolute_timeout")
        }
    )
    section.finish()

    section = top.section("signin")
    signin = SigninSettings(
        **{
            name: section.take(name, int, getattr(SigninSettings, name), positive)
            for name in (
                "max_failures",
                "account_max_failures",
                "window",
                "lockout",
                "min_password_length",
            )
        }
    )
    section.finish()
    if signin.account_max_failures < signin.max_failures:
        errors.append(
            "signin.account_max_failures: must be at least max_failures (the account from"
            " anywhere counts every address's failures)"
        )
    if signin.min_password_length > MAX_PASSWORD_LENGTH:
        errors.append(
            f"signin.min_password_length: must be at most {MAX_PASSWORD_LENGTH} (the longest"
            " password sign-in reads)"
        )
    section = top.section("fetch")
    fetch = FetchSettings(
        **{
            name: section.take(name, int, getattr(FetchSettings, name), positive)
            for name in ("timeout", "max_bytes", "cache_lifetime", "retry_max", "concurrency")
        },
        allow_loopback=section.take("allow_loopback", bool, FetchSettings.allow_loopback),
    )
    section.finish()
    present = "keycloak" in top.table  # an empty [keycloak] still asks for a realm
    keycloak = _keycloak(top.section("keycloak"), present)
    section = top.section("tokens")
    tokens = TokenSettings(
        rpt_format=section.take("rpt_format", str, TokenSettings.rpt_format, _one_of(RPT_FORMATS)),
        jwt_algorithm=section.take(
            "jwt_algorithm", str, TokenSettings.jwt_algorithm, _one_of(JWT_ALGORITHMS)
        ),
    )
    section.finish()
    sharing = sharing_settings(top.section("sharing"))
    mail_present = "mail" in top.table  # an empty [mail] still asks for a host
    mail = mail_settings(top.section("mail"), mail_present, base)
    postgresql = _postgresql(top.section("postgresql"), database)
    metrics = metrics_settings(top.section("metrics"), base)
    log_settings = logging_settings(top.section("logging"))
    saml_idps = [saml_idp(reader, base) for reader in top.tables("saml_idps")]
    oidc_issuers = [oidc_issuer(reader, base) for reader in top.tables("oidc_issuers")]
    _no_repeats("saml_idps", [idp.entity_id for idp in saml_idps if idp], "entity_id", errors)
    _no_repeats("oidc_issuers", [i.issuer for i in oidc_issuers if i], "issuer", errors)
    top.finish()

    if errors:
        raise ConfigError(errors)
    return Config(
        issuer=issuer,
        database=database if is_postgresql(database) else (base / database).resolve(),
        policies=(base / policies).resolve(),
        secret_keys=secret_keys,
        owner_rules=owner_rules,
        server=server,
        limits=limits,
        lifetimes=lifetimes,
        claims=claims,
        maintenance=maintenance,
        audit=audit,
        registration=registration,
        sessions=sessions,
        signin=signin,
        fetch=fetch,
        keycloak=keycloak,
        tokens=tokens,
        sharing=sharing,
        mail=mail,
        metrics=metrics,
        logging=log_settings,
        postgresql=postgresql,
        saml_idps=tuple(idp for idp in saml_idps if idp is not None),
        oidc_issuers=tuple(issuer for issuer in oidc_issuers if issuer is not None),
        source=source,
    )


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read the file named by `path`, else by UMASERVER_CONFIG."""
    if path is None:
        path = os.environ.get(CONFIG_ENV)
        if not path:
            raise ConfigError([f"no configuration file: pass --config FILE or set {CONFIG_ENV}"])
    file = Path(path)
    try:
        with file.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError([f"{file}: no such file"]) from None
    except OSError as error:
        raise ConfigError([f"{file}: cannot be read: {error.strerror}"]) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([f"{file}: not valid TOML: {error}"]) from None
    try:
        return parse_config(data, file.resolve().parent, file.resolve())
    except ConfigError as error:
        raise ConfigError([f"{file}: {line}" for line in error.errors]) from None

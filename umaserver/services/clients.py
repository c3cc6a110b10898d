"""OAuth clients as RFC 7591 describes them, one kind whoever makes them: `/register` (dynamic
registration, RFC 7592 for reading, updating and deleting) and `client create` alike.

`redirect_uri_problem` is the one check of a redirect URI. `ClientSettings` is what a client is
registered with; `settings_problem` holds RFC 7591's consistency rules (2.1: grant types against
response types; a public client never uses client_credentials; the code flow needs redirect URIs).
A client registered here gets a secret (none when public) and, dynamically, a registration access
token, renewed each time it is used to read or update the registration; both exist only in the
return value and are stored as digests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from .. import secrets_at_rest
from ..claims.model import ACCOUNT_CLAIM_TYPE, ACCOUNT_NOT_PUSHED, REDIRECT_TYPE
from ..storage import Storage
from ..storage.records import Client, InitialAccessToken

# UMA 2.0's grant (UMA 2.0 Grant 3.3.1): a client brings a permission ticket to /token.
UMA_TICKET = "urn:ietf:params:oauth:grant-type:uma-ticket"
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials", UMA_TICKET)
RESPONSE_TYPES = ("code",)
AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
SCOPES = ("uma_protection", "uma_authorization")

MAX_REDIRECT_URI = 2000
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")

REGISTRATION_TOKEN_PREFIX = "uma_rat_"  # noqa: S105 - a prefix, not a secret
INITIAL_TOKEN_PREFIX = "uma_iat_"  # noqa: S105


def redirect_uri_problem(uri: str) -> str | None:
    """Why `uri` may not be a redirect URI, as a sentence; None when it may. It must be absolute,
    https, or http on a loopback host (127.0.0.1, [::1], localhost: RFC 8252), ASCII without
    white space, with no fragment, no wildcard, no user information, at most MAX_REDIRECT_URI
    characters. It is stored as given and compared by exact string."""
    if len(uri) > MAX_REDIRECT_URI:
        return f"must be at most {MAX_REDIRECT_URI} characters"
    if not uri.isascii() or any(c.isspace() or not c.isprintable() for c in uri):
        return "must be ASCII without white space (percent-encode other characters)"
    if "*" in uri:
        return "must not hold a wildcard ('*'): every redirect URI is registered in full"
    if "#" in uri:
        return "must not have a fragment (RFC 6749 3.1.2)"
    try:
        parts = urlsplit(uri)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return "is not a valid URI"
    if not parts.scheme or not parts.netloc:
        return "must be an absolute URI"
    if parts.scheme not in ("https", "http"):
        return "must be an https URI (or http on a loopback host)"
    if "@" in parts.netloc:
        return "must not hold user information"
    if not host:
        return "must name a host"
    if parts.scheme == "http" and host not in LOOPBACK_HOSTS:
        return "must be https; http only on a loopback host (127.0.0.1, [::1], localhost)"
    return None


@dataclass(frozen=True)
class ClientSettings:
    """A client's registered metadata, validated for syntax (the API's schema, the CLI's
    options); `settings_problem` checks it as a whole."""

    name: str = ""
    redirect_uris: tuple[str, ...] = ()
    grant_types: tuple[str, ...] = ("authorization_code",)
    response_types: tuple[str, ...] = ("code",)
    token_endpoint_auth_method: str = "client_secret_basic"  # noqa: S105 - a method name
    scope: tuple[str, ...] = SCOPES
    logo_uri: str | None = None
    client_uri: str | None = None
    push_claim_types: tuple[str, ...] = ()
    # Where the claims interaction endpoint (UMA 2.0) may send a person back: the rules of
    # `redirect_uris`, matched exactly.
    claims_redirect_uris: tuple[str, ...] = ()

    @property
    def is_public(self) -> bool:
        return self.token_endpoint_auth_method == "none"  # noqa: S105 - a method name


def push_claim_type_problem(claim_type: str) -> str | None:
    """Why a client may not be given `claim_type` to push, as a sentence; None when it may."""
    if not claim_type.strip():
        return "A claim type must not be empty."
    if claim_type == REDIRECT_TYPE:
        return f"{REDIRECT_TYPE} is gathered by this server, not pushed by a client."
    if claim_type == ACCOUNT_CLAIM_TYPE:
        return f"{ACCOUNT_NOT_PUSHED}."
    return None


def page_uri_problem(uri: str) -> str | None:
    """Why `uri` may not be a client's logo or home page, as words after it; None when it may."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.netloc or len(uri) > 2000:
        return "is not an absolute http(s) URI"
    return None


def declared_settings(
    *,
    name: str,
    redirect_uris: tuple[str, ...],
    push_claim_types: tuple[str, ...],
    public: bool,
    grant_types: tuple[str, ...],
    claims_redirect_uris: tuple[str, ...],
    scopes: tuple[str, ...],
    logo_uri: str | None,
    client_uri: str | None,
    auth_method: str = "client_secret_basic",
) -> ClientSettings:
    """The settings of a client an operator declares (`client create`, a seed file), with their
    defaults: without grant types, client_credentials and the uma-ticket grant (none for a
    public client), and the code flow with refresh tokens when redirect URIs are given; without
    scopes, both. Check the result with `settings_problem`."""
    if not grant_types:
        grant_types = () if public else ("client_credentials", UMA_TICKET)
        if redirect_uris:
            grant_types += ("authorization_code", "refresh_token")
    grants = tuple(dict.fromkeys(grant_types))
    return ClientSettings(
        name=name,
        redirect_uris=redirect_uris,
        grant_types=grants,
        response_types=("code",) if "authorization_code" in grants else (),
        token_endpoint_auth_method="none" if public else auth_method,
        scope=tuple(scope for scope in SCOPES if scope in scopes) or SCOPES,
        logo_uri=logo_uri,
        client_uri=client_uri,
        push_claim_types=tuple(dict.fromkeys(push_claim_types)),
        claims_redirect_uris=tuple(dict.fromkeys(claims_redirect_uris)),
    )


Problem = tuple[Literal["invalid_redirect_uri", "invalid_client_metadata"], str]


def settings_problem(settings: ClientSettings) -> Problem | None:
    """RFC 7591's error code and a sentence when the settings do not hold together."""
    for uri in settings.redirect_uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            return "invalid_redirect_uri", f"redirect_uris: {uri[:64]!r} {problem}."
    for uri in settings.claims_redirect_uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            return "invalid_redirect_uri", f"claims_redirect_uris: {uri[:64]!r} {problem}."
    grants = set(settings.grant_types)
    if "authorization_code" in grants and not settings.redirect_uris:
        return (
            "invalid_redirect_uri",
            "redirect_uris: the authorization_code grant needs at least one redirect URI.",
        )
    if ("authorization_code" in grants) != ("code" in settings.response_types):
        return (
            "invalid_client_metadata",
            "grant_types and response_types disagree (RFC 7591 2.1): the response type code"
            " goes with the grant type authorization_code, and only with it.",
        )
    if "refresh_token" in grants and "authorization_code" not in grants:
        return (
            "invalid_client_metadata",
            "grant_types: refresh_token comes only with authorization_code here.",
        )
    for confidential in ("client_credentials", UMA_TICKET):
        if settings.is_public and confidential in grants:
            return (
                "invalid_client_metadata",
                "grant_types: a public client (token_endpoint_auth_method none) may not use"
                f" {confidential}.",
            )
    if not grants:
        return "invalid_client_metadata", "grant_types: give at least one grant type."
    return None


def metadata_of(settings: ClientSettings) -> dict[str, Any]:
    """What is stored in `Client.metadata`: the RFC 7591 members beyond the columns."""
    metadata: dict[str, Any] = {
        "grant_types": list(settings.grant_types),
        "response_types": list(settings.response_types),
        "token_endpoint_auth_method": settings.token_endpoint_auth_method,
        "scope": " ".join(settings.scope),
    }
    if settings.logo_uri is not None:
        metadata["logo_uri"] = settings.logo_uri
    if settings.client_uri is not None:
        metadata["client_uri"] = settings.client_uri
    if settings.claims_redirect_uris:
        metadata["claims_redirect_uris"] = list(settings.claims_redirect_uris)
    return metadata


@dataclass(frozen=True)
class Issued:
    """A client just made (or given a new secret), with the secrets that exist only here."""

    client: Client
    secret: str | None
    registration_token: str | None = None


def create_client(
    storage: Storage, now: int, settings: ClientSettings, dynamic: bool = False
) -> Issued:
    """Stores a client of checked `settings`: a secret unless it is public, and when `dynamic`
    (registered at /register) a registration access token for RFC 7592."""
    secret = (
        None
        if settings.is_public
        else secrets_at_rest.new_token(secrets_at_rest.CLIENT_SECRET_PREFIX)
    )
    registration_token = secrets_at_rest.new_token(REGISTRATION_TOKEN_PREFIX) if dynamic else None
    client = Client(
        client_id=secrets_at_rest.new_id(),
        # The column is NOT NULL; no text digests to "", so no secret matches a public client.
        secret_digest="" if secret is None else secrets_at_rest.digest(secret),
        name=settings.name,
        redirect_uris=settings.redirect_uris,
        push_claim_types=settings.push_claim_types,
        metadata=metadata_of(settings),
        registration_digest=(
            None if registration_token is None else secrets_at_rest.digest(registration_token)
        ),
        created_at=now,
    )
    storage.add_client(client, now)
    return Issued(client, secret, registration_token)


def add_declared_client(
    storage: Storage, now: int, client_id: str, settings: ClientSettings, secret_digest: str
) -> Client:
    """Stores a client of checked `settings` under the `client_id` an operator chose (a seed
    file), with the digest of its secret ("" for a public client)."""
    client = Client(
        client_id=client_id,
        secret_digest="" if settings.is_public else secret_digest,
        name=settings.name,
        redirect_uris=settings.redirect_uris,
        push_claim_types=settings.push_claim_types,
        metadata=metadata_of(settings),
        registration_digest=None,
        created_at=now,
    )
    storage.add_client(client, now)
    return client


def settings_of(client: Client) -> ClientSettings:
    """The settings a stored client reads as (defaults for a client from before metadata)."""
    return ClientSettings(
        name=client.name,
        redirect_uris=client.redirect_uris,
        grant_types=client.grant_types,
        response_types=client.response_types,
        token_endpoint_auth_method=client.token_endpoint_auth_method,
        scope=client.scopes,
        logo_uri=client.metadata.get("logo_uri"),
        client_uri=client.metadata.get("client_uri"),
        push_claim_types=client.push_claim_types,
        claims_redirect_uris=client.claims_redirect_uris,
    )


def update_client(storage: Storage, client: Client, settings: ClientSettings) -> Client | None:
    """Replaces the client's metadata with checked `settings` (RFC 7592 2.2); None when it is
    gone. Whether it is public, and its secret, stay."""
    updated = replace(
        client,
        name=settings.name,
        redirect_uris=settings.redirect_uris,
        push_claim_types=settings.push_claim_types,
        metadata=metadata_of(settings),
    )
    return updated if storage.update_client(updated) else None


def renew_registration_token(storage: Storage, client: Client) -> str | None:
    """A new registration access token for `client`, just found by its current one: reading or
    updating a registration answers a new one (RFC 7592 3 lets the server issue one, and the
    client must then discard the old), since only the current one's digest is kept. The old one
    stops working at once. None when it was replaced meanwhile (another request presented it
    first and got the new one) or the client is gone."""
    if client.registration_digest is None:
        return None
    token = secrets_at_rest.new_token(REGISTRATION_TOKEN_PREFIX)
    renewed = storage.replace_registration_digest(
        client.client_id, client.registration_digest, secrets_at_rest.digest(token)
    )
    return token if renewed else None


def update_registration(
    storage: Storage, client: Client, settings: ClientSettings
) -> tuple[Client, str] | None:
    """`update_client` with a new registration access token (`renew_registration_token`), in one
    transaction: the client as now registered and its new token; None, and nothing changed, when
    the token presented was replaced meanwhile or the client is gone."""
    with storage.transaction():
        token = renew_registration_token(storage, client)
        if token is None:
            return None
        updated = update_client(storage, client, settings)
    return None if updated is None else (updated, token)


def rotate_secret(storage: Storage, client_id: str) -> str | None:
    """A new secret for a confidential client (the old one stops working at once); None when
    there is no such client. Raises ValueError for a public client, which has no secret."""
    client = storage.get_client(client_id)
    if client is None:
        return None
    if client.is_public:
        raise ValueError("A public client has no secret to rotate.")
    secret = secrets_at_rest.new_token(secrets_at_rest.CLIENT_SECRET_PREFIX)
    storage.set_client_secret_digest(client_id, secrets_at_rest.digest(secret))
    return secret


def find_by_registration_token(
    storage: Storage, client_id: str, unverified_token: str
) -> Client | None:
    """The client when `unverified_token` is its registration access token; None otherwise (no
    such client, one made by the CLI, another token), all alike."""
    client = storage.get_client(client_id)
    if client is None or client.registration_digest is None:
        # Compare anyway, so that an unknown client takes the time a known one does.
        secrets_at_rest.matches_digest(unverified_token, "0" * 64)
        return None
    if not secrets_at_rest.matches_digest(unverified_token, client.registration_digest):
        return None
    return client


def issue_initial_access_token(
    storage: Storage, now: int, push_claim_types: tuple[str, ...], lifetime: int
) -> str:
    """A new initial access token (RFC 7591 3), usable until it expires; stored as a digest."""
    token = secrets_at_rest.new_token(INITIAL_TOKEN_PREFIX)
    storage.add_initial_access_token(
        InitialAccessToken(secrets_at_rest.digest(token), push_claim_types, now, now + lifetime)
    )
    return token


def find_initial_access_token(
    storage: Storage, now: int, unverified_token: str
) -> InitialAccessToken | None:
    """The live initial access token `unverified_token` is; None when unknown or expired."""
    found = storage.get_initial_access_token(secrets_at_rest.digest(unverified_token))
    if found is None or found.expires_at <= now:
        return None
    return found


def client_information(client: Client) -> dict[str, Any]:
    """The client's registered metadata as RFC 7591 3.2.1 writes it (no secret, no URLs)."""
    settings = settings_of(client)
    document: dict[str, Any] = {"client_id": client.client_id}
    if settings.name:
        document["client_name"] = settings.name
    document.update(
        {
            "redirect_uris": list(settings.redirect_uris),
            "grant_types": list(settings.grant_types),
            "response_types": list(settings.response_types),
            "token_endpoint_auth_method": settings.token_endpoint_auth_method,
            "scope": " ".join(settings.scope),
        }
    )
    if settings.logo_uri is not None:
        document["logo_uri"] = settings.logo_uri
    if settings.client_uri is not None:
        document["client_uri"] = settings.client_uri
    document["uma_push_claim_types"] = list(settings.push_claim_types)
    if settings.claims_redirect_uris:
        document["claims_redirect_uris"] = list(settings.claims_redirect_uris)
    document["client_id_issued_at"] = client.created_at
    return document

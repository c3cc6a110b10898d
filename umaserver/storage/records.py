"""The records storage hands out and takes in: plain frozen dataclasses, no behaviour beyond
reading themselves. Tokens appear only as their digests."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import secrets_at_rest

TicketState = Literal["open", "granted", "finished"]
HandleState = Literal["open", "used", "void"]
FetchKind = Literal["scope", "image", "page"]
FetchStatus = Literal["pending", "checked", "failed"]


@dataclass(frozen=True)
class Client:
    client_id: str
    secret_digest: str
    name: str
    redirect_uris: tuple[str, ...]
    push_claim_types: tuple[str, ...]
    # RFC 7591 members beyond the columns (grant_types, response_types, token_endpoint_auth_method,
    # logo_uri, client_uri, scope): only those, as registered (scope with its names, never an
    # alias). Empty for a client made before registration existed: the properties below read it
    # as `client create` makes a client by default.
    metadata: dict[str, Any] = field(default_factory=dict)
    # The digest of the RFC 7592 registration access token; None for a client made by the CLI.
    registration_digest: str | None = None
    # When it was stored; set by the store on reading, not part of a client's equality.
    created_at: int = field(default=0, compare=False)

    def check_secret(self, unverified: str) -> bool:
        if self.is_public:
            return False  # a public client has no secret: none matches
        return secrets_at_rest.matches_digest(unverified, self.secret_digest)

    @property
    def token_endpoint_auth_method(self) -> str:
        """`client_secret_basic` (the default), `client_secret_post`, or `none` (public)."""
        return str(self.metadata.get("token_endpoint_auth_method", "client_secret_basic"))

    @property
    def is_public(self) -> bool:
        """A public client (RFC 6749 2.1): no secret, authenticates with `none`."""
        return self.token_endpoint_auth_method == "none"  # noqa: S105 - a method name

    @property
    def grant_types(self) -> tuple[str, ...]:
        """The grant types it may use. Without stored metadata: client_credentials and UMA 2.0's
        uma-ticket grant, and the code flow (authorization_code, refresh_token) when it has
        redirect URIs."""
        if "grant_types" in self.metadata:
            return tuple(self.metadata["grant_types"])
        confidential = ("client_credentials", "urn:ietf:params:oauth:grant-type:uma-ticket")
        if self.redirect_uris:
            return (*confidential, "authorization_code", "refresh_token")
        return confidential

    @property
    def claims_redirect_uris(self) -> tuple[str, ...]:
        """Where the claims interaction endpoint (UMA 2.0) may send a person back to."""
        return tuple(self.metadata.get("claims_redirect_uris", ()))

    @property
    def response_types(self) -> tuple[str, ...]:
        if "response_types" in self.metadata:
            return tuple(self.metadata["response_types"])
        return ("code",) if "authorization_code" in self.grant_types else ()

    @property
    def scopes(self) -> tuple[str, ...]:
        """The scopes it may be given (uma_protection, uma_authorization); both by default."""
        scope = self.metadata.get("scope")
        if scope is None:
            return ("uma_protection", "uma_authorization")
        return tuple(str(scope).split())


@dataclass(frozen=True)
class User:
    sub: str
    username: str
    password_hash: str | None
    claims: dict[str, Any]


@dataclass(frozen=True)
class Session:
    """A person's signed-in session on the pages, by the digest of its cookie's id. It ends at
    `expires_at`: the sooner of the idle and the absolute timeout, as of its last request."""

    digest: str
    user_sub: str
    csrf_secret: str
    created_at: int
    last_seen_at: int
    expires_at: int


@dataclass(frozen=True)
class AccessToken:
    """A PAT or an AAT as stored (the token itself is never stored). `username` is read with it."""

    digest: str
    client_id: str
    user_sub: str | None
    username: str | None
    scope: str
    issued_at: int
    expires_at: int
    revoked: bool
    # The grant it was issued under (an authorization code and the refresh tokens after it);
    # None for client_credentials and `token issue`.
    family: str | None = None

    @property
    def owner(self) -> str:
        """Whom the token acts for: a user, or the client itself (client_credentials)."""
        return self.user_sub if self.user_sub is not None else f"client:{self.client_id}"

    @property
    def owner_name(self) -> str:
        """The owner as policies name it: the username, or `client:<client_id>`."""
        return self.username if self.username is not None else f"client:{self.client_id}"


@dataclass(frozen=True)
class ResourceSet:
    """A registered resource set. `description` is as registered (extension properties kept), its
    scopes under `scopes` whichever of `scopes` (1.0) and `resource_scopes` (2.0) named them."""

    id: str
    owner: str
    client_id: str
    description: dict[str, Any]

    @property
    def name(self) -> str | None:
        """Its name; a 2.0 registration may give none."""
        name = self.description.get("name")
        return None if name is None else str(name)

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(str(scope) for scope in self.description.get("scopes", ()))

    @property
    def label(self) -> str:
        """What people are shown for it: its name, else its type, else its `_id`."""
        return self.name or str(self.description.get("type") or self.id)


# The most a page of sets may skip or hold (Keycloak's `first` and `max` are Java ints); a page
# without `max` holds up to this many.
PAGE_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class ResourceSetQuery:
    """Which of a resource server's sets a list holds, and which page of them (Keycloak's filters
    of its resource list, which the standard list takes too). A filter left None passes every set.
    `name` is a substring of the name, case aside for ASCII letters (or, with `exact_name`, the
    whole name as registered); `uri` one of the set's `uris`; `type` its type as registered;
    `scope` one of its scopes. The page: the sets from the `first` (0: the first) on, at most
    `max` of them (None: all); both from 0 to PAGE_LIMIT."""

    name: str | None = None
    exact_name: bool = False
    uri: str | None = None
    type: str | None = None
    scope: str | None = None
    first: int = 0
    max: int | None = None


@dataclass(frozen=True)
class OwnedResourceSet:
    """One line of an owner's list of resource sets: the set's name and type as registered, the
    resource server that registered it (its id and registered name), and how many live permissions
    (unexpired, on an unrevoked, unexpired RPT) are granted on it."""

    id: str
    name: str
    type: str | None
    client_id: str
    client_name: str
    permissions: int


@dataclass(frozen=True)
class RequestedPermission:
    """One (resource set, scopes) pair a ticket asks for (UMA 2.0's `resource_id` and
    `resource_scopes`)."""

    resource_set_id: str
    scopes: tuple[str, ...]
    # Granted pairs only (never stored with a ticket): when the rules that granted them end (a
    # share's `until`), which the permission made of them does not outlive. None: no end.
    ends_at: int | None = None


@dataclass(frozen=True)
class Ticket:
    """One request for access to one owner's sets, handed by a resource server to a client. Its
    first (set, scopes) pair is `resource_set_id` and `scopes`; a 2.0 ticket may ask for more
    (`more`): `permissions` is every pair in order. `requesting_party`: whose request it is, on a
    2.0 ticket (client:<client_id> until a person shares claims for it, then that person); None on
    a 1.0 ticket, whose party is the AAT's."""

    digest: str
    owner: str
    client_id: str
    resource_set_id: str
    scopes: tuple[str, ...]
    created_at: int
    expires_at: int
    requests: int = 0
    state: TicketState = "open"
    more: tuple[RequestedPermission, ...] = ()
    requesting_party: str | None = None
    # A request to the owner was filed with it (`submit_request`): its client's next request
    # looks the request up first.
    asked: bool = False

    @functools.cached_property
    def permissions(self) -> tuple[RequestedPermission, ...]:
        return (RequestedPermission(self.resource_set_id, self.scopes), *self.more)

    @classmethod
    def asking(cls, permissions: tuple[RequestedPermission, ...], **fields: Any) -> Ticket:
        """A ticket for these pairs (at least one): the first in its own fields, the others in
        `more`."""
        first, *rest = permissions
        return cls(
            resource_set_id=first.resource_set_id, scopes=first.scopes, more=tuple(rest), **fields
        )


@dataclass(frozen=True)
class Rpt:
    """An RPT: of an AAT (1.0), or of its client alone (the 2.0 grant: `aat_digest` None). A JWT
    RPT is stored alike, by the digest of its text; its `seed` is its `jti` (a JWT is never made
    again from it)."""

    digest: str
    seed: str
    aat_digest: str | None
    client_id: str
    requesting_party: str
    issued_at: int
    expires_at: int
    revoked: bool = False

    def is_live(self, now: float) -> bool:
        return not self.revoked and self.expires_at > now


@dataclass(frozen=True)
class Permission:
    resource_set_id: str
    scopes: tuple[str, ...]
    issued_at: int
    expires_at: int


@dataclass(frozen=True)
class Claim:
    """One claim about the requesting party of a ticket.

    `type` is the claim type of the claim object it arrived in (a deployment's custom type,
    `claim-client-claims-oidc-1.0`, `claim-client-assertion-saml-1.0`), or
    `claim-client-redirect-1.0` for a claim this server gathered from the requesting party who
    signed in here; `issuer` is who vouches for it: the pushing client's id for plain pushed claims,
    the identity provider's entity id or OIDC issuer for verified ones, this server's issuer for a
    local user's attributes. `subject` is whom a verified or gathered claim is about at that issuer
    (the ID token's `sub`, the assertion's NameID, the local user's `sub`); None for a client's
    plain word. `expires_at`: when the word it rests on ends (an ID token's or assertion's
    expiry), or None when it has no end of its own; a PCT's claims always have one.
    """

    type: str
    name: str
    value: Any
    issuer: str
    client_id: str
    gathered_at: int
    subject: str | None = None
    expires_at: int | None = None


@dataclass(frozen=True)
class Pct:
    """A persisted claims token (UMA 2.0): the claims a granted ticket held, which its client may
    bring to later tickets. `user_sub`: the person they are about, when a person shared them;
    `requesting_party` as on the ticket."""

    digest: str
    client_id: str
    requesting_party: str
    user_sub: str | None
    created_at: int
    expires_at: int
    revoked: bool = False

    def is_live(self, now: float) -> bool:
        return not self.revoked and self.expires_at > now


@dataclass(frozen=True)
class AssertionUse:
    """One acceptance of a verified SAML assertion or ID token (by issuer and its ID: the
    assertion's ID; `jti:<jti>`, else `sha256:<digest of the token>`, for an ID token): for which
    ticket and requesting party, remembered until it expires."""

    issuer: str
    assertion_id: str
    ticket_digest: str
    requesting_party: str
    expires_at: int


@dataclass(frozen=True)
class AuthorizationCode:
    """An authorization code as stored (its digest), bound to client, redirect URI and user.
    `family` names every token issued under it, so that a reused code revokes them."""

    digest: str
    client_id: str
    user_sub: str
    redirect_uri: str
    scope: str
    code_challenge: str | None
    code_challenge_method: str | None
    family: str
    created_at: int
    expires_at: int
    used: bool = False


@dataclass(frozen=True)
class RefreshToken:
    """A refresh token as stored (its digest), of one family: the code it came from and the
    refresh tokens rotated after it. `used`: it was exchanged (rotated) once already."""

    digest: str
    family: str
    client_id: str
    user_sub: str
    scope: str
    issued_at: int
    expires_at: int
    used: bool = False
    revoked: bool = False


@dataclass(frozen=True)
class Consent:
    """A person's consent that a client may have one scope."""

    user_sub: str
    client_id: str
    scope: str
    granted_at: int


@dataclass(frozen=True)
class InitialAccessToken:
    """An RFC 7591 initial access token (its digest): which claim types a client registered with
    it may push; usable until it expires."""

    digest: str
    push_claim_types: tuple[str, ...]
    created_at: int
    expires_at: int


@dataclass(frozen=True)
class ClaimsHandle:
    """A claims handle of the redirect profile (its digest): the `value` of a `redirect_required`
    entry, bound to the ticket, the client and the requesting party of the AAT it was made for,
    and to the browser that first opened it (`binding_digest`, the digest of a random id that
    browser holds). Usable once, while `state` is open and before it expires."""

    digest: str
    ticket_digest: str
    client_id: str
    requesting_party: str
    created_at: int
    expires_at: int
    binding_digest: str | None = None
    state: HandleState = "open"


@dataclass(frozen=True)
class StoredOwnerRule:
    """A rule an owner made on their policy pages: `rule` is the rule as a table of the rule
    file, in JSON (checked by the rule file's reader when it is used). `owner` is the user's sub,
    `username` how rules name that owner."""

    id: str
    owner: str
    username: str
    rule: dict[str, Any]
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class FetchedUri:
    """A URI from a registration and what checking it found: a scope description (`scope`: its
    `name` and `icon_uri`), an image (`image`: `image_id` of the stored copy) or a web page
    (`page`). One row per (uri, kind); `id` is random (the interstitial's `/link/<id>`).
    `status` pending, checked (the result holds until `expires_at`) or failed (`failures` in a
    row, `reason` why). Due for a fetch from `next_try_at` when no one holds it
    (`claimed_until`, a lease). `queued_by` names who queued it first (`set:<id>`,
    `client:<client_id>`, or ''): the job takes due rows round-robin by it."""

    id: str
    uri: str
    kind: FetchKind
    status: FetchStatus
    created_at: int
    next_try_at: int
    name: str | None = None
    icon_uri: str | None = None
    content_type: str | None = None
    image_id: str | None = None
    reason: str | None = None
    checked_at: int | None = None
    expires_at: int | None = None
    failures: int = 0
    claimed_until: int = 0
    queued_by: str = ""


@dataclass(frozen=True)
class FetchedImage:
    """An image that passed the check (PNG, JPEG, GIF or WebP, its type told by its bytes),
    served by this server under its random `id`."""

    id: str
    content_type: str
    data: bytes = field(repr=False)
    fetched_at: int

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class SigningKey:
    """A key that signs JWT RPTs: `kid`, its JWS algorithm (RS256, ES256), its public JWK as
    published (a JSON object), its private key sealed (AES-GCM under a key derived from
    `secret_key`: never stored in clear), when it was made, and whether it is the current key (the
    one new RPTs are signed with; at most one is)."""

    kid: str
    algorithm: str
    public_jwk: dict[str, Any]
    sealed_key: str
    created_at: int
    current: bool = False

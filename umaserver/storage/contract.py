"""The storage contract: every operation the services need, and nothing that decides.

Storage stores and fetches. What to merge, what a replay means, what to prune and when, and what a
revocation takes with it are the services' decisions; the contract offers the primitives they are
made of. Times are passed in (seconds since the epoch) by callers that read one clock. Tokens,
tickets and secrets cross it only as digests.

A `Storage` is one handle on one connection. `transaction()` opens one write transaction through
which every aggregate's operations run; an operation called outside one runs in a transaction of its
own. The atomic primitives (`consume_ticket`, `finish_ticket`, `count_ticket_request`,
`record_assertion_use`) are safe under concurrent callers on separate handles: of racers on one open
ticket exactly one consumes it; so are `consume_authorization_code` and `use_refresh_token`: of
racers on one code or refresh token exactly one gets True. The authorization request must read its ticket, record claims and
assertion uses, decide and consume inside one `transaction()`, so that what it decided on is what
it recorded: what a transaction has read stays true until it ends (no other handle writes in
between; SQLite gets this from `BEGIN IMMEDIATE`, a server database needs row locks or
serializable isolation). "Live" and "unexpired" mean `expires_at > now` everywhere.

The implementation: `store.SQLStorage`, over SQLite's dialect or PostgreSQL's (whose docstring says
how it keeps these promises across processes). The suite in `tests/storage/` checks any
implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .people_records import (
    AccessRequest,
    Event,
    Invitation,
    Notice,
    RequestStatus,
    SeededParty,
    Share,
    ShareKind,
)
from .records import (
    AccessToken,
    AssertionUse,
    AuthorizationCode,
    Claim,
    ClaimsHandle,
    Client,
    Consent,
    FetchedImage,
    FetchedUri,
    FetchKind,
    InitialAccessToken,
    OwnedResourceSet,
    Pct,
    Permission,
    RefreshToken,
    RequestedPermission,
    ResourceSet,
    ResourceSetQuery,
    Rpt,
    Session,
    SigningKey,
    StoredOwnerRule,
    Ticket,
    User,
)


class Clients(Protocol):
    def add_client(self, client: Client, created_at: int) -> None: ...

    def get_client(self, client_id: str) -> Client | None:
        """The client with its metadata, registration digest and `created_at`."""
        ...

    def list_clients(self) -> list[Client]:
        """Every client, in the order they were added."""
        ...

    def update_client(self, client: Client) -> bool:
        """Replaces the name, redirect URIs, push claim types and metadata of the client with
        this id (never its secret or registration digest); False when there is none."""
        ...

    def set_client_secret_digest(self, client_id: str, secret_digest: str) -> bool:
        """False when there is no such client."""
        ...

    def set_registration_digest(self, client_id: str, digest: str | None) -> bool:
        """False when there is no such client."""
        ...

    def replace_registration_digest(self, client_id: str, expected: str, digest: str) -> bool:
        """Sets the client's registration digest to `digest` only if it is `expected` now, in one
        statement (of two requests that present one token, one replaces it); False otherwise (no
        such client, or another digest)."""
        ...

    def delete_client(self, client_id: str) -> bool:
        """Deletes the client with everything issued to it or registered by it (its tokens,
        resource sets, tickets, RPTs, codes, consents); False when there is none."""
        ...


class InitialAccessTokens(Protocol):
    def add_initial_access_token(self, token: InitialAccessToken) -> None: ...

    def get_initial_access_token(self, digest: str) -> InitialAccessToken | None:
        """The token, expired or not."""
        ...

    def delete_initial_access_tokens_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` initial access tokens that expired before `moment`."""
        ...


class Users(Protocol):
    def add_user(self, user: User, created_at: int) -> bool:
        """False (and nothing stored) when the username is taken."""
        ...

    def get_user_by_username(self, username: str) -> User | None: ...

    def get_username(self, sub: str) -> str | None: ...

    def usernames_containing(self, text: str) -> list[str]:
        """The usernames that contain `text` (case-sensitive), sorted."""
        ...

    def get_user(self, sub: str) -> User | None: ...

    def list_users(self) -> list[User]:
        """Every user, by username."""
        ...

    def set_password_hash(self, sub: str, password_hash: str | None) -> bool:
        """False when there is no such user."""
        ...

    def set_user_claims(self, sub: str, claims: dict[str, Any]) -> bool:
        """Replaces the user's claims; False when there is no such user."""
        ...

    def delete_user(self, sub: str) -> bool:
        """Deletes the user with its sessions, PATs and AATs (and their RPTs), codes, refresh
        tokens and consents; False when there is no such user."""
        ...


class IdentityLinks(Protocol):
    """Identities at external OpenID Connect providers (issuer, subject) linked to local users.
    An identity is linked to one user at most; a user may have several; deleting the user
    deletes their links."""

    def link_identity(self, issuer: str, subject: str, user_sub: str, linked_at: int) -> bool:
        """False (and nothing changed) when that identity is linked already, to this user or
        another (never a silent re-link), or when there is no such user."""
        ...

    def unlink_identity(self, issuer: str, subject: str) -> bool:
        """False when that identity is not linked."""
        ...

    def linked_user(self, issuer: str, subject: str) -> str | None:
        """The sub of the user that identity is linked to, or None."""
        ...

    def links_of(self, user_sub: str) -> list[tuple[str, str]]:
        """The (issuer, subject) of every identity linked to the user, sorted."""
        ...


class Sessions(Protocol):
    """People's sessions on the pages, by the digest of the id in their cookie."""

    def add_session(self, session: Session) -> None: ...

    def get_session(self, digest: str) -> Session | None:
        """The session, expired or not (the caller decides with its clock)."""
        ...

    def touch_session(self, digest: str, last_seen_at: int, expires_at: int) -> bool:
        """Records a request made in the session; False when there is no such session."""
        ...

    def delete_session(self, digest: str) -> bool:
        """False when there is no such session."""
        ...

    def delete_sessions_of(self, user_sub: str) -> int:
        """Ends every session of the user (a new password, say); how many."""
        ...

    def delete_sessions_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` sessions that expired before `moment`."""
        ...


class SigninFailures(Protocol):
    """Failed sign-ins, each a moment under a key the caller chooses (an account, an account
    from one address); also attempts reserved before they are made (a sign-in before its password
    is checked, an open registration)."""

    def hold_signin_key(self, key: str) -> None:
        """Inside a transaction: no other transaction that holds the key reads or adds its
        failures until this one ends (so a count and the failure added after it are one step)."""
        ...

    def record_signin_failure(self, key: str, failed_at: int) -> None: ...

    def signin_failures_since(self, key: str, moment: int) -> list[int]:
        """The moments of the key's failures at or after `moment`, oldest first."""
        ...

    def clear_signin_failures(self, key: str) -> int:
        """Forgets every failure of the key; how many."""
        ...

    def clear_signin_failures_under(self, prefix: str) -> int:
        """Forgets every failure of every key that starts with `prefix`; how many."""
        ...

    def delete_signin_failures_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` failures (of any key) from before `moment`."""
        ...


class AccessTokens(Protocol):
    def add_access_token(self, token: AccessToken) -> None: ...

    def get_access_token(self, digest: str) -> AccessToken | None:
        """The token with its user's username (None for a client's own token). Read inside a
        transaction, it is held until the transaction ends: another transaction's read of it
        waits (the issuers of one AAT's RPTs take turns)."""
        ...

    def revoke_access_token(self, digest: str) -> bool:
        """False when no such unrevoked token exists."""
        ...

    def has_access_token(self, user_sub: str, client_id: str, scope: str) -> bool:
        """Whether this user has been issued an access token at this client whose scope includes
        `scope` (one scope name) that is unrevoked and still stored: live or expired."""
        ...

    def delete_access_tokens_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` PATs and AATs that expired before `moment` and under which no
        RPT is stored any more (an RPT may outlive its AAT: it goes first)."""
        ...


class AuthorizationCodes(Protocol):
    def add_authorization_code(self, code: AuthorizationCode) -> None: ...

    def get_authorization_code(self, digest: str) -> AuthorizationCode | None: ...

    def consume_authorization_code(self, digest: str, now: int) -> bool:
        """Marks an unused, unexpired code used; True for exactly one caller."""
        ...

    def delete_authorization_codes_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` codes (used or not) that expired before `moment`."""
        ...


class RefreshTokens(Protocol):
    def add_refresh_token(self, token: RefreshToken) -> None: ...

    def get_refresh_token(self, digest: str) -> RefreshToken | None: ...

    def use_refresh_token(self, digest: str, now: int) -> bool:
        """Marks an unused, unrevoked, unexpired refresh token used; True for exactly one
        caller."""
        ...

    def revoke_refresh_token(self, digest: str) -> bool:
        """False when no such unrevoked refresh token exists."""
        ...

    def delete_refresh_tokens_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` refresh tokens that expired before `moment`."""
        ...


class TokenFamilies(Protocol):
    """Revoking what was issued under one grant: by family (one authorization code and the
    refresh tokens after it), or by user, client and scope (a consent)."""

    def revoke_access_tokens_of_family(self, family: str) -> list[str]:
        """Revokes the unrevoked access tokens of the family; their digests."""
        ...

    def revoke_refresh_tokens_of_family(self, family: str) -> int: ...

    def revoke_access_tokens_of_grant(self, user_sub: str, client_id: str, scope: str) -> list[str]:
        """Revokes the unrevoked access tokens of this user at this client whose scope includes
        `scope` (one scope name); their digests."""
        ...

    def revoke_refresh_tokens_of_grant(self, user_sub: str, client_id: str, scope: str) -> int:
        """As `revoke_access_tokens_of_grant`, for refresh tokens; how many."""
        ...


class Consents(Protocol):
    def put_consent(self, consent: Consent) -> None:
        """Stores the consent, replacing one of the same user, client and scope."""
        ...

    def has_consent(self, user_sub: str, client_id: str, scope: str) -> bool: ...

    def consents_of(self, user_sub: str) -> list[Consent]:
        """Ordered by client_id, then scope."""
        ...

    def delete_consent(self, user_sub: str, client_id: str, scope: str) -> bool:
        """False when there was no such consent."""
        ...


class ResourceSets(Protocol):
    """Sets are found by (id, owner, resource server), except by `find_resource_set`, which the
    decision about a ticket uses whoever asks."""

    def add_resource_set(self, resource_set: ResourceSet, created_at: int) -> None:
        """The description holds `name` (and perhaps `type`), which rules select sets by."""
        ...

    def get_resource_set(self, rs_id: str, owner: str, client_id: str) -> ResourceSet | None: ...

    def find_resource_set(self, rs_id: str) -> ResourceSet | None: ...

    def resource_sets_registered_by(
        self, client_id: str, name: str | None, limit: int
    ) -> list[ResourceSet]:
        """At most `limit` of the sets this resource server registered, for any owner, oldest
        first (ties by id); only those named exactly `name`, unless it is None."""
        ...

    def replace_resource_set(
        self, rs_id: str, owner: str, client_id: str, description: dict[str, Any], updated_at: int
    ) -> bool:
        """False when there is no such set for this owner and resource server."""
        ...

    def delete_resource_set(self, rs_id: str, owner: str, client_id: str) -> bool:
        """Deletes the set with the tickets whose first pair asks for it, their claims, and the
        permissions on it; an open ticket that asks for it in a later pair reads as finished from
        then on."""
        ...

    def list_resource_sets(
        self, owner: str | None, client_id: str, query: ResourceSetQuery | None = None
    ) -> list[str]:
        """The ids of the sets this resource server registered for `owner` (None: for any owner)
        that pass every filter of `query`, in the order they were registered (oldest first), from
        `query.first` on, at most `query.max` of them."""
        ...

    def resource_sets_of(
        self, owner: str, now: int, after: tuple[str, str] | None, limit: int
    ) -> list[OwnedResourceSet]:
        """One page of the owner's sets across resource servers, ordered by (name, id): at most
        `limit` of them, those after the (name, id) `after` (None: from the first). Each counts
        its permissions live at `now`."""
        ...

    def count_resource_sets_of(self, owner: str) -> int:
        """How many sets the owner has, across resource servers."""
        ...


class Tickets(Protocol):
    def add_ticket(self, ticket: Ticket) -> None:
        """Stores a ticket with every (set, scopes) pair it asks for, in order."""
        ...

    def get_ticket(self, digest: str) -> Ticket | None:
        """The ticket, every pair in the order stored."""
        ...

    def count_ticket_request(self, digest: str, client_id: str | None = None) -> int:
        """Counts one request made with an open ticket; the new count (0: not open): with
        `client_id`, of that client's requests with it (each client has its own count; the
        ticket's `requests` counts every client's), else of every client's."""
        ...

    def ticket_used_by_others(self, digest: str, client_id: str) -> bool:
        """Whether a client other than `client_id` made a request counted with the ticket or
        holds claims gathered for it (a refusal of this client then leaves it open for them)."""
        ...

    def consume_ticket(self, digest: str) -> bool:
        """open -> granted; True for exactly one caller."""
        ...

    def finish_ticket(self, digest: str) -> bool:
        """open -> finished; True for exactly one caller."""
        ...

    def delete_tickets_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` tickets that expired before `moment`, with their claims."""
        ...

    def open_tickets_for(self, rs_id: str) -> list[Ticket]:
        """The open tickets (expired or not) that ask for this resource set, in any of their
        pairs, in the order they were made."""
        ...

    def set_ticket_permissions(
        self, digest: str, permissions: tuple[RequestedPermission, ...]
    ) -> bool:
        """Replaces the pairs (at least one) an open ticket asks for; False when it is not open."""
        ...

    def rotate_ticket(self, digest: str, new_digest: str) -> bool:
        """The open ticket `digest` goes on as `new_digest` (UMA 2.0's rotation): the same pairs,
        owner, client, party, requests (each client's too) and lifetime, and the claims gathered
        for it; the old digest
        is finished (it stops working at once) and its claims handles void. False when it is not
        open."""
        ...

    def set_ticket_party(self, digest: str, party: str) -> bool:
        """Makes `party` the requesting party of an open ticket; the claims gathered for the party
        it had move with it. False when it is not open."""
        ...

    def extend_ticket(self, digest: str, expires_at: int) -> bool:
        """An open ticket lives at least until `expires_at` (never shortened); False when it is
        not open."""
        ...


class ClaimsHandles(Protocol):
    def add_claims_handle(self, handle: ClaimsHandle) -> None:
        """Stores a new handle and voids every other open handle of its ticket and client."""
        ...

    def get_claims_handle(self, digest: str) -> ClaimsHandle | None: ...

    def void_claims_handles(self, ticket_digest: str, client_id: str | None = None) -> int:
        """open -> void for the handles of a ticket (with `client_id`, only those made for that
        client); how many."""
        ...

    def bind_claims_handle(self, digest: str, binding_digest: str) -> bool:
        """Binds an open, unbound handle to a browser; True for exactly one caller."""
        ...

    def use_claims_handle(self, digest: str) -> bool:
        """open -> used; True for exactly one caller."""
        ...

    def delete_claims_handles_expired_before(self, moment: int, limit: int) -> int: ...


class GatheredClaims(Protocol):
    def record_claims(
        self, ticket_digest: str, requesting_party: str, claims: Iterable[Claim]
    ) -> None:
        """Stores each claim with its subject, replacing a stored one of the same type, name,
        issuer and client (`Claim.client_id`: the client that pushed it or that the person shared
        it with) for this ticket and requesting party. Two clients' claims never replace each
        other."""
        ...

    def forget_issuer_claims(
        self, ticket_digest: str, requesting_party: str, issuer: str, client_id: str | None = None
    ) -> int:
        """Forgets every claim this issuer vouched for on this ticket and requesting party (about
        whichever subject), with `client_id` only those of that client; how many."""
        ...

    def gathered_claims(
        self, ticket_digest: str, requesting_party: str, client_id: str | None = None
    ) -> list[Claim]:
        """In no particular order. With `client_id`, only the claims that serve that client (a
        decision reads those); without, every client's (for inspection)."""
        ...


class AssertionUses(Protocol):
    def record_assertion_use(self, use: AssertionUse, now: int) -> list[AssertionUse]:
        """Records this use and returns the uses of the same assertion or ID token (issuer and ID)
        made before it that have not expired at `now`. Of two uses with one ticket the first is
        kept."""
        ...

    def delete_assertion_uses_expired_before(self, moment: int, limit: int) -> int: ...


class Rpts(Protocol):
    def add_rpt(self, rpt: Rpt) -> None: ...

    def get_rpt(self, digest: str) -> Rpt | None: ...

    def live_rpt_of(self, aat_digest: str, now: int) -> Rpt | None:
        """The newest unrevoked, unexpired RPT issued under this AAT."""
        ...

    def revoke_rpts_of(self, aat_digest: str) -> int: ...

    def revoke_rpt(self, digest: str) -> bool:
        """Revokes one RPT; False when it is unknown or revoked already."""
        ...

    def delete_rpts_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` RPTs that expired before `moment`, with their permissions."""
        ...


class Permissions(Protocol):
    def get_permission(self, rpt_digest: str, rs_id: str) -> Permission | None: ...

    def put_permission(self, rpt_digest: str, permission: Permission) -> None:
        """Stores the RPT's one permission on that resource set, replacing any before."""
        ...

    def permissions_of(self, rpt_digest: str, now: int) -> list[Permission]:
        """The RPT's unexpired permissions."""
        ...

    def permissions_of_party(
        self, client_id: str, requesting_party: str, now: int
    ) -> list[Permission]:
        """The unexpired permissions of every live (unrevoked, unexpired) RPT of this client and
        requesting party, in the order they were issued (a set may come once for each RPT)."""
        ...

    def permissions_for(
        self, rpt_digest: str, owner: str | None, client_id: str, now: int
    ) -> list[Permission]:
        """The RPT's unexpired permissions on sets of this owner (None: of any owner) registered
        by this resource server, in the order they were issued."""
        ...

    def permissions_on(self, rs_id: str) -> list[tuple[str, Permission]]:
        """Every permission (expired or not) on this resource set, with its RPT's digest."""
        ...

    def delete_permission(self, rpt_digest: str, rs_id: str) -> bool:
        """False when the RPT has no permission on that set."""
        ...


class SigningKeys(Protocol):
    """The keys that sign JWT RPTs, by kid: at most one is current (new RPTs are signed with it),
    the others verify until they are retired."""

    def add_signing_key(self, key: SigningKey, *, replace_current: bool) -> bool:
        """Adds `key` as the current key. With `replace_current`, the current key stops being
        current first (it stays, to verify); without, the key is added only when no key is
        current, and False says another was (nothing changed)."""
        ...

    def current_signing_key(self) -> SigningKey | None: ...

    def signing_keys(self) -> list[SigningKey]:
        """Every key, current or not, oldest first (ties by kid)."""
        ...

    def retire_signing_keys(self) -> list[str]:
        """Deletes every key that is not current: their kids, sorted."""
        ...

    def reseal_signing_key(self, kid: str, sealed_before: str, sealed_now: str) -> bool:
        """Replaces the key's sealed private part, only while it is still `sealed_before` (of two
        processes re-sealing at once, one writes); False when it was not."""
        ...


class OwnerRules(Protocol):
    """The rules owners made on their policy pages, each a JSON object (the rule as a table of the
    rule file), by id and owner (a user's sub; deleting the user deletes their rules). Every change
    bumps the owner's version in its own transaction, so a process that cached the rules of a
    version knows they are current while the version is the same."""

    def add_owner_rule(
        self, rule_id: str, user_sub: str, rule: Mapping[str, Any], created_at: int
    ) -> bool:
        """Stores a new rule (`updated_at` is `created_at`); False (and nothing changed) when the id
        is taken or there is no such user."""
        ...

    def replace_owner_rule(
        self, user_sub: str, rule_id: str, rule: Mapping[str, Any], updated_at: int
    ) -> bool:
        """Replaces the rule of that id, when it is that user's; False (nothing changed) when not."""
        ...

    def delete_owner_rule(self, user_sub: str, rule_id: str) -> bool:
        """False (nothing changed) when the user has no rule of that id."""
        ...

    def owner_rules_of(self, user_sub: str) -> list[StoredOwnerRule]:
        """The user's rules, oldest first (in the order they were added)."""
        ...

    def owner_rules_version(self, user_sub: str) -> int:
        """How many changes the user's rules have seen: 0 before the first, then only ever
        greater."""
        ...

    def all_owner_rules(self) -> list[StoredOwnerRule]:
        """Every owner's rules: by username, each owner's oldest first."""
        ...


class Shares(Protocol):
    """Owners' rules marked as shares (issue 25): one row a rule, by the rule's id. The rule is
    added and deleted with `OwnerRules`' operations (in one transaction with the row); deleting
    the rule, or the owner, deletes its share."""

    def add_share(self, share: Share) -> bool:
        """Marks the rule `share.rule_id` of `share.owner` as that share; False (nothing changed)
        when the owner has no rule of that id, or the rule is a share already."""
        ...

    def get_share(self, user_sub: str, rule_id: str) -> Share | None: ...

    def shares_of(self, user_sub: str, resource_set_id: str | None = None) -> list[Share]:
        """The owner's shares (of that set only, when given), oldest first (ties by rule id)."""
        ...

    def reassign_share(self, user_sub: str, rule_id: str, recipient: str, kind: ShareKind) -> bool:
        """Sets the share's recipient and kind (an invitation accepted: the e-mail address becomes
        the accepting username), in the caller's transaction with its rule's change; False when
        the owner has no such share."""
        ...

    def count_shares(self, user_sub: str) -> int: ...


class Invitations(Protocol):
    """Single-use links to shares by e-mail (issue 25), by the SHA-256 digest of their token: at
    most one a share, deleted with it."""

    def add_invitation(self, invitation: Invitation) -> bool:
        """Stores an unused invitation to the share `invitation.rule_id` of `invitation.owner`
        (its `used_*` are not read); False (nothing stored) when the owner has no such share by
        e-mail, or the share has an invitation already."""
        ...

    def get_invitation(self, digest: str) -> Invitation | None:
        """The invitation, used, expired or not."""
        ...

    def invitations_of(self, owner: str) -> list[Invitation]:
        """The owner's invitations, used, expired or not, oldest first (ties by rule id)."""
        ...

    def replace_invitation(
        self, owner: str, rule_id: str, digest: str, created_at: int, expires_at: int
    ) -> bool:
        """Gives the share's unused invitation a new digest and lifetime (the old digest is
        gone); False when the share has none, or it was used."""
        ...

    def delete_invitation(self, owner: str, rule_id: str) -> bool:
        """Deletes the share's unused invitation; False when it has none, or it was used."""
        ...

    def use_invitation(self, digest: str, user_sub: str, now: int) -> Invitation | None:
        """Marks the invitation used by `user_sub` at `now` if it is unused and unexpired, in one
        statement (of racers on one link exactly one gets it); the invitation as used, or None."""
        ...

    def delete_invitations_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` invitations that expired, or were used, before `moment`."""
        ...


class FetchedUris(Protocol):
    """The queue and cache of URIs checked in the background: any process's job may take a due
    row (`claim_fetch_work` is atomic: of racers, one gets each row), and records what it found
    only while its lease (`claimed_until`) is still the row's."""

    def queue_uri(
        self, uri: str, kind: FetchKind, row_id: str, now: int, queued_by: str = ""
    ) -> bool:
        """Adds (uri, kind) as pending, due now, under `row_id`, queued by `queued_by` (a set's
        or a client's name, or ''); False when it is there already (nothing changes, its
        queuer included)."""
        ...

    def get_fetched_uri(self, uri: str, kind: FetchKind) -> FetchedUri | None: ...

    def fetched_uri_by_id(self, row_id: str) -> FetchedUri | None: ...

    def count_due_fetches(self, now: int) -> int:
        """How many rows are due at `now` (`next_try_at <= now`), being fetched or waiting: the
        fetch queue's length, for the metrics."""
        ...

    def claim_fetch_work(self, now: int, claimed_until: int, limit: int) -> list[FetchedUri]:
        """Takes at most `limit` rows due at `now` (`next_try_at <= now`, no lease beyond now),
        leasing them until `claimed_until`; what it took, in turns. Fair across queuers: rows are
        taken round-robin by `queued_by` (each queuer's longest due first), a queuer with rows
        leased now waits behind one with fewer, and among equals the one served longest ago (or
        never) goes first."""
        ...

    def record_fetch_checked(
        self,
        row_id: str,
        claimed_until: int,
        now: int,
        expires_at: int,
        *,
        name: str | None = None,
        icon_uri: str | None = None,
        content_type: str | None = None,
        image: FetchedImage | None = None,
    ) -> bool:
        """Records a good result (the image, if any, stored and the row's previous one deleted),
        due again at `expires_at`; False when the lease is no longer this one."""
        ...

    def record_fetch_failure(
        self, row_id: str, claimed_until: int, now: int, next_try_at: int, reason: str
    ) -> bool:
        """Records a failure (one more in a row; the previous result and image forgotten), due
        again at `next_try_at`; False when the lease is no longer this one."""
        ...

    def get_fetched_image(self, image_id: str) -> FetchedImage | None: ...


class Pcts(Protocol):
    """Persisted claims tokens (UMA 2.0): the claims a granted ticket held, for later tickets of
    the same client."""

    def add_pct(self, pct: Pct, claims: Iterable[Claim]) -> None:
        """Stores a PCT and its claims (one per type, name and issuer: the last given wins), each
        until its own `expires_at`, or the PCT's when it has none or a later one."""
        ...

    def get_pct(self, digest: str) -> Pct | None: ...

    def pct_claims(self, digest: str, now: int) -> list[Claim]:
        """The PCT's claims still live at `now` (each with its `expires_at`), sorted by type, name
        and issuer."""
        ...

    def pcts_of(self, user_sub: str) -> list[Pct]:
        """The PCTs about this person, live or not, newest first."""
        ...

    def revoke_pct(self, digest: str) -> bool:
        """True for exactly one caller, when the PCT was not revoked."""
        ...

    def delete_pcts_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` PCTs that expired before `moment`, with their claims."""
        ...


class Events(Protocol):
    """The access history: what was decided, granted, shared, stopped, approved, denied and
    revoked, by the owner of the set it was about. Each event is written in the transaction of what
    it records; nothing changes it after."""

    def add_event(self, event: Event) -> None: ...

    def events_of(
        self,
        owner: str,
        limit: int,
        *,
        rs_id: str | None = None,
        before: tuple[int, int] | None = None,
    ) -> list[Event]:
        """At most `limit` of the owner's events, newest first (by time, then the order they were
        added), only those on `rs_id` when given, and only those before the cursor `before`
        ((`at`, `seq`) of the last event of the previous page) when given."""
        ...

    def events_since(self, owner: str, moment: int) -> list[Event]:
        """The owner's events at or after `moment`, oldest first."""
        ...

    def delete_events_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` events (of any owner) older than `moment`; how many."""
        ...


class Requests(Protocol):
    """Requests to owners (issue 25): a client acting for a person asked the owner of a set for
    access the rules refused. A request is pending until the owner decides it (once) or its
    `expires_at` passes; a pending request past it reads as expired. Deleting the owner, the
    person or the set deletes it. Beside them, each owner's switch "others may ask me"."""

    def add_request(self, request: AccessRequest) -> None:
        """Stores the request, and marks its ticket (if it has one) as asked (`Ticket.asked`), in
        the caller's transaction."""
        ...

    def get_request(self, request_id: str) -> AccessRequest | None:
        """The request as stored (its status pending even when past `expires_at`)."""
        ...

    def request_for_ticket(self, ticket_digest: str) -> AccessRequest | None:
        """The newest request the ticket of that digest belongs to, as stored."""
        ...

    def move_request(self, old_digest: str, new_digest: str) -> int:
        """The requests of the ticket `old_digest` belong to `new_digest` from now on (a rotated
        ticket); how many."""
        ...

    def requests_of(
        self, owner: str, status: RequestStatus, now: int, limit: int
    ) -> list[AccessRequest]:
        """At most `limit` of the owner's requests of that status at `now` (expired: pending ones
        past their `expires_at`, which read as expired), newest first (ties by id)."""
        ...

    def count_pending_requests_to(self, owner: str, now: int) -> int:
        """How many requests to the owner are pending at `now`."""
        ...

    def count_pending_requests_by(self, party: str, now: int) -> int:
        """How many requests of the requesting party are pending at `now`."""
        ...

    def decide_request(
        self,
        request_id: str,
        status: RequestStatus,
        now: int,
        approved_scopes: tuple[str, ...] | None = None,
    ) -> bool:
        """pending -> `status` (approved or denied) at `now`, with the scopes an approval gave;
        True for exactly one caller, and only while the request is pending at `now`."""
        ...

    def delete_requests_expired_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` requests (decided or not) whose `expires_at` is before
        `moment`; how many."""
        ...

    def takes_requests(self, user_sub: str) -> bool | None:
        """The user's switch: True or False as they set it, None for the server's default (and
        for no such user)."""
        ...

    def set_takes_requests(self, user_sub: str, value: bool | None) -> bool:
        """Sets the user's switch (None: back to the server's default); False when there is no
        such user."""
        ...


class Notices(Protocol):
    """What the server tells a person (issue 25, item 4): their inbox on the pages, and the mail
    outbox. A notice is written in the transaction of what it tells of; a sender claims the mail
    due (several processes on one database never hold one notice at once) and records how it
    went."""

    def add_notice(self, notice: Notice) -> None: ...

    def notices_of(
        self, user_sub: str, limit: int, *, before: tuple[int, int] | None = None
    ) -> list[Notice]:
        """At most `limit` of the person's notices, newest first (by time, then the order they
        were added), only those before the cursor `before` ((`created_at`, `seq`) of the last
        notice of the previous page) when given."""
        ...

    def count_unseen_notices(self, user_sub: str) -> int: ...

    def mark_notices_seen(self, user_sub: str, now: int) -> int:
        """Marks the person's unseen notices made at or before `now` as seen at `now`; how many."""
        ...

    def claim_due_mail(self, now: int, claimed_until: int, limit: int) -> list[Notice]:
        """Takes at most `limit` notices whose mail is pending and due (`next_attempt_at <=
        now`), oldest due first: each one's `attempts` grows by one and `next_attempt_at` becomes
        `claimed_until`, so that no other caller takes it before then. Racing callers on separate
        handles never take one notice both. The notices as taken, oldest first."""
        ...

    def record_mail_sent(self, notice_id: str, attempts: int) -> bool:
        """Marks the mail sent (no next attempt, no error), when the notice is still pending at
        `attempts` (the claim's); False (nothing changed) otherwise. An invitation's body and
        link (its secret) are forgotten (empty) once sent, or once failed for good."""
        ...

    def record_mail_failure(
        self, notice_id: str, attempts: int, error: str, next_attempt_at: int | None
    ) -> bool:
        """Keeps `error`; the mail is due again at `next_attempt_at`, or failed for good when it
        is None. Only when the notice is still pending at `attempts`; False otherwise."""
        ...

    def delete_notices_before(self, moment: int, limit: int) -> int:
        """Forgets at most `limit` notices made before `moment` whose mail is not pending; how
        many."""
        ...


class SeededParties(Protocol):
    """The parties that `seed apply` created (users by sub, clients by client_id, links by
    issuer and subject), so that `--prune` removes only those, never one made another way."""

    def lock_seeding(self) -> None:
        """Inside a transaction: waits until no other handle applies a seed (nor changes the
        schema, on PostgreSQL), and holds that until the transaction ends."""
        ...

    def record_seeded(self, party: SeededParty, seeded_at: int) -> bool:
        """False when it is recorded already."""
        ...

    def seeded_parties(self) -> list[SeededParty]:
        """Every recorded party, by kind, party and subject."""
        ...

    def forget_seeded(self, party: SeededParty) -> bool:
        """False when it was not recorded."""
        ...


class Reset(Protocol):
    def reset_keeping_parties(self) -> dict[str, int]:
        """Forgets, in one transaction, everything but the parties: keeps clients, users and
        their identity links (and the schema's version and the signing keys), and forgets
        resource sets, owners' rules, shares, invitations, tickets, gathered claims, claims
        handles, RPTs and permissions, PATs and AATs, codes, refresh tokens, PCTs, consents,
        sessions, sign-in failures, initial access tokens, requests, events, notices and
        fetched content. Every owner's rules version moves on (a process that cached an owner's
        rules reads them again). The rows forgotten, by table."""
        ...


class Storage(
    Clients,
    InitialAccessTokens,
    Users,
    AccessTokens,
    ResourceSets,
    Tickets,
    ClaimsHandles,
    GatheredClaims,
    AssertionUses,
    Rpts,
    Permissions,
    AuthorizationCodes,
    RefreshTokens,
    TokenFamilies,
    Consents,
    Sessions,
    SigninFailures,
    IdentityLinks,
    OwnerRules,
    Shares,
    Invitations,
    FetchedUris,
    Pcts,
    SigningKeys,
    Events,
    Requests,
    Notices,
    SeededParties,
    Reset,
    Protocol,
):
    """One handle on the store: every aggregate, one connection, one unit of work."""

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction; a nested use joins the outer one. An exception rolls back."""
        ...

    def close(self) -> None:
        """Ends the handle; what it committed stays."""
        ...

    def reusable(self) -> bool:
        """Whether the handle may serve another unit of work (a pool keeps it): not closed, no
        transaction open, its connection sound."""
        ...

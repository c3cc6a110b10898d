"""Keycloak's uma-ticket grant without a ticket (its realm face): the client names the resource
server (`audience`, its client id) and the permissions it wants (`permission`), and the server
decides them at once with the owners' rules, as Keycloak's token endpoint does.

* A permission is Keycloak's `RES`, `RES#S1,S2` or `#S`; several may be joined by commas, as
  python-keycloak sends them: a piece with `#` starts a resource, a piece without one is another
  scope of the resource before it. `RES` is the `_id`, else the exact name, of a set that the
  audience registered (none, or several of that name: 400 invalid_resource); `#S` is every set of
  the audience that registers S; `RES` alone asks for every scope of the set.
* Each (set, scopes) pair is decided by the one decision function with its owner's rules; a pair
  that is not granted whole keeps the scopes granted one by one (Keycloak grants what it can).
* `response_mode=decision`: `{"result": true}` when every pair is granted whole, else 403
  access_denied. `response_mode=permissions`: the granted ones, as Keycloak lists them
  (`rsid`, `rsname`, `scopes`), or 403 access_denied when there are none. Neither mints an RPT.
  Without a response mode: an RPT holding what was granted (the client's `rpt` upgraded when it
  sends its own), or 403 access_denied when nothing was.
* `submit_request=true`: what the rules refuse a person (the person's own token) is asked of each
  set's owner (`owner_requests.file_request`, one request a set, no ticket: the client asks
  again with the same permission, and is granted once the owner approves), answered as Keycloak
  does, 403 access_denied `request_submitted`. Where nothing could be asked (no person, requests
  off, too many pending), the flag changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..claims.model import ClaimsError, ClaimsUnavailable, VerifiedClaims, Verifiers
from ..config import Lifetimes, Limits
from ..errors import APIError, InvalidRequest, InvalidScope, TemporarilyUnavailable, echo
from ..sharing_config import SharingSettings
from ..storage import Storage
from ..storage.records import Claim, Client, RequestedPermission, ResourceSet, Rpt
from . import access_history, decision_log, notices, owner_requests
from .decision import RulesFor, Supplier, decide_ticket, owner_name
from .signing_keys import JwtRpts
from .uma_answers import Answer, grant_rpt, own_rpt, read_claim_token

RESPONSE_MODES = ("decision", "permissions")
# `#S` looks at this many of the audience's sets at most (oldest first).
MAX_SETS_BY_SCOPE = 1000


class InvalidResource(APIError):
    """400 invalid_resource (Keycloak's): a permission names no set of the audience, or several."""

    error = "invalid_resource"
    description = "The resource is not one resource set of the audience."


@dataclass(frozen=True)
class Wanted:
    """One permission asked for: a resource (an `_id` or a name; None: every set of the audience
    that registers the scopes) and scopes (none: every scope of the set)."""

    resource: str | None
    scopes: tuple[str, ...]


def read_claims(
    claim_token: str | None,
    claim_token_format: str | None,
    client: Client,
    verifiers: Verifiers,
    now: int,
    limits: Limits,
    jwt_type: str | None,
) -> VerifiedClaims:
    """The claim token's claims, verified as the uma-ticket grant reads them (the same trust
    rules); 400 invalid_request naming why one is refused, 503 while an issuer's keys are not
    known yet. Without a ticket there is no replay memory to record an ID token's use in."""
    try:
        return read_claim_token(
            claim_token, claim_token_format, client, verifiers, now, limits, jwt_type
        )
    except ClaimsUnavailable as error:
        raise TemporarilyUnavailable(
            error.description, headers={"Retry-After": str(error.retry_after)}
        ) from None
    except ClaimsError as error:
        raise InvalidRequest(error.description) from None


def parse_permissions(values: Sequence[str]) -> list[Wanted]:
    """Keycloak's `permission` parameters (repeatable, each perhaps several joined by commas)."""
    found: list[tuple[str | None, list[str]]] = []
    for value in values:
        current: tuple[str | None, list[str]] | None = None
        for piece in (piece.strip() for piece in value.split(",")):
            if not piece:
                continue
            if "#" in piece:
                resource, _, scope = piece.partition("#")
                if not resource and not scope:
                    raise InvalidRequest("permission: '#' names neither a resource nor a scope.")
                current = (resource or None, [scope] if scope else [])
                found.append(current)
            elif current is None:
                current = (piece, [])
                found.append(current)
            else:
                current[1].append(piece)
    if not found:
        raise InvalidRequest("permission: name at least one resource or scope (RES#SCOPE).")
    return [Wanted(resource, tuple(dict.fromkeys(scopes))) for resource, scopes in found]


def resolve(storage: Storage, audience: str, wanted: Sequence[Wanted]) -> list[RequestedPermission]:
    """The (set, scopes) pairs the permissions stand for, each set once (scopes merged, in the
    order asked). Raises InvalidResource or InvalidScope."""
    pairs: dict[str, list[str]] = {}
    for item in wanted:
        if item.resource is None:
            sets = [
                rs
                for rs in storage.resource_sets_registered_by(audience, None, MAX_SETS_BY_SCOPE)
                if all(scope in rs.scopes for scope in item.scopes)
            ]
            if not sets:
                raise InvalidScope(
                    f"permission: no resource set of {echo(audience)} registers"
                    f" {', '.join(echo(s) for s in item.scopes)}."
                )
            for rs in sets:
                pairs.setdefault(rs.id, []).extend(item.scopes)
            continue
        resource_set = _one_set(storage, audience, item.resource)
        unknown = [scope for scope in item.scopes if scope not in resource_set.scopes]
        if unknown:
            raise InvalidScope(
                f"permission: the scope {echo(unknown[0])} is not registered on the resource"
                f" {echo(item.resource)}."
            )
        pairs.setdefault(resource_set.id, []).extend(item.scopes or resource_set.scopes)
    return [RequestedPermission(rs_id, tuple(dict.fromkeys(s))) for rs_id, s in pairs.items()]


def _one_set(storage: Storage, audience: str, resource: str) -> ResourceSet:
    by_id = storage.find_resource_set(resource)
    if by_id is not None and by_id.client_id == audience:
        return by_id
    named = storage.resource_sets_registered_by(audience, resource, 2)
    if len(named) == 1:
        return named[0]
    several = "several resource sets" if named else "no resource set"
    raise InvalidResource(
        f"permission: {echo(resource)} is the id or name of {several} of {echo(audience)}."
    )


class Granted(NamedTuple):
    """What is granted on one set, and when the rules that granted it end (None: no end)."""

    resource_set: ResourceSet
    scopes: tuple[str, ...]
    ends_at: int | None = None


@dataclass
class Seen:
    """What deciding a ticketless request met, for its log line: the owners of the sets, and
    the rules that granted (in the order they did)."""

    owners: set[str] = field(default_factory=set)
    rules: list[str] = field(default_factory=list)


def decide_permissions(
    storage: Storage,
    rules: RulesFor,
    client: Supplier,
    party: str,
    claims: Sequence[Claim],
    pairs: Sequence[RequestedPermission],
    now: int | None = None,
    seen: Seen | None = None,
) -> tuple[list[Granted], bool]:
    """What is granted of the pairs (each set's owner's rules deciding), and whether every pair
    is granted whole. The sets' owners and the rules that granted are added to `seen`."""
    granted: list[Granted] = []
    whole = True
    for pair in pairs:
        resource_set = storage.find_resource_set(pair.resource_set_id)
        if resource_set is None:  # deleted since it was resolved
            whole = False
            continue
        owner = owner_name(storage, resource_set.owner)
        if seen is not None:
            seen.owners.add(owner)
        owned = rules(storage, owner)
        asked = [pair.scopes, *((scope,) for scope in pair.scopes if len(pair.scopes) > 1)]
        kept: list[str] = []
        ends: list[int] = []  # the ends of the rules that granted what is kept
        for scopes in asked:
            request = [RequestedPermission(resource_set.id, scopes)]
            decision = decide_ticket(storage, owned, owner, request, client, party, claims, now=now)
            if decision.outcome == "grant":
                if seen is not None:
                    seen.rules.extend(d for d in decision.rule_ids if d not in seen.rules)
                kept.extend(scopes)
                ends.extend(p.ends_at for p in decision.granted() if p.ends_at is not None)
                if scopes == pair.scopes:
                    break  # granted whole
        if tuple(kept) != pair.scopes:
            whole = False
        if kept:
            granted.append(
                Granted(resource_set, tuple(dict.fromkeys(kept)), min(ends, default=None))
            )
    return granted, whole


def request_permissions(
    storage: Storage,
    rules: RulesFor,
    client: Client,
    supplier: Supplier,
    *,
    party: str,
    claims: Sequence[Claim],
    audience: str,
    permissions: Sequence[str],
    response_mode: str | None,
    submit_request: bool,
    unverified_rpt: str | None,
    now: int,
    lifetimes: Lifetimes,
    rpt_keys: Sequence[bytes],
    jwt: JwtRpts | None = None,
    rpt_issuer: str = "",
    sharing: SharingSettings | None = None,
    outbox: notices.Outbox | None = None,
) -> Answer:
    """Keycloak's ticketless grant (see the module): `client` acts for `party` with `claims`.
    With `jwt`, a grant mints a JWT RPT whose `iss` is `rpt_issuer` (the realm's issuer)."""
    if response_mode is not None and response_mode not in RESPONSE_MODES:
        raise InvalidRequest(
            f"response_mode: {echo(response_mode)} is not one of {', '.join(RESPONSE_MODES)}."
        )
    wanted = parse_permissions(permissions)
    with storage.transaction():
        if storage.get_client(audience) is None:
            raise InvalidRequest(f"audience: {echo(audience)} is no client of this server.")
        pairs = resolve(storage, audience, wanted)
        upgrading = (
            own_rpt(storage, unverified_rpt, client, now, rpt_keys) if unverified_rpt else None
        )
        seen = Seen()
        granted, whole = decide_permissions(
            storage, rules, supplier, party, claims, pairs, now, seen
        )
        asked: set[str] = set()
        if submit_request and not whole and sharing is not None:
            asked = _ask_owners(storage, sharing, client, party, pairs, granted, now, outbox)
        answer = _answer(
            storage, client, party, granted, whole, response_mode, bool(asked), upgrading,
            unverified_rpt, now, lifetimes, rpt_keys[0], jwt, rpt_issuer,
        )  # fmt: skip
        _record(storage, client, party, pairs, granted, answer, response_mode, now, asked)
    decision_log.report(
        "grant" if answer.status == 200 else "deny",
        ",".join(sorted(seen.owners)),
        pairs,
        client.client_id,
        decision_log.party_of(storage, party, claims),
        seen.rules,
        grant="uma-ticket-keycloak",
    )
    return answer


def _record(
    storage: Storage,
    client: Client,
    party: str,
    pairs: Sequence[RequestedPermission],
    granted: list[Granted],
    answer: Answer,
    response_mode: str | None,
    now: int,
    asked: Collection[str] = (),
) -> None:
    """The history's events: one for each pair asked about, granted (the scopes granted),
    asked of its owner (`asked`: set ids) or refused (those asked); a grant when an RPT was
    issued, else a decision."""
    given = {rs.id: scopes for rs, scopes, _ in granted} if answer.status == 200 else {}
    issued = answer.status == 200 and response_mode is None
    for pair in pairs:
        resource_set = storage.find_resource_set(pair.resource_set_id)
        if resource_set is None:
            continue
        scopes = given.get(resource_set.id)
        access_history.record(
            storage,
            now=now,
            kind="grant" if issued and scopes else "decision",
            outcome="granted"
            if scopes
            else owner_requests.SUBMITTED
            if resource_set.id in asked
            else "refused",
            client=client,
            party=party,
            pairs=[(resource_set, scopes or pair.scopes, ())],
        )


def _ask_owners(
    storage: Storage,
    sharing: SharingSettings,
    client: Client,
    party: str,
    pairs: Sequence[RequestedPermission],
    granted: list[Granted],
    now: int,
    outbox: notices.Outbox | None,
) -> set[str]:
    """Asks each set's owner for the scopes of it the rules refused `party`; the ids of the sets
    asked (a request filed, or waiting already)."""
    given = {rs.id: scopes for rs, scopes, _ in granted}
    asked = set()
    for pair in pairs:
        refused = tuple(s for s in pair.scopes if s not in given.get(pair.resource_set_id, ()))
        resource_set = storage.find_resource_set(pair.resource_set_id)
        if not refused or resource_set is None:
            continue
        filed = owner_requests.file_request(
            storage,
            sharing,
            owner=resource_set.owner,
            pairs=(RequestedPermission(resource_set.id, refused),),
            ticket_digest=None,
            client=client,
            party=party,
            now=now,
            rs_name=resource_set.label,
            outbox=outbox,
        )
        if filed is not None and filed.request is not None:
            asked.add(resource_set.id)
    return asked


def _answer(
    storage: Storage,
    client: Client,
    party: str,
    granted: list[Granted],
    whole: bool,
    response_mode: str | None,
    submit_request: bool,
    upgrading: Rpt | None,
    unverified_rpt: str | None,
    now: int,
    lifetimes: Lifetimes,
    rpt_key: bytes,
    jwt: JwtRpts | None,
    rpt_issuer: str,
) -> Answer:
    if submit_request:  # the owners were asked for what was refused
        return _access_denied("request_submitted")
    if response_mode == "decision":
        return Answer(200, {"result": True}) if whole else _access_denied("not_authorized")
    if not granted:
        return _access_denied("not_authorized")
    if response_mode == "permissions":
        return Answer(
            200,
            [
                {"rsid": rs.id, "rsname": rs.label, "scopes": list(scopes)}
                for rs, scopes, _ in granted
            ],
        )
    permissions = [RequestedPermission(rs.id, scopes, ends_at) for rs, scopes, ends_at in granted]
    return grant_rpt(
        storage, now, client, party, upgrading, unverified_rpt, permissions, (), lifetimes, rpt_key,
        jwt=jwt, issuer=rpt_issuer,
    )  # fmt: skip


def _access_denied(description: str) -> Answer:
    return Answer(403, {"error": "access_denied", "error_description": description})

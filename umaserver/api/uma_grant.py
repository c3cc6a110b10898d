"""The UMA 2.0 grant at the token endpoint (`grant_type=urn:ietf:params:oauth:grant-type:uma-ticket`,
UMA 2.0 Grant section 3.3.1), as an Authlib grant: the client authenticates as at any grant (with
its secret: a public client cannot use it), must be registered for the grant, and sends `ticket`
with perhaps `claim_token` and `claim_token_format`, `pct`, `rpt` and `scope`
(`services.uma_grant` decides).

The answers `need_info` and `request_denied` carry members beyond `error` (`ticket`,
`required_claims`, `redirect_user`): they are answered as responses of their own, since Authlib's
error path keeps only `error` and `error_description`.

On Keycloak's realm face (`keycloak_request()`), Keycloak's extensions: a person's live PAT or AAT
as the Bearer credential instead of the client's (the person is the requesting party, the token's
client the acting one), and `audience` with `permission` instead of a ticket, with its
`response_mode` and `submit_request` (`services.keycloak_permissions`); a claim token of the format
`urn:ietf:params:oauth:token-type:jwt` is read as claims of `[keycloak] claim_token_type`.
"""

from __future__ import annotations

from typing import Any

from authlib.oauth2.rfc6749 import InvalidRequestError, UnauthorizedClientError, grants
from flask import g
from flask import request as flask_request

from ..errors import InvalidToken
from ..runtime import runtime
from ..services import keycloak_permissions, notices, uma_grant
from ..services.account_claims import account_claims
from ..services.accounts import find_access_token
from ..services.decision import Supplier, sign_in_providers
from ..storage.per_request import storage
from ..storage.records import AccessToken
from .code_grants import TOKEN_AUTH_METHODS, OAuthClient

_PARAMETERS = ("ticket", "claim_token", "claim_token_format", "pct", "rpt", "scope")
_KEYCLOAK = "umaserver_keycloak_request"


def mark_keycloak_request() -> None:
    """This token request came through Keycloak's realm face: its extensions apply."""
    setattr(g, _KEYCLOAK, True)


def keycloak_request() -> bool:
    return bool(getattr(g, _KEYCLOAK, False))


def person_bearer() -> AccessToken | None:
    """On the realm face, the person's PAT or AAT sent as `Authorization: Bearer` (live, and
    issued for a person); None without such a header. An unknown, expired or revoked token, or one
    a client holds for itself, is 401 invalid_token."""
    if not keycloak_request():
        return None
    scheme, _, value = flask_request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = find_access_token(storage(), value.strip(" "))
    if (
        token is None
        or token.revoked
        or token.expires_at <= runtime().clock.now()
        or token.user_sub is None
    ):
        raise InvalidToken(
            "The Bearer token is not a live token of a person (a PAT or AAT issued for a user).",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return token


class UmaTicketGrant(grants.BaseGrant, grants.TokenEndpointMixin):  # type: ignore[misc]
    GRANT_TYPE = uma_grant.UMA_TICKET
    TOKEN_ENDPOINT_AUTH_METHODS = list(TOKEN_AUTH_METHODS)

    def validate_token_request(self) -> None:
        person = person_bearer()
        if person is not None:
            # The person's token stands for the consent UMA rests on: its client acts.
            found = storage().get_client(person.client_id)
            if found is None:
                raise InvalidToken(headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
            client = OAuthClient(found)
        else:
            client = self.authenticate_token_endpoint_client()
            if not client.check_grant_type(self.GRANT_TYPE):
                raise UnauthorizedClientError(
                    "This client is not registered for the uma-ticket grant (grant_types)."
                )
        self.request.client = client
        self.request.person = person
        form = self.request.form
        if form.get("ticket"):
            return
        if not keycloak_request():
            raise InvalidRequestError("ticket: the permission ticket is required.")
        if not form.get("audience") or not flask_request.form.getlist("permission"):
            raise InvalidRequestError(
                "ticket: the permission ticket is required, or audience and permission"
                " (Keycloak's form)."
            )

    def create_token_response(self) -> tuple[int, Any, list[tuple[str, str]]]:
        form = self.request.form
        optional: dict[str, Any] = {
            name: form.get(name) or None for name in _PARAMETERS if name != "ticket"
        }
        uma = runtime()
        config = uma.config
        person: AccessToken | None = self.request.person
        client = self.request.client.client
        keycloak = keycloak_request()
        jwt_type = config.keycloak.claim_token_type if keycloak else None
        # A JWT RPT's `iss`: the issuer of the document the client was sent through (the realm's,
        # `keycloak_realm.realm_issuer`, on the realm face).
        rpt_issuer = (
            f"{config.issuer}/realms/{config.keycloak.realm}" if keycloak else config.issuer
        )
        now = uma.clock.now()
        # The person whose token the client acts with: this server's word about their account.
        account = (
            account_claims(
                storage(), person.user_sub, config.issuer, client_id=client.client_id, now=now
            )
            if person is not None and person.user_sub is not None
            else []
        )
        if not form.get("ticket"):
            pushed = keycloak_permissions.read_claims(
                optional["claim_token"],
                optional["claim_token_format"],
                client,
                uma.verifiers,
                now,
                config.limits,
                jwt_type,
            )
            answer = keycloak_permissions.request_permissions(
                storage(),
                uma.rules_for,
                client,
                Supplier.of(client.client_id, client.push_claim_types, uma.verifiers),
                party=person.user_sub
                if person and person.user_sub
                else f"client:{client.client_id}",
                claims=[*pushed.claims, *account],
                audience=form["audience"],
                permissions=flask_request.form.getlist("permission"),
                response_mode=form.get("response_mode") or None,
                submit_request=form.get("submit_request", "").lower() == "true",
                unverified_rpt=optional["rpt"],
                now=now,
                lifetimes=config.lifetimes,
                rpt_keys=uma.rpt_keys,
                jwt=uma.jwt_rpts,
                rpt_issuer=rpt_issuer,
                sharing=config.sharing,
                outbox=notices.Outbox.of(config),
            )
        else:
            answer = uma_grant.request_rpt(
                storage(),
                uma.rules_for,
                client,
                uma_grant.GrantRequest(
                    ticket=form["ticket"],
                    submit_request=form.get("submit_request", "").lower() == "true",
                    **optional,
                ),
                now=now,
                verifiers=uma.verifiers,
                lifetimes=config.lifetimes,
                limits=config.limits,
                rpt_keys=uma.rpt_keys,
                server_issuer=config.issuer,
                sign_in_providers=sign_in_providers(config.oidc_issuers),
                person=person.user_sub if person else None,
                account=account,
                jwt_type=jwt_type,
                jwt=uma.jwt_rpts,
                rpt_issuer=rpt_issuer,
                sharing=config.sharing,
                outbox=notices.Outbox.of(config),
            )
        return answer.status, answer.body, [("Cache-Control", "no-store"), ("Pragma", "no-cache")]

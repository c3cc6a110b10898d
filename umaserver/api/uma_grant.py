"""The UMA 2.0 grant at the token endpoint (`grant_type=urn:ietf:params:oauth:grant-type:uma-ticket`,
UMA 2.0 Grant section 3.3.1), as an Authlib grant: the client authenticates as at any grant (with
its secret: a public client cannot use it), must be registered for the grant, and sends `ticket`
with perhaps `claim_token` and `claim_token_format`, `pct`, `rpt` and `scope`
(`services.uma_grant` decides).

The answers `need_info` and `request_denied` carry members beyond `error` (`ticket`,
`required_claims`, `redirect_user`): they are answered as responses of their own, since Authlib's
error path keeps only `error` and `error_description`.
"""

from __future__ import annotations

from typing import Any

from authlib.oauth2.rfc6749 import InvalidRequestError, UnauthorizedClientError, grants

from ..runtime import runtime
from ..services import uma_grant
from ..services.decision import sign_in_providers
from ..storage.per_request import storage
from .code_grants import TOKEN_AUTH_METHODS, OAuthClient

_PARAMETERS = ("ticket", "claim_token", "claim_token_format", "pct", "rpt", "scope")


class UmaTicketGrant(grants.BaseGrant, grants.TokenEndpointMixin):  # type: ignore[misc]
    GRANT_TYPE = uma_grant.UMA_TICKET
    TOKEN_ENDPOINT_AUTH_METHODS = list(TOKEN_AUTH_METHODS)

    def validate_token_request(self) -> None:
        client: OAuthClient = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE):
            raise UnauthorizedClientError(
                "This client is not registered for the uma-ticket grant (grant_types)."
            )
        self.request.client = client
        if not self.request.form.get("ticket"):
            raise InvalidRequestError("ticket: the permission ticket is required.")

    def create_token_response(self) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        form = self.request.form
        optional = {name: form.get(name) or None for name in _PARAMETERS if name != "ticket"}
        uma = runtime()
        config = uma.config
        answer = uma_grant.request_rpt(
            storage(),
            uma.rules_for,
            self.request.client.client,
            uma_grant.GrantRequest(ticket=form["ticket"], **optional),
            now=uma.clock.now(),
            verifiers=uma.verifiers,
            lifetimes=config.lifetimes,
            limits=config.limits,
            rpt_key=uma.rpt_key,
            server_issuer=config.issuer,
            sign_in_providers=sign_in_providers(config.oidc_issuers),
        )
        return answer.status, answer.body, [("Cache-Control", "no-store"), ("Pragma", "no-cache")]

"""The claim verifiers of this deployment: SAML assertions and ID tokens checked against the
identity providers listed in the config. Plain Python; `claims.model.read_claim_objects` calls them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..claims.id_tokens import oidc_value
from ..claims.key_sets import KeySets
from ..claims.model import OIDC_TYPE, SAML_TYPE, Assertion, ClaimsError, VerifiedClaims
from ..claims.saml import SamlSettings, assertion_claims, verify_assertion
from ..config import Config


class ConfiguredVerifiers:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.saml_settings = SamlSettings(
            audience=config.issuer,
            max_bytes=config.claims.saml_max_bytes,
            clock_skew=config.claims.clock_skew,
            allow_sha1=config.claims.saml_allow_sha1,
        )
        # Loads jwks_file keys now (a broken file stops the start); jwks_uri keys arrive from
        # the background thread that `start` begins, never inside a request.
        self.key_sets = KeySets(
            config.oidc_issuers,
            fetch_timeout=config.claims.jwks_fetch_timeout,
            max_bytes=config.claims.jwks_max_bytes,
            refresh_interval=config.claims.jwks_refresh,
        )

    def start(self) -> None:
        self.key_sets.start()

    def stop(self) -> None:
        self.key_sets.stop()

    def saml(self, value: Mapping[str, Any], client_id: str, now: int) -> VerifiedClaims:
        if not self.config.saml_idps:
            raise ClaimsError("SAML assertion refused: no identity provider is configured")
        if "saml_assertion" not in value:
            raise ClaimsError("SAML assertion refused: the value has no 'saml_assertion'")
        verified = verify_assertion(
            value["saml_assertion"], self.config.saml_idps, self.saml_settings, now
        )
        return VerifiedClaims(
            tuple(assertion_claims(verified, client_id, now)),
            (
                Assertion(
                    verified.issuer,
                    verified.assertion_id,
                    verified.expires_at,
                    one_time=verified.one_time,
                    subject=verified.subject,
                ),
            ),
        )

    def oidc(self, value: Mapping[str, Any], client_id: str, now: int) -> VerifiedClaims:
        return oidc_value(
            value,
            issuers=self.config.oidc_issuers,
            key_sets=self.key_sets,
            client_id=client_id,
            now=now,
            skew=self.config.claims.clock_skew,
            max_lifetime=self.config.claims.id_token_max_lifetime,
        )

    def issuers(self, claim_type: str) -> tuple[str, ...]:
        if claim_type == SAML_TYPE:
            return tuple(idp.entity_id for idp in self.config.saml_idps)
        if claim_type == OIDC_TYPE:
            return tuple(issuer.issuer for issuer in self.config.oidc_issuers)
        return ()

"""The OpenID Connect providers of the configuration, checked as they are read.

An `OidcIssuer` is one provider whose ID tokens we believe: its `iss`, the audiences we accept, the
signature algorithms allowed, and where its keys come from. `key_sets` holds the keys themselves,
`id_tokens` verifies tokens against both. A provider with a `client_id` is also a *sign-in
provider*: people sign in there, and this server is its relying party (`pages.external_signin`),
with the endpoints given here or found by discovery (`oidc_discovery`). Plain Python: no Flask here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

from joserfc.jwk import KeySet

from umaserver.claims.jwks import load_jwks_file

#: Asymmetric JWS algorithms only. "none" proves nothing, and an HMAC "secret" would be the
#: provider's public key, which anyone can read (the classic RS256/HS256 confusion).
SUPPORTED_ALGORITHMS = frozenset(
    {
        "RS256",
        "RS384",
        "RS512",
        "PS256",
        "PS384",
        "PS512",
        "ES256",
        "ES384",
        "ES512",
        "EdDSA",
        "Ed25519",
    }
)
DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
DEFAULT_SCOPES = ("openid", "email", "profile")
ENDPOINTS = ("authorization_endpoint", "token_endpoint", "userinfo_endpoint")


@dataclass(frozen=True)
class OidcIssuer:
    """An OpenID Connect provider whose ID tokens we believe.

    `issuer` is compared exactly with the token's `iss`; `audiences` are the `aud` values we
    accept (usually the pushing client's id at that provider). The keys come from exactly one
    of `jwks_file` (read once at start) or `jwks_uri` (fetched and refreshed in the background).
    """

    issuer: str
    audiences: tuple[str, ...]
    jwks_file: Path | None = None
    jwks_uri: str | None = None
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    # Our client_id -> that client's id at the provider: a token pushed by a listed client must be
    # addressed to that id (and, with several audiences, authorized to it by `azp`). Clients not
    # listed are held to `audiences`.
    client_audiences: Mapping[str, str] = field(default_factory=dict, hash=False)
    # A sign-in provider: our client there. Its ID tokens sent to us at sign-in are addressed to
    # `client_id`; `audiences` then may be empty (tokens pushed by clients are held to it).
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    # Shown to people ("Sign in with ..."); the issuer when not given.
    display_name: str = ""
    # Given explicitly, or (both left out) found by discovery of `discovery_url`.
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    userinfo_endpoint: str | None = None
    # The keys of `jwks_file`, read when the configuration is, so that a missing or broken file
    # is reported with every other configuration error.
    file_keys: KeySet | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.issuer, str) or not self.issuer:
            raise ValueError("an OIDC issuer needs a non-empty 'issuer'")
        name = repr(self.issuer)
        # A TOML string where a list belongs would otherwise become a tuple of characters.
        audiences: object = self.audiences
        if isinstance(audiences, str):
            raise ValueError(f"'audiences' of OIDC issuer {name} must be a list of strings")
        object.__setattr__(self, "audiences", tuple(self.audiences))
        if not all(isinstance(a, str) and a for a in self.audiences):
            raise ValueError(f"'audiences' of OIDC issuer {name} must be non-empty strings")
        pairs: object = self.client_audiences
        if not isinstance(pairs, Mapping) or not all(
            isinstance(ours, str) and ours and isinstance(theirs, str) and theirs
            for ours, theirs in pairs.items()
        ):
            raise ValueError(
                f"'client_audiences' of OIDC issuer {name} must map client ids to non-empty strings"
            )
        object.__setattr__(self, "client_audiences", MappingProxyType(dict(pairs)))
        if not self.audiences and not self.client_audiences and self.client_id is None:
            raise ValueError(
                f"OIDC issuer {name} needs at least one non-empty audience (or client_audiences)"
            )
        algorithms: object = self.algorithms
        if isinstance(algorithms, str):
            raise ValueError(f"'algorithms' of OIDC issuer {name} must be a list of strings")
        object.__setattr__(self, "algorithms", tuple(self.algorithms))
        if not self.algorithms:
            raise ValueError(f"OIDC issuer {name} needs at least one algorithm")
        for alg in self.algorithms:
            if alg not in SUPPORTED_ALGORITHMS:
                raise ValueError(
                    f"algorithm {alg!r} of OIDC issuer {name} is not allowed for ID tokens;"
                    f" use asymmetric ones: {', '.join(sorted(SUPPORTED_ALGORITHMS))}"
                )
        if (self.jwks_file is None) == (self.jwks_uri is None):
            raise ValueError(f"OIDC issuer {name} needs exactly one of 'jwks_file' or 'jwks_uri'")
        if self.jwks_file is not None:
            object.__setattr__(self, "jwks_file", Path(self.jwks_file))
            object.__setattr__(self, "file_keys", load_jwks_file(Path(self.jwks_file), self.issuer))
        if self.jwks_uri is not None:
            # Over plain http anyone on the path could swap the keys and sign tokens of their own.
            check_url(self.jwks_uri, "jwks_uri", name)
        self._check_sign_in(name)

    @property
    def signs_in(self) -> bool:
        """Whether people sign in at this provider (we are its relying party)."""
        return self.client_id is not None

    @property
    def discovers(self) -> bool:
        """Whether the endpoints of this sign-in provider come from its discovery document."""
        return self.signs_in and self.authorization_endpoint is None

    @property
    def discovery_url(self) -> str:
        """OpenID Connect Discovery 1.0, 4: the issuer with /.well-known/openid-configuration."""
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    def _check_sign_in(self, name: str) -> None:
        given = [key for key in ENDPOINTS if getattr(self, key) is not None]
        if self.client_id is None:
            if self.client_secret is not None or given or self.scopes != DEFAULT_SCOPES:
                raise ValueError(
                    f"OIDC issuer {name}: 'client_secret', 'scopes' and the endpoints are for a"
                    " sign-in provider; give its 'client_id' too"
                )
            object.__setattr__(self, "display_name", self.display_name or self.issuer)
            return
        if not isinstance(self.client_id, str) or not self.client_id:
            raise ValueError(f"'client_id' of OIDC issuer {name} must be a non-empty string")
        if not isinstance(self.client_secret, str) or not self.client_secret:
            raise ValueError(
                f"OIDC issuer {name} signs people in ('client_id'): give its 'client_secret' too"
            )
        scopes: object = self.scopes
        if isinstance(scopes, str):
            raise ValueError(f"'scopes' of OIDC issuer {name} must be a list of strings")
        object.__setattr__(self, "scopes", tuple(dict.fromkeys(self.scopes)))
        if not all(isinstance(s, str) and s and " " not in s for s in self.scopes):
            raise ValueError(f"'scopes' of OIDC issuer {name} must be non-empty words")
        if "openid" not in self.scopes:
            raise ValueError(
                f"'scopes' of OIDC issuer {name} must include \"openid\" (OpenID Connect sign-in)"
            )
        if not isinstance(self.display_name, str):
            raise ValueError(f"'display_name' of OIDC issuer {name} must be a string")
        object.__setattr__(self, "display_name", self.display_name.strip() or self.issuer)
        explicit = {"authorization_endpoint", "token_endpoint"}
        if explicit & set(given) and not explicit <= set(given):
            raise ValueError(
                f"OIDC issuer {name}: give both 'authorization_endpoint' and 'token_endpoint'"
                " (or neither, to find them by discovery)"
            )
        if "userinfo_endpoint" in given and not explicit <= set(given):
            raise ValueError(
                f"OIDC issuer {name}: 'userinfo_endpoint' is given with the other endpoints"
                " (or found by discovery with them)"
            )
        for key in given:
            check_url(getattr(self, key), key, name)
        if not given:
            # The discovery document is fetched from the issuer's own URL.
            check_url(self.issuer, "issuer", name, " (its endpoints are found by discovery)")


def check_url(url: object, key: str, name: str, why: str = "") -> None:
    """An absolute https URL; plain http only on loopback (where no one else is on the path)."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"'{key}' of OIDC issuer {name} must be an absolute http(s) URL{why}")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError(
            f"'{key}' of OIDC issuer {name} must use https{why}; plain http is allowed"
            " only for loopback hosts (127.0.0.0/8, ::1, localhost)"
        )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

"""The OpenID Connect providers of the configuration, checked as they are read.

An `OidcIssuer` is one provider whose ID tokens we believe: its `iss`, the audiences we accept, the
signature algorithms allowed, and where its keys come from. `key_sets` holds the keys themselves,
`id_tokens` verifies tokens against both. Plain Python: no Flask here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

from joserfc.jwk import KeySet

from umaserver.claims.key_sets import load_jwks_file

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
        if not self.audiences and not self.client_audiences:
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
            parts = urlsplit(self.jwks_uri)
            if parts.scheme not in ("https", "http") or not parts.hostname:
                raise ValueError(
                    f"'jwks_uri' of OIDC issuer {name} must be an absolute http(s) URL"
                )
            # Over plain http anyone on the path could swap the keys and sign tokens of their own.
            if parts.scheme == "http" and not _is_loopback(parts.hostname):
                raise ValueError(
                    f"'jwks_uri' of OIDC issuer {name} must use https; plain http is allowed"
                    " only for loopback hosts (127.0.0.0/8, ::1, localhost)"
                )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

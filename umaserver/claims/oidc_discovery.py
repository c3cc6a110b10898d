"""Where a sign-in provider's endpoints are: given in the config, or read from its discovery
document (OpenID Connect Discovery 1.0, 4) with bounds: one GET, a short timeout, a size cap, no
redirect. The document's `issuer` must equal the configured issuer exactly (4.3: otherwise a
document served by anyone could send our code exchanges elsewhere), and its endpoints obey the
same rule as the config's (https; plain http only on loopback). Plain Python: no Flask here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests
import urllib3

from umaserver import strict_json
from umaserver.claims.oidc_issuers import OidcIssuer, check_url
from umaserver.http_bodies import BodyError, read_body


class DiscoveryError(Exception):
    """The discovery document could not be had or used; the message says why (for the log)."""


@dataclass(frozen=True)
class ProviderEndpoints:
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str | None = None


def configured_endpoints(issuer: OidcIssuer) -> ProviderEndpoints | None:
    """The endpoints given in the config, or None when they are to be discovered."""
    if issuer.authorization_endpoint is None or issuer.token_endpoint is None:
        return None
    return ProviderEndpoints(
        issuer.authorization_endpoint, issuer.token_endpoint, issuer.userinfo_endpoint
    )


def discover(issuer: OidcIssuer, timeout: float, max_bytes: int) -> ProviderEndpoints:
    """The endpoints of `issuer`'s discovery document; DiscoveryError when it cannot be used."""
    try:
        with requests.get(
            issuer.discovery_url,
            headers={"Accept": "application/json", "Accept-Encoding": "identity"},
            timeout=timeout,
            stream=True,
            allow_redirects=False,
        ) as response:
            if response.status_code != 200:
                raise DiscoveryError(f"the server answered HTTP {response.status_code}")
            document = strict_json.loads_object(read_body(response, timeout, max_bytes))
    except (requests.RequestException, urllib3.exceptions.HTTPError, BodyError) as error:
        raise DiscoveryError(str(error)) from error
    except strict_json.StrictJSONError as error:
        raise DiscoveryError(f"it is not a JSON object ({error})") from error
    if document.get("issuer") != issuer.issuer:
        raise DiscoveryError(
            f"its issuer {str(document.get('issuer'))[:100]!r} is not {issuer.issuer!r}"
        )
    found: dict[str, Any] = {}
    for key in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint"):
        value = document.get(key)
        if value is None and key == "userinfo_endpoint":
            continue
        try:
            check_url(value, key, repr(issuer.issuer))
        except ValueError as error:
            raise DiscoveryError(str(error)) from error
        found[key] = value
    return ProviderEndpoints(**found)

"""The settings of the claim issuers this server trusts: `[[saml_idps]]` (their certificates
inline as PEM or as files) and `[[oidc_issuers]]` (those whose ID tokens clients may push, and
the sign-in providers with a client_id), each read from its table into the object the claims code
verifies with. Errors go to the reader's list, like every other setting's (`config.parse_config`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .claims.oidc_issuers import DEFAULT_ALGORITHMS, DEFAULT_SCOPES, OidcIssuer
from .claims.oidc_issuers import ENDPOINTS as OIDC_ENDPOINTS
from .claims.saml import SamlIdp
from .toml_reader import TableReader, non_empty

PEM_BEGIN = "-----BEGIN CERTIFICATE-----"


def _certificate(text: str, base: Path, name: str, errors: list[str]) -> str:
    """A certificate given inline as PEM, or as the path of a PEM file."""
    if text.lstrip().startswith(PEM_BEGIN):
        return text
    path = base / text
    try:
        pem = path.read_text(encoding="utf-8")
    except OSError as error:
        errors.append(f"{name}: cannot read {path}: {error.strerror}")
        return ""
    if PEM_BEGIN not in pem:
        errors.append(f"{name}: {path} holds no PEM certificate")
    return pem


def saml_idp(reader: TableReader, base: Path) -> SamlIdp | None:
    entity_id = reader.take("entity_id", str, check=non_empty)
    certificates = reader.strings("certificates", required=True)
    pems = tuple(
        _certificate(text, base, f"{reader.where}.certificates[{i}]", reader.errors)
        for i, text in enumerate(certificates)
    )
    attributes = reader.strings("attributes")
    name_id_as_sub = reader.take("name_id_as_sub", bool, True)
    recipients = reader.strings("recipients")
    reader.finish()
    if not entity_id or not pems or not all(pems):
        return None
    try:
        return SamlIdp(entity_id, pems, attributes, name_id_as_sub, recipients)
    except ValueError as error:
        reader.errors.append(f"{reader.where}: {error}")
        return None


def unchecked_recipients(idps: Sequence[SamlIdp]) -> list[str]:
    """A warning for each identity provider without `recipients` (`init` and `serve` say them)."""
    return [
        f"[[saml_idps]] {idp.entity_id} has no `recipients`: an assertion it made for another"
        " service is accepted here too (the Recipient of its bearer confirmation is not"
        " checked). List the assertion consumer URLs of the clients that push its assertions."
        for idp in idps
        if not idp.recipients
    ]


def oidc_issuer(reader: TableReader, base: Path) -> OidcIssuer | None:
    issuer = reader.take("issuer", str, check=non_empty)
    # A sign-in provider (with client_id): the ID tokens it sends us are addressed to client_id.
    signs_in = "client_id" in reader.table
    client_id = reader.take("client_id", str, "", non_empty) or None
    sign_in_keys = [
        key
        for key in ("client_secret", "scopes", "display_name", *OIDC_ENDPOINTS)
        if key in reader.table
    ]
    if not signs_in and sign_in_keys:
        reader.errors.append(
            f"{reader.where}: {', '.join(sign_in_keys)} only apply to a sign-in provider;"
            " give its client_id too"
        )
    client_secret = reader.take("client_secret", str, "", non_empty) or None
    if signs_in and "client_secret" not in sign_in_keys:
        reader.errors.append(f"{reader.where}.client_secret: missing (client_id is given)")
    scopes = reader.strings("scopes") or DEFAULT_SCOPES
    display_name = reader.take("display_name", str, "", non_empty)
    endpoints = {key: reader.take(key, str, "", non_empty) or None for key in OIDC_ENDPOINTS}
    client_audiences = reader.string_map("client_audiences")
    audiences = reader.strings("audiences", required=not client_audiences and client_id is None)
    jwks_file = reader.take("jwks_file", str, "")
    jwks_uri = reader.take("jwks_uri", str, "")
    if bool(jwks_file) == bool(jwks_uri):
        reader.errors.append(f"{reader.where}: give exactly one of jwks_file and jwks_uri")
    algorithms = reader.strings("algorithms") or DEFAULT_ALGORITHMS
    reader.finish()
    if not issuer or bool(jwks_file) == bool(jwks_uri):
        return None
    if not (audiences or client_audiences or client_id):
        return None
    if (client_id is None and sign_in_keys) or (client_id is not None and client_secret is None):
        return None
    try:
        return OidcIssuer(
            issuer=issuer,
            audiences=audiences,
            client_audiences=client_audiences,
            jwks_file=(base / jwks_file).resolve() if jwks_file else None,
            jwks_uri=jwks_uri or None,
            algorithms=algorithms,
            client_id=client_id,
            client_secret=client_secret,
            scopes=scopes,
            display_name=display_name,
            **endpoints,
        )
    except ValueError as error:
        reader.errors.append(f"{reader.where}: {error}")
        return None

"""A JSON Web Key Set read from its bytes: an OIDC issuer's `jwks_file` at start
(`load_jwks_file`), or what `key_sets` fetched from its `jwks_uri` (`parse_jwks`). Only public
signature keys are kept. Plain Python: no Flask here.
"""

from __future__ import annotations

import logging
from pathlib import Path

from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry, Key, KeySet

from umaserver import strict_json

logger = logging.getLogger("umaserver.keys")


class JwksError(ValueError):
    """A JWK set could not be read, fetched or used; the message says why."""


def load_jwks_file(path: Path, issuer: str) -> KeySet:
    """The keys of a JWKS file; ValueError naming the file and the issuer when it is unusable."""
    try:
        return parse_jwks(path.read_bytes())
    except OSError as error:
        raise ValueError(
            f"JWKS file {str(path)!r} of OIDC issuer {issuer!r} cannot be read: {error.strerror}"
        ) from error
    except JwksError as error:
        raise ValueError(
            f"JWKS file {str(path)!r} of OIDC issuer {issuer!r} cannot be used: {error}"
        ) from error


def parse_jwks(data: bytes) -> KeySet:
    """A JWK set of public signature keys; RFC 7517, 5: keys we cannot use are skipped."""
    try:
        document = strict_json.loads(data)
    except strict_json.StrictJSONError as error:
        raise JwksError(f"it is not a JSON object ({error})") from error
    if not isinstance(document, dict):
        raise JwksError("it is not a JSON object")
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise JwksError("it is not a JWK set (an object with a 'keys' array)")
    keys: list[Key] = []
    for index, entry in enumerate(entries):
        key = _public_signature_key(entry, index)
        if key is not None:
            keys.append(key)
    if not keys:
        raise JwksError("it holds no usable public signature key")
    return KeySet(keys)


def _public_signature_key(entry: object, index: int) -> Key | None:
    if not isinstance(entry, dict):
        logger.info("JWKS key %d skipped: not an object", index)
        return None
    # A symmetric secret has no place in a published key set; a key for encryption signs nothing.
    if entry.get("kty") == "oct" or entry.get("use", "sig") != "sig":
        logger.info("JWKS key %d skipped: not a public signature key", index)
        return None
    try:
        key = JWKRegistry.import_key(entry)
        if key.is_private:
            # Keep only the public half of a key published by mistake with its private part.
            key = JWKRegistry.import_key(key.as_dict(private=False))
    except (JoseError, ValueError, TypeError, KeyError) as error:
        logger.info("JWKS key %d skipped: %s", index, error)
        return None
    return key

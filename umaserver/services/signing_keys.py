"""The keys that sign JWT RPTs (`[tokens] rpt_format = "jwt"`), and the JWKS that publishes them.

One key is current: new RPTs are signed with it. `rotate` makes a new current key; the ones before
still verify, and stay in the JWKS, until `retire` drops every key that is not current. Each key's
kid is the RFC 7638 thumbprint of its public key. The private key is stored sealed (AES-GCM under
a key derived from `secret_key`, `secrets_at_rest.seal`), never in clear; a decrypted key is kept
in this process's memory by kid (the store stays the one truth: a kid names one key forever).

A key is made only when one is needed (RSA takes a tenth of a second): by `init` and `serve` when
the RPT format is jwt and no current key of the configured algorithm exists, and otherwise by the
first RPT signed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, RSAKey

from .. import secrets_at_rest
from ..config import Config
from ..errors import ServerError
from ..storage import Storage
from ..storage.records import SigningKey

log = logging.getLogger("umaserver")

RSA_BITS = 2048
ALGORITHMS = ("RS256", "ES256")
# What the sealing key is derived for (`secrets_at_rest.sealing_key`).
SEALING_PURPOSE = "signing keys"
# How long a resource server or a cache may keep /jwks: a rotated key appears within this.
JWKS_MAX_AGE = 300


@dataclass(frozen=True)
class JwtRpts:
    """How RPTs are signed: the algorithm of new keys, and the keys that seal and open the stored
    private keys (the first seals; any opens)."""

    algorithm: str
    sealing_keys: tuple[bytes, ...] = field(repr=False)

    @classmethod
    def of(cls, algorithm: str, secret_keys: Sequence[str]) -> JwtRpts:
        """Sealing under the first of `secret_keys`, opening under any of them."""
        return cls(
            algorithm,
            tuple(secrets_at_rest.sealing_key(key, SEALING_PURPOSE) for key in secret_keys),
        )


def configured(config: Config) -> JwtRpts | None:
    """How RPTs are signed under `config`: None for opaque RPTs (the default)."""
    if config.tokens.rpt_format != "jwt":
        return None
    return JwtRpts.of(config.tokens.jwt_algorithm, config.secret_keys)


Key = RSAKey | ECKey


def new_signing_key(algorithm: str, sealing_key: bytes, now: int) -> SigningKey:
    """A new key pair of `algorithm` (RS256: RSA 2048; ES256: P-256), sealed."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"jwt_algorithm must be one of {', '.join(ALGORITHMS)}")
    key: Key = (
        RSAKey.generate_key(RSA_BITS, private=True)
        if algorithm == "RS256"
        else ECKey.generate_key("P-256", private=True)
    )
    kid = key.thumbprint()
    public = {**key.as_dict(private=False), "kid": kid, "use": "sig", "alg": algorithm}
    sealed = secrets_at_rest.seal(sealing_key, key.as_pem(private=True), kid)
    return SigningKey(kid, algorithm, public, sealed, now, current=True)


def ensure_signing_key(storage: Storage, settings: JwtRpts, now: int) -> SigningKey:
    """The current key, made first when there is none or it is of another algorithm than the
    configured one (which then replaces it as `rotate` does)."""
    current = storage.current_signing_key()
    if current is not None and current.algorithm == settings.algorithm:
        return current
    made = new_signing_key(settings.algorithm, settings.sealing_keys[0], now)
    storage.add_signing_key(made, replace_current=current is not None)
    # Another process may have made one at the same moment: the stored one is the current one.
    found = storage.current_signing_key()
    return found if found is not None else made


class KeyUnusable(Exception):
    """The current key does not open with this secret_key (it was changed, or the database
    copied from another server): the message says what to do."""


def ready_signing_key(storage: Storage, settings: JwtRpts, now: int) -> SigningKey:
    """`ensure_signing_key`, and the key opened once (what `init` and `serve` check, so that an
    operator hears of a changed secret_key at start rather than from a failing grant), every
    stored key sealed under the first of `secret_keys` first (`reseal`)."""
    reseal(storage, settings)
    key = ensure_signing_key(storage, settings, now)
    _KEYS.private(key, settings)
    return key


def reseal(storage: Storage, settings: JwtRpts) -> list[str]:
    """Seals again under the first sealing key each stored private key that opens only under a
    later one (made under a secret key that `secret_keys` now lists after a new one), so that
    the old secret key can then be removed: their kids. A key that no listed key opens is left
    as it is (`ready_signing_key` names the current one)."""
    first, later = settings.sealing_keys[0], settings.sealing_keys[1:]
    resealed = []
    for key in storage.signing_keys():
        try:
            secrets_at_rest.unseal([first], key.sealed_key, key.kid)
            continue
        except secrets_at_rest.SealBroken:
            pass
        try:
            pem = secrets_at_rest.unseal(later, key.sealed_key, key.kid)
        except secrets_at_rest.SealBroken:
            continue
        sealed = secrets_at_rest.seal(first, pem, key.kid)
        if storage.reseal_signing_key(key.kid, key.sealed_key, sealed):
            resealed.append(key.kid)
    if resealed:
        log.info("signing keys sealed again under the first secret key: kids=%s", resealed)
    return resealed


def rotate(storage: Storage, settings: JwtRpts, now: int) -> SigningKey:
    """A new current key; the one before still verifies until `retire`."""
    made = new_signing_key(settings.algorithm, settings.sealing_keys[0], now)
    storage.add_signing_key(made, replace_current=True)
    return made


def retire(storage: Storage) -> list[str]:
    """Drops every key that is not current (RPTs signed with them stop verifying): their kids."""
    return storage.retire_signing_keys()


def describe(key: SigningKey) -> dict[str, Any]:
    """A key as `keys list` shows it: never its private part."""
    return {
        "kid": key.kid,
        "algorithm": key.algorithm,
        "created": key.created_at,
        "current": key.current,
    }


def public_jwks(storage: Storage) -> dict[str, Any]:
    """The JWKS (RFC 7517 5) of every key that verifies RPTs now, current first: `kty`, `kid`,
    `use` ("sig"), `alg` and the public parameters. Served at /jwks (and by any other route that
    publishes the same keys)."""
    keys = sorted(storage.signing_keys(), key=lambda key: not key.current)
    return {"keys": [dict(key.public_jwk) for key in keys]}


class _Keys:
    """Keys read from their stored form, by kid: a private key is opened (and an RSA key checked)
    once per process, not once per RPT."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._private: dict[tuple[str, str, tuple[bytes, ...]], Key] = {}
        self._public: dict[tuple[str, str], Key] = {}

    def private(self, key: SigningKey, settings: JwtRpts) -> Key:
        # Opened with these sealing keys: under another secret_key it must open again (or not).
        index = (key.kid, key.sealed_key, settings.sealing_keys)
        with self._lock:
            found = self._private.get(index)
        if found is None:
            try:
                pem = secrets_at_rest.unseal(settings.sealing_keys, key.sealed_key, key.kid)
            except secrets_at_rest.SealBroken:
                raise KeyUnusable(
                    f"The current signing key {key.kid} does not open with this secret_key (was"
                    " it changed, or the database copied from another server?): restore the"
                    " secret_key (or list the old one after the new in secret_keys), or run"
                    " `umaserver keys rotate` to make a new key (RPTs signed with the old one"
                    " still verify until `keys retire`)."
                ) from None
            found = _import(key.algorithm, pem)
            with self._lock:
                self._private[index] = found
        return found

    def public(self, key: SigningKey) -> Key:
        index = (key.kid, json.dumps(key.public_jwk, sort_keys=True))
        with self._lock:
            found = self._public.get(index)
        if found is None:
            found = _import(key.algorithm, key.public_jwk)
            with self._lock:
                self._public[index] = found
        return found


def _import(algorithm: str, data: bytes | Mapping[str, Any]) -> Key:
    value: Any = dict(data) if isinstance(data, Mapping) else data
    if algorithm == "RS256":
        return RSAKey.import_key(value)
    return ECKey.import_key(value)


_KEYS = _Keys()


def sign(storage: Storage, settings: JwtRpts, claims: Mapping[str, Any], now: int) -> str:
    """`claims` as a compact JWS signed with the current key (made first if there is none), its
    kid in the header."""
    key = ensure_signing_key(storage, settings, now)
    header = {"typ": "JWT", "alg": key.algorithm, "kid": key.kid}
    try:
        private = _KEYS.private(key, settings)
    except KeyUnusable as error:
        log.error("%s", error)
        raise ServerError("RPTs cannot be signed now; the server's log says why.") from None
    return jwt.encode(header, dict(claims), private, [key.algorithm])


def looks_like_jws(unverified: str) -> bool:
    """Whether a token has the form of a compact JWS (three base64url parts): opaque tokens of
    this server never do."""
    return unverified.count(".") == 2 and not unverified.startswith("uma_")


def verify(storage: Storage, unverified: str) -> dict[str, Any] | None:
    """The claims of a JWS signed by one of the stored keys, with the algorithm of that key; None
    for anything else (another key, altered, not a JWS). Expiry is the caller's to check."""
    try:
        header = jws.extract_compact(unverified.encode("ascii")).protected
    except (JoseError, ValueError, UnicodeEncodeError):
        return None
    kid = header.get("kid")
    found = next((key for key in storage.signing_keys() if key.kid == kid), None)
    if found is None or header.get("alg") != found.algorithm:
        return None
    try:
        token = jwt.decode(unverified, _KEYS.public(found), [found.algorithm])
    except (JoseError, ValueError):
        return None
    return dict(token.claims)

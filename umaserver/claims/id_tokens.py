"""OpenID Connect ID tokens pushed inside `claim-client-claims-oidc-1.0` claim objects.

A client may carry an `id_token` in the value of an OIDC claim object. Its claims are believed only
after the token is verified against an identity provider listed in the config (OpenID Connect Core
1.0, 3.1.3.7 "ID Token Validation"); they then carry the provider as issuer, so a rule can demand the
provider's word instead of the client's. The other members of the value are the client's own word
and carry the client as issuer.

`KeySets` holds each provider's JSON Web Key Set: read from a file at start, or fetched from the
provider's `jwks_uri` by one background thread. A fetch never happens inside a request; a token
that names a key we do not hold yet asks the thread to fetch early (key rollover) and is answered
"try again later" when that fetch may bring the key. Plain Python: no Flask here.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import logging
import math
import re
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from joserfc import jws
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    InvalidKeyCurveError,
    InvalidKeyLengthError,
    JoseError,
    KeyParameterError,
    MissingClaimError,
)
from joserfc.jwk import JWKRegistry, Key, KeySet
from joserfc.jwt import JWTClaimsRegistry

from umaserver.claims.model import OIDC_TYPE, Claim, ClaimsError, ClaimsUnavailable

logger = logging.getLogger(__name__)

#: Longest `id_token` string we parse; real ID tokens are a few KiB at most.
MAX_ID_TOKEN_LENGTH = 16 * 1024

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

#: Claims that describe the token rather than the requesting party; they are checked here and
#: never handed to the rule engine. `acr`, `amr` and `auth_time` say how the party signed in,
#: which a rule may want, so they stay. `_claim_names`/`_claim_sources` point at aggregated or
#: distributed claims that nobody verified.
TOKEN_BOOKKEEPING_CLAIMS = frozenset(
    {
        "iss",
        "aud",
        "exp",
        "iat",
        "nbf",
        "azp",
        "nonce",
        "at_hash",
        "c_hash",
        "s_hash",
        "jti",
        "sid",
        "_claim_names",
        "_claim_sources",
    }
)

_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_SHOWN_LENGTH = 100


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
        if not self.audiences or not all(isinstance(a, str) and a for a in self.audiences):
            raise ValueError(f"OIDC issuer {name} needs at least one non-empty audience")
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
            object.__setattr__(
                self, "file_keys", _load_jwks_file(Path(self.jwks_file), self.issuer)
            )
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


class JwksError(ValueError):
    """A JWK set could not be read, fetched or used; the message says why."""


class KeySets:
    """The JWK set of every configured OIDC issuer, kept fresh by one background thread."""

    def __init__(
        self,
        issuers: Sequence[OidcIssuer],
        *,
        fetch_timeout: float = 5.0,
        max_bytes: int = 65536,
        refresh_interval: float = 3600.0,
        retry_interval: float = 30.0,
    ) -> None:
        self._fetch_timeout = fetch_timeout
        self._max_bytes = max_bytes
        self._refresh_interval = refresh_interval
        self._retry_interval = retry_interval
        self._lock = threading.Lock()
        self._key_sets: dict[str, KeySet] = {}
        self._uris: dict[str, str] = {}
        self._last_attempt: dict[str, float] = {}
        self._fetched_at: dict[str, float] = {}
        self._due: dict[str, float] = {}
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

        for entry in issuers:
            if entry.issuer in self._key_sets or entry.issuer in self._uris:
                raise ValueError(f"OIDC issuer {entry.issuer!r} is configured twice")
            if entry.file_keys is not None:
                self._key_sets[entry.issuer] = entry.file_keys
            elif entry.jwks_uri is not None:
                self._uris[entry.issuer] = entry.jwks_uri
                self._due[entry.issuer] = 0.0

    def key_set(self, issuer: str) -> KeySet | None:
        """The keys of `issuer`, or None when they have not been read or fetched (yet)."""
        with self._lock:
            return self._key_sets.get(issuer)

    def refresh_now(self) -> None:
        """Fetch every `jwks_uri` now, in this thread (for tests and the CLI). Never raises:
        a failed fetch is logged and leaves the keys we had."""
        for issuer, uri in self._uris.items():
            self._refresh(issuer, uri)

    def request_refresh(self, issuer: str) -> int | None:
        """Ask the background thread to fetch `issuer`'s keys early, as soon as the retry
        interval since its last attempt allows (a token named a key we do not know).

        Returns the seconds until that fetch when it may bring keys we lack: we have none, or
        ours are older than the retry interval. None when ours are fresher than that (they are
        what the provider publishes now) or come from a file.
        """
        with self._lock:
            if issuer not in self._due:
                return None
            now = time.monotonic()
            earliest = self._last_attempt.get(issuer, -math.inf) + self._retry_interval
            self._due[issuer] = min(self._due[issuer], earliest)
            fresh = now - self._fetched_at.get(issuer, -math.inf) < self._retry_interval
            wait = self._due[issuer] - now
        self._wake.set()
        return None if fresh else math.ceil(max(1.0, wait))

    def start(self) -> None:
        """Start the one background thread that fetches and refreshes every `jwks_uri`;
        nothing happens when it runs already."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            if self._stopping.is_set():
                # A stop() gave up waiting for its fetch; a second thread would run beside it.
                raise RuntimeError("the JWKS thread has not stopped yet; start it again later")
            return
        if not self._uris:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="umaserver-jwks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread; waits for a fetch in progress to end. Safe to call more
        than once, and from a finalizer."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        # A finalizer may run in the thread itself (garbage collection happens anywhere).
        if thread is None or thread is threading.current_thread():
            return
        wait = 2 * self._fetch_timeout + 1.0
        thread.join(timeout=wait)
        if thread.is_alive():
            # Keep the handle, so that start() does not run a second thread beside this one.
            logger.warning("the JWKS thread has not stopped within %.1f s", wait)
        else:
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.is_set():
            # Cleared before reading the due times, so a request_refresh() after this point
            # wakes the wait below.
            self._wake.clear()
            for issuer, uri in self._uris.items():
                if self._stopping.is_set():
                    return
                with self._lock:
                    due = self._due[issuer] <= time.monotonic()
                if due:
                    self._refresh(issuer, uri)
            with self._lock:
                wait = max(0.0, min(self._due.values()) - time.monotonic())
            self._wake.wait(wait)

    def _refresh(self, issuer: str, uri: str) -> bool:
        started = time.monotonic()
        try:
            key_set = _parse_jwks(_fetch(uri, self._fetch_timeout, self._max_bytes))
        except (JwksError, requests.RequestException, urllib3.exceptions.HTTPError) as error:
            logger.warning("JWKS of OIDC issuer %r from %s not refreshed: %s", issuer, uri, error)
            ok = False
        except Exception:
            # The thread must survive whatever a provider sends.
            logger.exception("JWKS of OIDC issuer %r from %s not refreshed", issuer, uri)
            ok = False
        else:
            ok = True
        with self._lock:
            if ok:
                self._key_sets[issuer] = key_set
                self._fetched_at[issuer] = started
            self._last_attempt[issuer] = started
            interval = self._refresh_interval if ok else self._retry_interval
            self._due[issuer] = time.monotonic() + interval
        if ok:
            logger.info("JWKS of OIDC issuer %r fetched: %d keys", issuer, len(key_set.keys))
        return ok


def _fetch(uri: str, timeout: float, max_bytes: int) -> bytes:
    deadline = time.monotonic() + timeout
    headers = {
        "Accept": "application/jwk-set+json, application/json",
        # Nothing to inflate; a server that compresses anyway is inflated here, within the cap.
        "Accept-Encoding": "identity",
    }
    with requests.get(
        uri, headers=headers, timeout=timeout, stream=True, allow_redirects=False
    ) as response:
        if response.status_code != 200:
            raise JwksError(f"the server answered HTTP {response.status_code}")
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise JwksError(f"the body is larger than {max_bytes} bytes")
        inflate = _inflater(response.headers.get("Content-Encoding", ""))
        body = bytearray()
        while True:
            # `timeout` bounds each socket read only: a server dripping its body would hold the
            # one thread that serves every issuer. read1() returns what one read brought, so the
            # deadline is checked after each. Raw bytes: a decoder inside read1 would read on
            # until it had output, which compressed nothing never gives.
            if time.monotonic() > deadline:
                raise JwksError(f"the body took longer than {timeout} s")
            chunk = response.raw.read1(8192, decode_content=False)
            if not chunk:
                if inflate is not None and not inflate.eof:
                    raise JwksError("the compressed body ends early")
                return bytes(body)
            if inflate is not None:
                # At most one byte past the cap is inflated, so a small body cannot inflate huge.
                chunk = inflate.decompress(chunk, max_bytes + 1 - len(body))
            body += chunk
            if len(body) > max_bytes:
                raise JwksError(f"the body is larger than {max_bytes} bytes")


def _inflater(content_encoding: str) -> Any:
    """A zlib decompressor for the body's Content-Encoding, or None for an unencoded body."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise JwksError(f"the body is encoded as {encoding!r}, which this server does not read")


def _load_jwks_file(path: Path, issuer: str) -> KeySet:
    try:
        return _parse_jwks(path.read_bytes())
    except OSError as error:
        raise ValueError(
            f"JWKS file {str(path)!r} of OIDC issuer {issuer!r} cannot be read: {error.strerror}"
        ) from error
    except JwksError as error:
        raise ValueError(
            f"JWKS file {str(path)!r} of OIDC issuer {issuer!r} cannot be used: {error}"
        ) from error


def _parse_jwks(data: bytes) -> KeySet:
    """A JWK set of public signature keys; RFC 7517, 5: keys we cannot use are skipped."""
    try:
        document = _json_object(data)
    except ValueError as error:
        raise JwksError(f"it is not a JSON object ({error})") from error
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


def _json_object(data: bytes | str) -> dict[str, Any]:
    """Parse one JSON object, refusing duplicate members (parsers disagree on which one wins)
    and NaN/Infinity (not JSON)."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name, value in pairs:
            if name in result:
                raise ValueError(f"member {name[:_SHOWN_LENGTH]!r} appears twice")
            result[name] = value
        return result

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    document = json.loads(data, object_pairs_hook=no_duplicates, parse_constant=no_constant)
    if not isinstance(document, dict):
        raise ValueError("not an object")
    return document


def _refuse(reason: str) -> ClaimsError:
    return ClaimsError(f"ID token refused: {reason}")


def _shown(value: str) -> str:
    """An untrusted string, quoted and cut short for an error description."""
    return repr(value[:_SHOWN_LENGTH])


def _decode_segment(segment: str, part: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        return _json_object(raw)
    except (binascii.Error, ValueError) as error:
        raise _refuse(f"its {part} is not a base64url-encoded JSON object") from error


def verify_id_token(
    unverified_token: Any,
    issuers: Sequence[OidcIssuer],
    key_sets: KeySets,
    *,
    now: int,
    skew: int = 120,
) -> dict[str, Any]:
    """Verify an ID token (OpenID Connect Core 1.0, 3.1.3.7) and return its claims.

    Raises ClaimsError naming the check that failed, or ClaimsUnavailable when the issuer's keys
    we hold may be out of date (a fetch is pending): the client may send the token again later.
    """
    if not isinstance(unverified_token, str):
        raise _refuse("'id_token' is not a string")
    if len(unverified_token) > MAX_ID_TOKEN_LENGTH:
        raise _refuse(f"it is longer than {MAX_ID_TOKEN_LENGTH} characters")
    if not _COMPACT_JWS.fullmatch(unverified_token):
        raise _refuse("it is not a signed JWT (three base64url parts separated by dots)")
    header_segment, payload_segment, _ = unverified_token.split(".")

    # The algorithm is checked before any key is touched, so a provider's public key can never
    # be used as an HMAC secret and "none" never skips the signature.
    header = _decode_segment(header_segment, "header")
    alg = header.get("alg")
    if not isinstance(alg, str):
        raise _refuse("its header has no 'alg'")
    if alg not in SUPPORTED_ALGORITHMS:
        raise _refuse(f"algorithm {_shown(alg)} is not accepted (asymmetric signatures only)")
    # RFC 7515, 4.1.11: a recipient that does not understand a "crit" extension must refuse.
    if "crit" in header or "b64" in header:
        raise _refuse("its header uses JWS extensions ('crit', 'b64') that we do not support")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise _refuse("its header 'kid' is not a string")

    # The unverified 'iss' only picks whose keys to try; it is checked again once signed.
    unverified_iss = _decode_segment(payload_segment, "payload").get("iss")
    if not isinstance(unverified_iss, str):
        raise _refuse("it has no 'iss' claim")
    issuer = next((i for i in issuers if i.issuer == unverified_iss), None)
    if issuer is None:
        raise _refuse(f"issuer {_shown(unverified_iss)} is not configured")
    if alg not in issuer.algorithms:
        raise _refuse(f"algorithm {alg!r} is not accepted for issuer {issuer.issuer!r}")
    key_set = key_sets.key_set(issuer.issuer)
    if key_set is None:
        # Never fetched yet, or the provider is unreachable: our side's problem, not the token's.
        # The client may try again once the fetch asked for here is due.
        raise ClaimsUnavailable(
            f"ID token not checked: keys of issuer {issuer.issuer!r} are not available yet",
            key_sets.request_refresh(issuer.issuer) or 1,
        )

    claims = _verify_signature(unverified_token, alg, kid, key_set, issuer, key_sets)
    _validate_claims(claims, issuer, now=now, skew=skew)
    return claims


def _verify_signature(
    unverified_token: str,
    alg: str,
    kid: str | None,
    key_set: KeySet,
    issuer: OidcIssuer,
    key_sets: KeySets,
) -> dict[str, Any]:
    # Only this issuer's keys are tried: a key of another provider proves nothing here.
    named = [key for key in key_set.keys if kid is None or key.kid == kid]
    # Some providers publish keys without "kid" yet name one in their tokens. joserfc's KeySet
    # gives such a key its RFC 7638 thumbprint as kid.
    candidates = named or [key for key in key_set.keys if key.kid == key.thumbprint()]
    # Unregistered header parameters are tolerated (providers add their own); "crit" was refused.
    registry = jws.JWSRegistry(algorithms=[alg], strict_check_header=False)
    for key in candidates:
        try:
            signed = jws.deserialize_compact(unverified_token, key, registry=registry)
        except (BadSignatureError, KeyParameterError, InvalidKeyCurveError, InvalidKeyLengthError):
            continue
        except JoseError as error:
            raise _refuse(f"it cannot be decoded ({error.description})") from error
        assert signed.payload is not None
        try:
            return _json_object(signed.payload)
        except ValueError as error:
            raise _refuse("its payload is not a JSON object") from error
    # Perhaps the provider rolled its keys over (with or without kids): have them fetched again,
    # outside this request.
    retry_after = key_sets.request_refresh(issuer.issuer)
    if not named:
        missing = f"issuer {issuer.issuer!r} has no key with kid {_shown(kid or '')}"
        if retry_after is not None:
            raise ClaimsUnavailable(f"ID token not checked: {missing} yet", retry_after)
        raise _refuse(missing)
    raise _refuse(f"its signature does not verify with the keys of issuer {issuer.issuer!r}")


def _validate_claims(claims: dict[str, Any], issuer: OidcIssuer, *, now: int, skew: int) -> None:
    registry = JWTClaimsRegistry(
        now=now,
        leeway=skew,
        iss={"essential": True, "value": issuer.issuer},
        sub={"essential": True},
        aud={"essential": True, "values": list(issuer.audiences)},
        exp={"essential": True},
        iat={"essential": True},
    )
    try:
        registry.validate(claims)
    except MissingClaimError as error:
        raise _refuse(f"required claims missing: {error.claim}") from error
    except ExpiredTokenError as error:
        raise _refuse(
            f"it expired at {claims['exp']} (now {now}, allowed clock skew {skew} s)"
        ) from error
    except InvalidClaimError as error:
        raise _refuse(_invalid_claim_reason(error.claim, claims, now=now, skew=skew)) from error

    # OpenID Connect Core 1.0, 3.1.3.7: with several audiences an "azp" should be present, and
    # when present it must be our client; otherwise a token issued to another party, which
    # merely lists us too, would pass.
    audiences = claims["aud"]
    azp = claims.get("azp")
    if isinstance(audiences, list) and len(audiences) > 1 and azp is None:
        raise _refuse("it has several audiences and no 'azp'")
    if azp is not None and azp not in issuer.audiences:
        raise _refuse("its authorized party 'azp' is not an accepted audience")


def _invalid_claim_reason(name: str, claims: dict[str, Any], *, now: int, skew: int) -> str:
    value = claims.get(name)
    if name == "aud":
        return "its audience 'aud' names none of the accepted audiences"
    if name == "iat" and isinstance(value, int | float) and not isinstance(value, bool):
        return f"it was issued in the future (iat {value}, now {now}, allowed clock skew {skew} s)"
    if name == "nbf" and isinstance(value, int | float) and not isinstance(value, bool):
        return f"it is not valid yet (nbf {value}, now {now}, allowed clock skew {skew} s)"
    if name == "iss":
        return "its issuer 'iss' does not match"
    return f"claim {name!r} is invalid"


def oidc_claims(
    value: Mapping[str, Any],
    *,
    issuers: Sequence[OidcIssuer],
    key_sets: KeySets,
    client_id: str,
    now: int,
    skew: int = 120,
) -> list[Claim]:
    """The claims of one `claim-client-claims-oidc-1.0` value.

    Plain members are the pushing client's word (issuer = the client). The claims of a verified
    `id_token` are the provider's word (issuer = its `iss`), without the token's bookkeeping
    claims. Raises ClaimsError when the ID token is refused, ClaimsUnavailable when it cannot be
    checked now.
    """
    verified = (
        verify_id_token(value["id_token"], issuers, key_sets, now=now, skew=skew)
        if "id_token" in value
        else None
    )

    # Order matters: a later claim of the same type and name replaces an earlier one, so the
    # provider's verified value, listed after the client's plain members, wins over them.
    claims = [
        Claim(
            type=OIDC_TYPE,
            name=name,
            value=member,
            issuer=client_id,
            client_id=client_id,
            gathered_at=now,
        )
        for name, member in value.items()
        if name != "id_token"
    ]
    if verified is not None:
        provider = verified["iss"]
        claims.extend(
            Claim(
                type=OIDC_TYPE,
                name=name,
                value=member,
                issuer=provider,
                client_id=client_id,
                gathered_at=now,
            )
            for name, member in verified.items()
            if name not in TOKEN_BOOKKEEPING_CLAIMS
        )
    return claims

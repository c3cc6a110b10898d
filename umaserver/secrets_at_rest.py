"""Secrets at rest are digests: random tokens with a recognisable prefix, stored as SHA-256, and
passwords hashed with argon2id (argon2-cffi; the scrypt hashes of earlier versions still verify, and
`password_needs_rehash` says to replace them). Comparisons are constant-time. A secret the server
must use again (a private signing key) is sealed: AES-GCM under a key derived from `secret_key`
with HKDF (`sealing_key`, `seal`, `unseal`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
from collections.abc import Sequence

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

# Recognisable prefixes make a leaked token easy to spot in a log or a paste.
ACCESS_TOKEN_PREFIX = "uma_at_"  # noqa: S105 - a prefix, not a secret
RPT_PREFIX = "uma_rpt_"
TICKET_PREFIX = "uma_pt_"
CLIENT_SECRET_PREFIX = "uma_cs_"  # noqa: S105

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def new_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def new_id(prefix: str = "") -> str:
    """An opaque, random identifier (never a counter). Never one that starts with "-": client ids,
    subs and set ids are arguments of the command line, where such a word reads as an option."""
    while True:
        found = secrets.token_urlsafe(16)
        if not found.startswith("-"):
            return prefix + found


def reissue_key(secret_key: str, purpose: str) -> bytes:
    """The key that makes the tokens of one purpose ("rpt") from their seeds; from `secret_key`."""
    return hmac.new(
        secret_key.encode("utf-8"), f"umaserver {purpose} v1".encode(), hashlib.sha256
    ).digest()


def reissue_keys(secret_keys: Sequence[str], purpose: str) -> tuple[bytes, ...]:
    """`reissue_key` of each listed secret key, in their order: the first makes, all verify."""
    return tuple(reissue_key(secret_key, purpose) for secret_key in secret_keys)


def sealing_key(secret_key: str, purpose: str) -> bytes:
    """The AES-256 key that seals the secrets of one purpose ("signing keys") kept in the store:
    HKDF-SHA256 (RFC 5869) of `secret_key`, the purpose in its info, so that it is neither the
    key of `reissue_key` nor of another purpose."""
    return HKDF(
        algorithm=SHA256(), length=32, salt=None, info=f"umaserver seal {purpose} v1".encode()
    ).derive(secret_key.encode("utf-8"))


def seal(key: bytes, secret: bytes, bound_to: str) -> str:
    """`secret` encrypted and authenticated with AES-GCM under `key` (a fresh 96-bit nonce each
    time), as text: base64url of nonce and ciphertext. `bound_to` (the row's id) is authenticated
    with it, so a sealed value moved to another row does not open."""
    nonce = secrets.token_bytes(12)
    sealed = AESGCM(key).encrypt(nonce, secret, bound_to.encode("utf-8"))
    return base64.urlsafe_b64encode(nonce + sealed).decode("ascii")


class SealBroken(Exception):
    """A sealed value that none of the keys opens (another secret_key, or altered)."""


def unseal(keys: Sequence[bytes], sealed: str, bound_to: str) -> bytes:
    """What `seal` sealed, opened with the first of `keys` that opens it (the keys of every
    secret_key still listed, when secret keys can rotate); SealBroken when none does."""
    try:
        raw = base64.urlsafe_b64decode(sealed.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        raise SealBroken("not a sealed value") from None
    nonce, body = raw[:12], raw[12:]
    for key in keys:
        try:
            return AESGCM(key).decrypt(nonce, body, bound_to.encode("utf-8"))
        except InvalidTag:
            continue
    raise SealBroken("no key opens it: was secret_key changed?")


def new_reissuable_token(prefix: str, key: bytes) -> tuple[str, str]:
    """A token and its seed. The store keeps the token's digest and the seed, which is useless
    without `key`, so the server can hand a live token back (an AAT's RPT) that it never stored."""
    seed = secrets.token_urlsafe(32)
    return reissue_token(prefix, key, seed), seed


def reissue_token(prefix: str, key: bytes, seed: str) -> str:
    """The token made from `seed`; check it against the stored digest (a changed secret_key
    makes other tokens)."""
    mac = hmac.new(key, seed.encode("utf-8"), hashlib.sha256).digest()
    return prefix + base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def reissued(prefix: str, keys: Sequence[bytes], seed: str, stored_digest: str) -> str | None:
    """The token that one of `keys` makes from `seed` and whose digest is `stored_digest`; None
    when none does (the key that made it is no longer listed): such a token no longer counts."""
    for key in keys:
        token = reissue_token(prefix, key, seed)
        if matches_digest(token, stored_digest):
            return token
    return None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def matches_digest(unverified: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(unverified), stored_digest)


# argon2-cffi's defaults: RFC 9106's second recommended option (64 MiB, 3 passes, 4 lanes).
_ARGON2 = PasswordHasher()
_ARGON2_PREFIX = "$argon2id$"


def hash_password(password: str) -> str:
    """A new argon2id hash of `password`."""
    return _ARGON2.hash(password)


def check_password(unverified: str, stored: str) -> bool:
    """Whether `unverified` is the password of `stored` (argon2id, or the older scrypt)."""
    if stored.startswith(_ARGON2_PREFIX):
        try:
            return _ARGON2.verify(stored, unverified)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
    return _check_scrypt(unverified, stored)


def is_password_hash(text: str) -> bool:
    """Whether `text` has the form of a hash that `check_password` reads (argon2id or scrypt),
    as `db export` writes them."""
    if text.startswith(_ARGON2_PREFIX):
        try:
            _ARGON2.check_needs_rehash(text)  # parses it
        except InvalidHashError:
            return False
        return True
    scheme, _, rest = text.partition("$")
    salt, _, derived = rest.partition("$")
    hexdigits = set("0123456789abcdef")
    return (
        scheme == "scrypt"
        and bool(salt)
        and len(derived) == 128
        and set(salt + derived) <= hexdigits
    )


def password_needs_rehash(stored: str) -> bool:
    """True for a hash that is not argon2id with today's parameters (scrypt ones among them)."""
    if not stored.startswith(_ARGON2_PREFIX):
        return True
    try:
        return _ARGON2.check_needs_rehash(stored)
    except InvalidHashError:
        return True


class _Dummy:
    """The hash an unknown account's password is checked against, made once, and a count of the
    checks against it (tests read it to see that an unknown account costs what a wrong password
    does)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hash: str | None = None
        self.checks = 0

    def check(self, unverified: str) -> bool:
        with self._lock:
            if self._hash is None:
                self._hash = _ARGON2.hash(secrets.token_urlsafe(16))
            self.checks += 1
            stored = self._hash
        check_password(unverified, stored)
        return False


DUMMY = _Dummy()


def check_no_password(unverified: str) -> bool:
    """Spends the time of checking a password, for an account that does not exist or has none:
    always False."""
    return DUMMY.check(unverified)


def _check_scrypt(unverified: str, stored: str) -> bool:
    try:
        scheme, salt, expected = stored.split("$")
        salt_bytes = bytes.fromhex(salt)
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    derived = hashlib.scrypt(unverified.encode("utf-8"), salt=salt_bytes, **_SCRYPT)
    return hmac.compare_digest(derived.hex(), expected)


def hash_password_scrypt(password: str) -> str:
    """A scrypt hash as versions before argon2id made them (for tests of the upgrade)."""
    salt = secrets.token_bytes(16)
    derived = hashlib.scrypt(password.encode("utf-8"), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${derived.hex()}"

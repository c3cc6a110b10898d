"""Secrets at rest are digests: random tokens with a recognisable prefix, stored as SHA-256, and
passwords hashed with scrypt. Comparisons are constant-time."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

# Recognisable prefixes make a leaked token easy to spot in a log or a paste.
ACCESS_TOKEN_PREFIX = "uma_at_"  # noqa: S105 - a prefix, not a secret
RPT_PREFIX = "uma_rpt_"
TICKET_PREFIX = "uma_pt_"
CLIENT_SECRET_PREFIX = "uma_cs_"  # noqa: S105

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def new_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def new_id(prefix: str = "") -> str:
    """An opaque, random identifier (never a counter)."""
    return prefix + secrets.token_urlsafe(16)


def reissue_key(secret_key: str, purpose: str) -> bytes:
    """The key that makes the tokens of one purpose ("rpt") from their seeds; from `secret_key`."""
    return hmac.new(
        secret_key.encode("utf-8"), f"umaserver {purpose} v1".encode(), hashlib.sha256
    ).digest()


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


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def matches_digest(unverified: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(unverified), stored_digest)


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    derived = hashlib.scrypt(password.encode("utf-8"), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${derived.hex()}"


def check_password(unverified: str, stored: str) -> bool:
    try:
        scheme, salt, expected = stored.split("$")
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    derived = hashlib.scrypt(unverified.encode("utf-8"), salt=bytes.fromhex(salt), **_SCRYPT)
    return hmac.compare_digest(derived.hex(), expected)

"""Seed files: users, clients and links to external identities declared in TOML, for `umaserver
seed apply` (and `umaserver dev`). The same family as the config and the rule file: every problem
reported at once, one line each, naming the entry and key (`clients[2].colour`) and the line of
the file that holds it; unknown keys refused.

This module reads and checks what the file alone can tell (types, the client_id alphabet, secret
lengths, names given twice, environment variables). What needs the server's settings or its
database (redirect URIs, grant types, configured issuers, public or confidential) is checked by
`services.seeding`, which names places with `Seed.problem` the same way.

```toml
[[users]]
username = "alice"
password = "a long enough password"   # or password_env = "ALICE_PASSWORD", or password_hash
claims = { email = "alice@example.com", roles = ["doctor"] }

[[clients]]
client_id = "photo-server"            # fixed, as given
secret = "a-long-random-secret"       # or secret_env, or secret_digest; absent: a public client
name = "Photo server"
redirect_uris = ["http://127.0.0.1:9000/cb"]

[[links]]
user = "alice"
issuer = "https://accounts.example.com"
subject = "248289761001"
```
"""

from __future__ import annotations

import datetime
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import secrets_at_rest
from .config import ConfigError
from .toml_reader import TableReader, non_empty

# RFC 3986's unreserved characters: a client_id is safe in a URL, a form and a shell word as is.
CLIENT_ID = re.compile(r"[A-Za-z0-9._~-]{1,64}")
MIN_SECRET_LENGTH = 16
_DIGEST = re.compile(r"[0-9a-f]{64}")


class SeedError(ConfigError):
    """A seed file that cannot be applied; `errors` holds one line per problem, each naming the
    file, the line and the place (`clients[2].colour`)."""


@dataclass(frozen=True)
class SeedUser:
    username: str
    password: str | None = None  # from `password` or `password_env`
    password_hash: str | None = None
    claims: dict[str, Any] = field(default_factory=dict)
    place: str = "users[0]"


@dataclass(frozen=True)
class SeedClient:
    client_id: str
    secret: str | None = None  # from `secret` or `secret_env`
    secret_digest: str | None = None
    name: str = ""
    redirect_uris: tuple[str, ...] = ()
    claims_redirect_uris: tuple[str, ...] = ()
    push_claims: tuple[str, ...] = ()
    grant_types: tuple[str, ...] = ()  # empty: the defaults of `client create`
    scopes: tuple[str, ...] = ()  # empty: both
    logo_uri: str | None = None
    client_uri: str | None = None
    # client_secret_basic (the default) or client_secret_post; a public client has none.
    token_endpoint_auth_method: str | None = None
    place: str = "clients[0]"

    @property
    def is_public(self) -> bool:
        return self.secret is None and self.secret_digest is None


@dataclass(frozen=True)
class SeedLink:
    user: str
    issuer: str
    subject: str
    place: str = "links[0]"


@dataclass(frozen=True)
class Seed:
    users: tuple[SeedUser, ...] = ()
    clients: tuple[SeedClient, ...] = ()
    links: tuple[SeedLink, ...] = ()
    source: str = "<seed>"
    # The line each place (`clients[2]`, `clients[2].name`) is on, as far as it could be found.
    lines: Mapping[str, int] = field(default_factory=dict)

    def problem(self, place: str, message: str) -> str:
        """One line of a report: the file, the line holding `place` (or its entry), the place."""
        entry = place.split(".", 1)[0]
        line = self.lines.get(place) or self.lines.get(entry)
        where = f"line {line}: " if line else ""
        return f"{self.source}: {where}{place}: {message}"


def load_seed(path: Path) -> Seed:
    """The seed in the file at `path`; SeedError (a ConfigError) saying every problem."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SeedError([f"{path}: no such file"]) from None
    except OSError as error:
        raise SeedError([f"{path}: cannot be read: {error.strerror or error}"]) from None
    except UnicodeDecodeError as error:
        raise SeedError([f"{path}: byte {error.start}: not UTF-8 text"]) from None
    return parse_seed(text, str(path))


def parse_seed(text: str, source: str = "<seed>", env: Mapping[str, str] | None = None) -> Seed:
    """The seed `text` holds (environment variables from `env`, else the process's)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SeedError([f"{source}: not valid TOML: {error}"]) from None
    except RecursionError:
        raise SeedError([f"{source}: not valid TOML: values are nested too deeply"]) from None
    lines = _lines(text)
    errors: list[str] = []
    top = TableReader(data, "", errors)
    environment = os.environ if env is None else env
    users = [_user(reader, environment) for reader in top.tables("users")]
    clients = [_client(reader, environment) for reader in top.tables("clients")]
    links = [_link(reader) for reader in top.tables("links")]
    top.finish()
    _no_repeats([(u.place, u.username) for u in users], "username", errors)
    _no_repeats([(c.place, c.client_id) for c in clients], "client_id", errors)
    _no_repeats([(k.place, f"{k.issuer} {k.subject}") for k in links], "subject", errors)
    seed = Seed(tuple(users), tuple(clients), tuple(links), source, lines)
    if errors:
        raise SeedError([_placed(seed, error) for error in errors])
    return seed


def _placed(seed: Seed, error: str) -> str:
    place, _, message = error.partition(": ")
    return seed.problem(place, message)


def _user(reader: TableReader, env: Mapping[str, str]) -> SeedUser:
    username = reader.take("username", str, check=_username)
    password = reader.take("password", str, "", check=non_empty) or None
    variable = reader.take("password_env", str, "", check=non_empty) or None
    password_hash = reader.take("password_hash", str, "", check=_password_hash) or None
    if sum(given is not None for given in (password, variable, password_hash)) > 1:
        reader.errors.append(
            f"{reader.where}: give one of password, password_env and password_hash"
        )
    if variable is not None:
        password = _from_env(reader, "password_env", variable, env)
    claims = reader.take("claims", dict, {}, check=_json_like)
    reader.finish()
    return SeedUser(username, password, password_hash, dict(claims or {}), reader.where)


def _client(reader: TableReader, env: Mapping[str, str]) -> SeedClient:
    client_id = reader.take("client_id", str, check=_client_id)
    secret = reader.take("secret", str, "", check=_secret) or None
    variable = reader.take("secret_env", str, "", check=non_empty) or None
    secret_digest = reader.take("secret_digest", str, "", check=_secret_digest) or None
    if sum(given is not None for given in (secret, variable, secret_digest)) > 1:
        reader.errors.append(f"{reader.where}: give one of secret, secret_env and secret_digest")
    if variable is not None:
        secret = _from_env(reader, "secret_env", variable, env)
        if secret is not None and (problem := _secret(secret)) is not None:
            reader.errors.append(f"{reader.where}.secret_env: {variable}: {problem}")
    client = SeedClient(
        client_id=client_id,
        secret=secret,
        secret_digest=secret_digest,
        name=reader.take("name", str, check=non_empty),
        redirect_uris=reader.strings("redirect_uris"),
        claims_redirect_uris=reader.strings("claims_redirect_uris"),
        push_claims=reader.strings("push_claims"),
        grant_types=reader.strings("grant_types"),
        scopes=reader.strings("scopes"),
        logo_uri=reader.take("logo_uri", str, "", check=non_empty) or None,
        client_uri=reader.take("client_uri", str, "", check=non_empty) or None,
        token_endpoint_auth_method=reader.take(
            "token_endpoint_auth_method", str, "", check=_auth_method
        )
        or None,
        place=reader.where,
    )
    if client.is_public and client.token_endpoint_auth_method is not None:
        reader.errors.append(
            f"{reader.where}.token_endpoint_auth_method: a public client (no secret) has none"
        )
    reader.finish()
    return client


def _link(reader: TableReader) -> SeedLink:
    link = SeedLink(
        user=reader.take("user", str, check=non_empty),
        issuer=reader.take("issuer", str, check=non_empty),
        subject=reader.take("subject", str, check=non_empty),
        place=reader.where,
    )
    reader.finish()
    return link


def _from_env(reader: TableReader, key: str, variable: str, env: Mapping[str, str]) -> str | None:
    value = env.get(variable)
    if not value:
        state = "empty" if value is not None else "not set"
        reader.errors.append(
            f"{reader.where}.{key}: the environment variable {variable} is {state}"
        )
        return None
    return value


def _username(value: str) -> str | None:
    if not value or value != value.strip() or any(c.isspace() for c in value):
        return "must be non-empty and have no white space"
    return None


def _client_id(value: str) -> str | None:
    if CLIENT_ID.fullmatch(value) is None:
        return "must be 1 to 64 characters of A-Z, a-z, 0-9 and . _ ~ -"
    if value.startswith("-"):  # it would read as an option on the command line
        return "must not start with '-'"
    return None


def _secret(value: str) -> str | None:
    if len(value) < MIN_SECRET_LENGTH:
        return f"must be at least {MIN_SECRET_LENGTH} characters"
    return None


def _secret_digest(value: str) -> str | None:
    if _DIGEST.fullmatch(value) is None:
        return "must be a SHA-256 digest in lower-case hex (64 characters), as db export writes"
    return None


def _password_hash(value: str) -> str | None:
    if not secrets_at_rest.is_password_hash(value):
        return "must be an argon2id (or scrypt) hash, as db export writes"
    return None


def _auth_method(value: str) -> str | None:
    if value not in ("client_secret_basic", "client_secret_post"):
        return "must be client_secret_basic or client_secret_post"
    return None


def _json_like(value: Any) -> str | None:
    """Claims are JSON: TOML's dates and times have no place in them."""
    if isinstance(value, datetime.date | datetime.time):
        return "must hold strings, numbers, booleans, arrays and tables only, not a date or time"
    if isinstance(value, dict):
        return next(filter(None, map(_json_like, value.values())), None)
    if isinstance(value, list):
        return next(filter(None, map(_json_like, value)), None)
    return None


def _no_repeats(named: list[tuple[str, str]], key: str, errors: list[str]) -> None:
    first: dict[str, str] = {}
    for place, name in named:
        if not name:
            continue
        if name in first:
            errors.append(f"{place}.{key}: given twice (first in {first[name]})")
        else:
            first[name] = place


# -- lines ---------------------------------------------------------------------------------------

_HEADER = re.compile(r"\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*[.=]""")


def _lines(text: str) -> dict[str, int]:
    """The line of each place the file names: `clients[2]` (its header) and `clients[2].name`
    (its key), from the text as written (tomllib tells no positions). Good enough for every
    file `db export` writes and for hand-written ones; a place it cannot find is reported
    without a line."""
    found: dict[str, int] = {}
    counts: dict[str, int] = {}
    current = ""
    in_string = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.count('"""') % 2 or line.count("'''") % 2:
            was, in_string = in_string, not in_string
            if was:
                continue
        elif in_string:
            continue
        header = _HEADER.match(line)
        if header is not None:
            opening, name = header[1], _unquote(header[2])
            if opening == "[[":
                index = counts[name] = counts.get(name, -1) + 1
                current = f"{name}[{index}]"
            else:
                head, _, rest = name.partition(".")
                current = f"{head}[{counts[head]}].{rest}" if head in counts and rest else name
            found.setdefault(current, number)
            continue
        key = _KEY.match(line)
        if key is not None:
            name = _unquote(key[1])
            found.setdefault(f"{current}.{name}" if current else name, number)
    return found


def _unquote(name: str) -> str:
    return name[1:-1] if name[:1] in "\"'" and name[-1:] == name[:1] else name

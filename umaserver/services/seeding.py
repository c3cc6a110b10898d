"""Applying a seed file (`umaserver seed apply`, `umaserver dev`) and writing one from the database
(`umaserver db export`).

An apply is declarative and idempotent: each user, client and link of the file is created when
missing, updated when it differs, and kept when it is as declared; applying a file twice changes
nothing. Everything is checked before anything is written (first what the file and the config
tell, then, under `lock_seeding` in the one transaction that writes, what the database holds), and
the checks are those of the commands that make each party one by one (`client create`, `user
create`, `user link`), through the same functions. Parties it creates are recorded
(`seeded_parties`), so that `prune` removes only those an earlier apply created and the file no
longer lists.

A user's password, when the file gives one, is compared with the stored hash (a new one ends the
user's sessions, as `user set-password` does); a file that gives none leaves the stored one alone.
A user's claims are the file's (none when it lists none). A client never turns public or
confidential: that would change what its tokens prove, so it is refused with a sentence.
"""

from __future__ import annotations

import hmac
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from .. import secrets_at_rest
from ..config import Config
from ..seed_file import Seed, SeedClient, SeedError, SeedUser
from ..storage import Storage
from ..storage.people_records import SeededParty
from ..storage.records import Client
from ..toml_reader import toml_string
from . import accounts, clients, identity_links, signin


@dataclass(frozen=True)
class SeedReport:
    """What an apply did, as "user:alice", "client:photo-server",
    "link:alice@https://accounts.example.com", each in the order of the file."""

    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # by prune only

    def as_json(self, prune: bool = False) -> dict[str, list[str]]:
        found = {"created": self.created, "changed": self.changed, "kept": self.kept}
        return {**found, "removed": self.removed} if prune else found


def apply_seed(
    storage: Storage, seed: Seed, config: Config, *, now: int, prune: bool = False
) -> SeedReport:
    """Brings the database to what `seed` declares, in one transaction; SeedError (nothing
    written) naming every problem, each with the file's line."""
    settings = {client.client_id: _settings(client) for client in seed.clients}
    problems = _file_problems(seed, config, settings)
    if problems:  # with what the database tells already, so that one run names every problem
        raise SeedError(problems + _stored_problems(storage, seed))
    # Passwords are checked and hashed before the transaction: argon2id takes a tenth of a
    # second each, and a server's writers wait while the transaction holds the database.
    passwords = _PasswordCheck(storage, seed)
    report = SeedReport()
    with storage.transaction():
        storage.lock_seeding()
        problems = _stored_problems(storage, seed)
        if problems:
            raise SeedError(problems)
        for user in seed.users:
            _apply_user(storage, seed, user, passwords, now, report)
        for client in seed.clients:
            _apply_client(storage, client, settings[client.client_id], now, report)
        for link in seed.links:
            found = storage.get_user_by_username(link.user)
            assert found is not None  # checked above, under the lock
            name = f"link:{link.user}@{link.issuer}"
            if storage.linked_user(link.issuer, link.subject) == found.sub:
                report.kept.append(name)
            elif storage.link_identity(link.issuer, link.subject, found.sub, now):
                storage.record_seeded(SeededParty("link", link.issuer, link.subject), now)
                report.created.append(name)
            else:  # linked to someone else meanwhile (a `user link` does not take the lock)
                raise SeedError([seed.problem(link.place, "linked to another user meanwhile")])
        if prune:
            _prune(storage, seed, report)
    return report


def _settings(client: SeedClient) -> clients.ClientSettings:
    return clients.declared_settings(
        name=client.name,
        redirect_uris=client.redirect_uris,
        push_claim_types=client.push_claims,
        public=client.is_public,
        grant_types=client.grant_types,
        claims_redirect_uris=client.claims_redirect_uris,
        scopes=client.scopes,
        logo_uri=client.logo_uri,
        client_uri=client.client_uri,
        auth_method=client.token_endpoint_auth_method or "client_secret_basic",
    )


def _file_problems(
    seed: Seed, config: Config, settings: dict[str, clients.ClientSettings]
) -> list[str]:
    """What the file and the config tell is wrong, with the checks of the commands."""
    problems: list[str] = []
    for user in seed.users:
        if (problem := accounts.new_username_problem(user.username)) is not None:
            problems.append(seed.problem(f"{user.place}.username", problem))
        if user.password is not None and (
            problem := signin.password_problem(user.password, config.signin)
        ):
            problems.append(seed.problem(f"{user.place}.password", problem))
    for client in seed.clients:
        place = client.place
        found: list[str] = []
        for key, uris in (
            ("redirect_uris", client.redirect_uris),
            ("claims_redirect_uris", client.claims_redirect_uris),
        ):
            for uri in uris:
                if (problem := clients.redirect_uri_problem(uri)) is not None:
                    found.append(seed.problem(f"{place}.{key}", f"{uri!r} {problem}."))
        for claim_type in client.push_claims:
            if (problem := clients.push_claim_type_problem(claim_type)) is not None:
                found.append(seed.problem(f"{place}.push_claims", problem))
        for grant in client.grant_types:
            if grant not in clients.GRANT_TYPES:
                known = ", ".join(clients.GRANT_TYPES)
                found.append(
                    seed.problem(f"{place}.grant_types", f"{grant!r} is not one of {known}.")
                )
        for scope in client.scopes:
            if scope not in clients.SCOPES:
                found.append(
                    seed.problem(
                        f"{place}.scopes",
                        f"{scope!r} is unknown; give uma_protection or uma_authorization.",
                    )
                )
        for key, page in (("logo_uri", client.logo_uri), ("client_uri", client.client_uri)):
            if page is not None and (problem := clients.page_uri_problem(page)) is not None:
                found.append(seed.problem(f"{place}.{key}", f"{page!r} {problem}."))
        # The settings as a whole, once each of their parts holds (one problem, one sentence).
        whole = None if found else clients.settings_problem(settings[client.client_id])
        if whole is not None:
            found.append(seed.problem(place, _public_words(client, whole[1])))
        problems += found
    for link in seed.links:
        problem = identity_links.identity_problem(config.oidc_issuers, link.issuer, link.subject)
        if problem is not None:
            problems.append(seed.problem(f"{link.place}.issuer", problem))
    return problems


def _public_words(client: SeedClient, problem: str) -> str:
    if client.is_public and not client.redirect_uris and not client.grant_types:
        return (
            "a public client (no secret) without redirect_uris has no grant type to use; give"
            " it redirect_uris, or a secret"
        )
    return problem


def _stored_problems(storage: Storage, seed: Seed) -> list[str]:
    """What the database holds that the file cannot have, read under the lock."""
    problems: list[str] = []
    for client in seed.clients:
        found = storage.get_client(client.client_id)
        if found is not None and clients.settings_of(found).is_public != client.is_public:
            was, becomes = (
                ("confidential", "public") if client.is_public else ("public", "confidential")
            )
            problems.append(
                seed.problem(
                    client.place,
                    f"the client {client.client_id!r} is {was}: it cannot become {becomes}, since its"
                    f" tokens would then prove something else; delete it first (client delete),"
                    f" or give it another client_id",
                )
            )
    usernames = {user.username for user in seed.users}
    for link in seed.links:
        user = storage.get_user_by_username(link.user)
        if user is None and link.user not in usernames:
            problems.append(seed.problem(f"{link.place}.user", f"There is no user {link.user!r}."))
            continue
        holder = storage.linked_user(link.issuer, link.subject)
        if holder is not None and (user is None or holder != user.sub):
            problems.append(
                seed.problem(
                    f"{link.place}.subject",
                    identity_links.elsewhere_problem(storage, holder, link.issuer, link.subject),
                )
            )
    return problems


def _apply_user(
    storage: Storage,
    seed: Seed,
    user: SeedUser,
    passwords: _PasswordCheck,
    now: int,
    report: SeedReport,
) -> None:
    name = f"user:{user.username}"
    found = storage.get_user_by_username(user.username)
    if found is None:
        password_hash = passwords.new_hash(user, None)
        made = accounts.create_user(storage, now, user.username, password_hash, user.claims)
        if made is None:  # `user create` took the name meanwhile (it does not take the lock)
            raise SeedError([seed.problem(f"{user.place}.username", "taken meanwhile")])
        storage.record_seeded(SeededParty("user", made.sub), now)
        report.created.append(name)
        return
    changed = False
    if not _same_json(found.claims, user.claims):
        storage.set_user_claims(found.sub, user.claims)
        changed = True
    new_hash = passwords.new_hash(user, found.password_hash)
    if new_hash is not None and new_hash != found.password_hash:
        accounts.set_password_hash(storage, found.sub, new_hash)  # their sessions end
        changed = True
    (report.changed if changed else report.kept).append(name)


class _PasswordCheck:
    """Each user's password of the file against the hash stored before the transaction, and a
    new hash where it does not match."""

    def __init__(self, storage: Storage, seed: Seed) -> None:
        self._matched: dict[str, str] = {}  # username -> the stored hash its password matches
        self._hashed: dict[str, str] = {}  # username -> a new hash of its password
        for user in seed.users:
            if user.password is None:
                continue
            found = storage.get_user_by_username(user.username)
            stored = None if found is None else found.password_hash
            if stored is not None and secrets_at_rest.check_password(user.password, stored):
                self._matched[user.username] = stored
            else:
                self._hashed[user.username] = secrets_at_rest.hash_password(user.password)

    def new_hash(self, user: SeedUser, stored: str | None) -> str | None:
        """The hash the user is to have: the stored one when the file's password matches it (or
        the file gives none), else the file's."""
        if user.password_hash is not None:
            return user.password_hash
        if user.password is None:
            return stored
        if stored is not None and self._matched.get(user.username) == stored:
            return stored
        if stored is not None and secrets_at_rest.check_password(user.password, stored):
            return stored  # changed meanwhile, to the file's password
        found = self._hashed.get(user.username)
        return found if found is not None else secrets_at_rest.hash_password(user.password)


def _apply_client(
    storage: Storage,
    client: SeedClient,
    settings: clients.ClientSettings,
    now: int,
    report: SeedReport,
) -> None:
    name = f"client:{client.client_id}"
    digest = client.secret_digest or (
        secrets_at_rest.digest(client.secret) if client.secret is not None else ""
    )
    found = storage.get_client(client.client_id)
    if found is None:
        clients.add_declared_client(storage, now, client.client_id, settings, digest)
        storage.record_seeded(SeededParty("client", client.client_id), now)
        report.created.append(name)
        return
    changed = False
    if clients.settings_of(found) != settings:
        clients.update_client(storage, found, settings)
        changed = True
    if not client.is_public and not _same_secret(found, client, digest):
        storage.set_client_secret_digest(client.client_id, digest)
        changed = True
    (report.changed if changed else report.kept).append(name)


def _same_secret(found: Client, client: SeedClient, digest: str) -> bool:
    if client.secret is not None:
        return secrets_at_rest.matches_digest(client.secret, found.secret_digest)
    return hmac.compare_digest(digest, found.secret_digest)


def _prune(storage: Storage, seed: Seed, report: SeedReport) -> None:
    """Removes what an earlier apply created and `seed` no longer lists; forgets the records of
    parties that are gone another way."""
    # A user the file links an identity to is wanted, even when it lists them among no users.
    usernames = {user.username for user in seed.users} | {link.user for link in seed.links}
    client_ids = {client.client_id for client in seed.clients}
    links = {(link.issuer, link.subject) for link in seed.links}
    recorded = storage.seeded_parties()
    for party in [p for p in recorded if p.kind == "link"]:
        holder = storage.linked_user(party.party, party.subject)
        if holder is not None and (party.party, party.subject) not in links:
            username = storage.get_username(holder)
            storage.unlink_identity(party.party, party.subject)
            report.removed.append(f"link:{username}@{party.party}")
        if holder is None or (party.party, party.subject) not in links:
            storage.forget_seeded(party)
    for party in [p for p in recorded if p.kind == "user"]:
        found = storage.get_user(party.party)
        if found is not None and found.username not in usernames:
            storage.delete_user(found.sub)
            report.removed.append(f"user:{found.username}")
        if found is None or found.username not in usernames:
            storage.forget_seeded(party)
    for party in [p for p in recorded if p.kind == "client"]:
        gone = storage.get_client(party.party) is None
        if not gone and party.party not in client_ids:
            storage.delete_client(party.party)
            report.removed.append(f"client:{party.party}")
        if gone or party.party not in client_ids:
            storage.forget_seeded(party)
    # Links, then users, then clients, each by name (users are recorded by sub, a random id).
    kinds = ("link", "user", "client")
    report.removed.sort(key=lambda name: (kinds.index(name.split(":", 1)[0]), name))


def _same_json(first: Any, second: Any) -> bool:
    return json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


# -- export ---------------------------------------------------------------------------------------


class NotExportable(ValueError):
    """A party the seed format cannot hold (a claim whose value is null)."""


def export_seed(storage: Storage) -> str:
    """Every user, client and link as a seed file (TOML) that `apply_seed` reads back: secrets as
    `secret_digest` and `password_hash`. NotExportable for a claim the format cannot hold."""
    out = [
        "# Written by `umaserver db export`: the parties of a server, for `umaserver seed apply`.",
        "# It holds password hashes and secret digests: keep it as you keep the database.",
    ]
    links: list[tuple[str, str, str]] = []
    for user in storage.list_users():
        out += ["", "[[users]]", f"username = {toml_string(user.username)}"]
        if user.password_hash is not None:
            out.append(f"password_hash = {toml_string(user.password_hash)}")
        if user.claims:
            out.append(f"claims = {_value(user.claims, f'users {user.username!r}: claims')}")
        links += [
            (user.username, issuer, subject) for issuer, subject in storage.links_of(user.sub)
        ]
    for client in storage.list_clients():
        settings = clients.settings_of(client)
        out += ["", "[[clients]]", f"client_id = {toml_string(client.client_id)}"]
        if not settings.name:  # registered at /register without a client_name
            out.append("# Registered without a name; a seed's client has one: its client_id here.")
            settings = replace(settings, name=client.client_id)
        if not settings.is_public:
            out.append(f"secret_digest = {toml_string(client.secret_digest)}")
            if settings.token_endpoint_auth_method != "client_secret_basic":  # noqa: S105
                out.append(
                    f"token_endpoint_auth_method = {toml_string(settings.token_endpoint_auth_method)}"
                )
        out.append(f"name = {toml_string(settings.name)}")
        for key, values in (
            ("redirect_uris", settings.redirect_uris),
            ("claims_redirect_uris", settings.claims_redirect_uris),
            ("push_claims", settings.push_claim_types),
            ("grant_types", settings.grant_types),
            ("scopes", settings.scope),
        ):
            if values:
                out.append(f"{key} = {_value(list(values), key)}")
        for key, uri in (("logo_uri", settings.logo_uri), ("client_uri", settings.client_uri)):
            if uri is not None:
                out.append(f"{key} = {toml_string(uri)}")
    for username, issuer, subject in links:
        out += [
            "",
            "[[links]]",
            f"user = {toml_string(username)}",
            f"issuer = {toml_string(issuer)}",
            f"subject = {toml_string(subject)}",
        ]
    return "\n".join(out) + "\n"


def _value(value: Any, where: str) -> str:
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotExportable(f"{where}: {value} has no place in a seed file")
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item, where) for item in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{toml_string(str(k))} = {_value(v, where)}" for k, v in value.items())
        return "{" + items + "}" if items else "{}"
    raise NotExportable(
        f"{where}: a value of {type(value).__name__} (JSON null) has no place in a seed file (TOML)"
    )

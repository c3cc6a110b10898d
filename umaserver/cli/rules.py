"""Commands on the owners' rules (the rule file's, and those owners made on their policy pages,
kept in the database): check them, and explain a decision rule by rule."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any

import click

from ..config import Config, ConfigError, load_config
from ..policy.rule_file import PolicyError, load_rules
from ..services import explain
from ..services.claim_verifiers import ConfiguredVerifiers
from ..services.decision import owner_name
from ..services.owner_rules import check_stored_rules, effective_rules
from ..storage import describe, is_postgresql
from . import CLOCK, _config, _store, emit, fail, main

# -- policies ----------------------------------------------------------------------------------


@main.group()
def policy() -> None:
    """The owners' rules: check them, and explain decisions."""


@policy.command("check")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.pass_context
def policy_check(ctx: click.Context, file: str | None) -> None:
    """Validate a rule file (default: `policies` of the config), naming every error; with a
    config, the owners' rules stored in its database too (each error naming the owner and id)."""
    config: Config | None = None
    if file is None:
        config = _config(ctx)
        path = config.policies
    else:
        path = Path(file)
        with suppress(ConfigError):  # a file alone can be checked without a config
            config = load_config(ctx.obj["config_path"])
    if not path.exists():
        fail(
            f"There is no rule file {path} (a server would run with no rules: nothing accessible)."
        )
    problems = []
    rule_ids: list[str] = []
    try:
        rule_ids = [rule.id for rule in load_rules(path).rules]
    except PolicyError as error:
        problems.append(f"{path}:\n{error}")
    answer: dict[str, Any] = {"file": str(path), "valid": True, "rules": rule_ids}
    if config is not None:
        # A database not made yet holds no rules (and `check` does not make one).
        made = is_postgresql(config.database) or Path(config.database).exists()
        stored = check_stored_rules(_store(ctx)) if made else None
        if stored is not None and stored.errors:
            problems.append(
                f"{describe(config.database)}: owners' rules:\n" + "\n".join(stored.errors)
            )
        answer["database"] = describe(config.database)
        answer["owner_rules"] = [
            {"owner": owner, "id": rule_id} for owner, rule_id in (stored.rules if stored else [])
        ]
        # Turned off, they are kept (and checked) but count in no decision.
        answer["owner_rules_enabled"] = config.owner_rules
    if problems:
        fail("\n".join(problems))
    emit(answer)


@policy.command("explain")
@click.option("--owner", required=True, help="The resource owner's username.")
@click.option("--resource-set", "rs_id", required=True, help="The resource set's _id.")
@click.option(
    "--scope", "scopes", required=True, multiple=True, help="A requested scope (repeatable)."
)
@click.option(
    "--claims",
    "claims_file",
    type=click.File("r"),
    help=(
        "A JSON array of claim objects, as in an authorization request ('-' for stdin; default:"
        " none)."
    ),
)
@click.option(
    "--client",
    "client_id",
    help=(
        "The pushing client: its claim types, and its id as issuer of plain claims (default: a"
        " client that may push every type, with every issuer the rules name vouching)."
    ),
)
@click.option(
    "--as",
    "--requesting-party",
    "party_name",
    metavar="USERNAME",
    help=(
        "A local user as the requesting party, signed in here: their attributes count as claims"
        " gathered by redirect (claim-client-redirect-1.0, vouched for by this server), their"
        " account claims (urn:umaserver:claim-type:account) count as with their AAT, and the"
        " client is supposed able to redirect them to sign in (here or at a configured provider)."
        " Without it, no person is supposed behind the request."
    ),
)
@click.pass_context
def policy_explain(
    ctx: click.Context,
    owner: str,
    rs_id: str,
    scopes: tuple[str, ...],
    claims_file: Any,
    client_id: str | None,
    party_name: str | None,
) -> None:
    """Print the decision for a request, the rule that decided it, and why each other rule did not
    (the rule file's rules of the owner, then the owner's own)."""
    config = _config(ctx)
    store = _store(ctx)
    resource_set = store.find_resource_set(rs_id)
    if resource_set is None or owner_name(store, resource_set.owner) != owner:
        fail(f"{owner!r} has no resource set {rs_id!r}.")
    party = None
    if party_name is not None:
        party = store.get_user_by_username(party_name)
        if party is None:
            fail(f"There is no user {party_name!r} (--as names a local user).")
    try:
        text = "[]" if claims_file is None else claims_file.read()
        objects = explain.claim_objects(text, "The claims file")
    except explain.ExplainRefused as refused:
        fail(refused.description)
    try:
        file_rules = load_rules(config.policies)
    except PolicyError as error:
        fail(f"The rule file {config.policies} is broken:\n{error}")
    rules = effective_rules(store, file_rules, owner, enabled=config.owner_rules)
    verifiers = ConfiguredVerifiers(config)
    verifiers.key_sets.refresh_now()
    try:
        answer = explain.explain_access(
            store,
            config,
            verifiers,
            rules,
            owner=owner,
            resource_set=resource_set,
            scopes=scopes,
            objects=objects,
            client_id=client_id,
            party=party,
            now=CLOCK.now(),
        )
    except explain.ExplainRefused as refused:
        fail(refused.description)
    emit(answer)

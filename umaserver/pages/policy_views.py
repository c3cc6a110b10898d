"""What the owner's set page shows (`pages.policy`): rules, shares and apps as views for the
templates, the forms as typed with a sentence next to each field, and an explanation's text with
rules named by their titles."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flask import request

from .. import strict_json
from ..policy.rule_file import OPERATORS, OWNER_RULE_PREFIX
from ..policy.rules import Condition, Rule
from ..runtime import runtime
from ..services import explain, rule_sentences, shares
from ..storage.per_request import storage
from ..storage.records import ResourceSet, User
from . import csrf
from .untrusted import scope_view

MAX_ROWS = 20  # condition rows on a form
ADD_ROW = "add_row"
_ROW_FIELD = re.compile(r"conditions-(\d+)-(claim|operator|value|types|issuers|hint)")


# -- what the templates show -----------------------------------------------------------------


@dataclass(frozen=True)
class ConditionView:
    claim: str
    test: str  # "contains 'doctor'"
    sources: str
    hint: str | None
    said: str = ""  # "employee claims say their role contains 'doctor'"


@dataclass(frozen=True)
class RuleView:
    id: str
    description: str | None
    scopes: tuple[str, ...]
    coverage: str
    conditions: tuple[ConditionView, ...]
    # The clients it holds for, each as its name and id ("Viewer (abc)"), or its id when unknown;
    # empty: any client.
    clients: tuple[str, ...] = ()
    name: str | None = None  # a rule made through Keycloak's policy API has one
    # The rule as a sentence: "People whose employee claims say their role contains 'doctor' may
    # view and print."
    sentence: str = ""

    @property
    def title(self) -> str:
        """Its name or description; an id the server generated is never a title."""
        return self.name or self.description or _untitled(self.id)


def _untitled(rule_id: str) -> str:
    if rule_id.startswith(OWNER_RULE_PREFIX):
        return "A rule of yours without a description"
    return rule_id


def _client_label(client_id: str) -> str:
    client = storage().get_client(client_id)
    return f"{client.name} ({client_id})" if client is not None and client.name else client_id


def _client_name(client_id: str) -> str:
    client = storage().get_client(client_id)
    return client.name if client is not None and client.name else client_id


def _scope_name(scope: str) -> str:
    return scope_view(scope).name or scope


def _sources(condition: Condition) -> str:
    """Which claims a condition reads: "claims of type urn:a or urn:b, vouched for by
    https://idp"; "any claim type, any issuer"."""
    types = condition.types
    issuers = condition.issuers
    said = (
        "claims of type " + rule_sentences.words(sorted(types), "or")
        if types is not None
        else "any claim type"
    )
    said += ", vouched for by " + rule_sentences.words(sorted(issuers), "or") if issuers else ""
    return said if issuers else said + ", any issuer"


def rule_view(rule: Rule, name: str | None = None, set_id: str | None = None) -> RuleView:
    return RuleView(
        id=rule.id,
        description=rule.description,
        scopes=rule.scopes,
        coverage=rule.resource_sets.description,
        conditions=tuple(
            ConditionView(
                c.claim,
                c.description,
                _sources(c),
                c.hint,
                f"{rule_sentences.source_phrase(c)}: {rule_sentences.condition_clause(c)}",
            )
            for c in rule.conditions
        ),
        clients=tuple(_client_label(client_id) for client_id in sorted(rule.clients or ())),
        name=name,
        sentence=rule_sentences.rule_sentence(
            rule, set_id=set_id, scope_label=_scope_name, client_label=_client_name
        ),
    )


@dataclass(frozen=True)
class AppChoice:
    """An app the explain form offers, by its name as registered (its id when names repeat)."""

    client_id: str
    label: str


MAX_APPS = 500  # the explain form's list; more are left out (by name)


def app_choices() -> list[AppChoice]:
    clients = sorted(storage().list_clients(), key=lambda c: (c.name.casefold(), c.client_id))
    names = Counter(client.name for client in clients)
    return [
        AppChoice(
            c.client_id,
            c.name if c.name and names[c.name] == 1 else f"{c.name or 'An app'} ({c.client_id})",
        )
        for c in clients[:MAX_APPS]
    ]


class RuleForm:
    """A rule form's fields as typed (`owner_rules` names them), its condition rows and the
    errors next to them; `rows` are the indices of the rows to show."""

    def __init__(
        self,
        fields: Mapping[str, Sequence[str]],
        errors: Mapping[str, str] | None = None,
        extra_rows: int = 0,
    ) -> None:
        self.fields = {name: list(values) for name, values in fields.items()}
        self.errors = dict(errors or {})
        indices = [int(m.group(1)) for m in map(_ROW_FIELD.fullmatch, self.fields) if m]
        shown = max(indices) + 1 if indices else 0
        # Rows sent past the form's own (a rule refused for having too many conditions) are
        # shown too, so that nothing typed is lost, up to a bound.
        most = min(max(shown, MAX_ROWS), 5 * MAX_ROWS)
        self.rows = list(range(min(max(shown + extra_rows, 1), most)))
        self.operators = OPERATORS

    @classmethod
    def empty(cls) -> RuleForm:
        return cls({"coverage": ["this"]})

    def value(self, name: str) -> str:
        values = self.fields.get(name) or [""]
        return values[0]

    def values(self, name: str) -> list[str]:
        return self.fields.get(name, [])

    def row(self, index: int, part: str) -> str:
        return f"conditions-{index}-{part}"

    def scope_choices(self, registered: Sequence[str]) -> list[str]:
        """The set's scopes, and any others the rule grants (a rule covering more sets)."""
        return list(dict.fromkeys([*registered, *self.values("scopes")]))

    def app_choices(self, apps: Sequence[AppChoice]) -> list[AppChoice]:
        """The apps to offer by name, and any the rule names that are not among them (a client
        since deleted, or one beyond the list's length) by id."""
        known = {app.client_id for app in apps}
        chosen = list(dict.fromkeys(" ".join(self.values("clients")).split()))
        return [*apps, *(AppChoice(c, c) for c in chosen if c not in known)]

    def chose_app(self, client_id: str) -> bool:
        return client_id in " ".join(self.values("clients")).split()

    @property
    def can_add_row(self) -> bool:
        return len(self.rows) < MAX_ROWS


def rule_fields() -> dict[str, list[str]]:
    """The rule form's fields as sent (without the token and the buttons)."""
    fields = request.form.to_dict(flat=False)
    for name in (csrf.FIELD, ADD_ROW):
        fields.pop(name, None)
    return fields


@dataclass(frozen=True)
class ExplainForm:
    client: str = ""
    # The person asking, by username ("" : nobody signed in behind the app).
    party: str = ""
    scopes: tuple[str, ...] = ()
    claims: str = "[]"
    errors: Mapping[str, str] | None = None
    # One more claim, field by field: added to the JSON's as `{type, value: {name: value}}`.
    claim_type: str = ""
    claim_name: str = ""
    claim_value: str = ""

    def error(self, name: str) -> str | None:
        return (self.errors or {}).get(name)


@dataclass(frozen=True)
class ShareForm:
    """The Share form as typed, and a sentence for the owner next to each field it is about
    (`None` for the form as a whole)."""

    to: str = ""
    scopes: tuple[str, ...] = ()
    until: str = ""
    errors: Mapping[str | None, str] | None = None

    def error(self, name: str | None) -> str | None:
        return (self.errors or {}).get(name)


@dataclass(frozen=True)
class ShareView:
    """One share as the set's page lists it: "bob - view, print - until 28 Nov 2026"."""

    rule_id: str
    recipient: str
    scopes: tuple[str, ...]
    until: str | None  # "28 Nov 2026", the last day it holds


def _day(until: int) -> str:
    day = shares.last_day(until)
    return f"{day.day} {day:%b %Y}"


def share_views(user: User, resource_set: ResourceSet) -> list[ShareView]:
    return [
        ShareView(s.rule_id, s.recipient, s.scopes, None if s.until is None else _day(s.until))
        for s in shares.shares_on(storage(), user.sub, resource_set.id)
    ]


ONE_CLAIM = ("claim_type", "claim_name", "claim_value")


CLAIMS_EXAMPLE = '[{"type": "urn:example:team", "value": {"team": "radiology"}}]'
_CLAIM_AT = re.compile(r"claims\[(\d+)\]: (.*)", re.DOTALL)


def explain_sentence(refused: explain.ExplainRefused) -> str:
    """What `services.explain` refused, said for the owner next to its field."""
    said = refused.description
    if refused.field != "claims":
        return said
    if said.startswith(("The claims is not JSON", "The claims must be a JSON array")):
        return f"Write the claims as a JSON list of claim objects, such as {CLAIMS_EXAMPLE}."
    found = _CLAIM_AT.fullmatch(said)
    if found is None:
        return said
    number, rest = int(found.group(1)) + 1, found.group(2)
    rest = rest.replace("this client may not push", "this app may not send")
    return f"Claim {number}: {rest}" + ("" if rest.endswith(".") else ".")


def rule_titles(user: User, resource_set: ResourceSet) -> dict[str, str]:
    """The title of each rule that may decide on the set, by id: a share by its person."""
    return shares.rule_titles(
        storage(),
        runtime().policies.rules,
        user,
        shares.shares_on(storage(), user.sub, resource_set.id),
    )


_QUOTED = r"(?:'[^'\n]*'|\"[^\"\n]*\")"
_LISTED = re.compile(rf"\[({_QUOTED}(?:, {_QUOTED})*)\]")


def said(text: str, titles: Mapping[str, str]) -> str:
    """A decision's summary or reason as the page says it: rules by title, and a list of names
    as words ("accepted types ['urn:a', 'urn:b']" -> "accepted types urn:a or urn:b")."""
    listed = _LISTED.sub(
        lambda found: rule_sentences.words(
            [item[1:-1] for item in re.findall(_QUOTED, found.group(1))], "or"
        ),
        text,
    )
    return _titled(listed, titles)


def _titled(text: str, titles: Mapping[str, str]) -> str:
    """`text` (a decision's summary) with each rule's quoted id ('o-GtQ...') as its title."""
    return re.sub(
        r"([Rr]ules? )('[^']*'(?:(?:, | and )'[^']*')*)",
        lambda found: (
            found.group(1)
            + re.sub(
                r"'([^']*)'",
                lambda quoted: "“" + titles.get(quoted.group(1), quoted.group(1)) + "”",
                found.group(2),
            )
        ),
        text,
    )


def one_claim(one: Mapping[str, str]) -> list[dict[str, Any]]:
    """The claim given field by field, as a claim object; none when no name was given. The value
    is taken as JSON when it is JSON (`42`, `true`, `["a"]`), else as the text."""
    if not one["claim_name"]:
        return []
    try:
        value = strict_json.loads(one["claim_value"])
    except ValueError:
        value = one["claim_value"]
    return [{"type": one["claim_type"], "value": {one["claim_name"]: value}}]

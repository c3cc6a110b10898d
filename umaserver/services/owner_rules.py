"""Owners' own rules, kept in the database and edited on the owner's policy page (issue 12).

INTERFACE SKELETON: the owner-rules work fills this in; the pages build against these names.

A rule of an owner has the same form as a rule of the file (`policy.rules.Rule`), is validated by
the same code (`policy.rule_file`), has an id `o-<random>` (never one of the file's ids), and is
evaluated together with the file's rules from the next request on (`effective_rules`).

The form (`rule_from_form`), without JavaScript; field names:

- `description`: optional text.
- `coverage`: `this` (the resource set of the page; the default), `all` (every set of the owner) or
  `type`, with `coverage_type`: the resource set type.
- `scopes`: the scopes granted (repeated field, at least one).
- condition rows, N = 0, 1, ...: `conditions-N-claim`, `conditions-N-operator` (one of
  `policy.rule_file.OPERATORS`), `conditions-N-value`, `conditions-N-types` and
  `conditions-N-issuers` (space-separated; empty for any), `conditions-N-hint`. A row whose claim
  is empty is ignored (the page always offers one empty row).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..policy.rules import Rule, RuleSet
from ..storage import Storage


class RuleFormError(Exception):
    """The form cannot make a rule; `errors` maps a field name (as above) to what is wrong with
    it, for people; `""` for the form as a whole."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{k or 'form'}: {v}" for k, v in errors.items()))
        self.errors = dict(errors)


@dataclass(frozen=True)
class OwnerRule:
    rule: Rule
    created_at: int
    updated_at: int


def rule_from_form(
    owner: str, resource_set_id: str, form: Mapping[str, Sequence[str]], rule_id: str | None = None
) -> Rule:
    """A rule of `owner` from the form's fields (each a list of values, as
    `request.form.to_dict(flat=False)`); a new id when `rule_id` is None. Raises RuleFormError."""
    raise NotImplementedError


def form_from_rule(rule: Rule, resource_set_id: str) -> dict[str, list[str]]:
    """The form's fields for editing `rule` (the inverse of `rule_from_form`)."""
    raise NotImplementedError


def owner_rules(storage: Storage, owner: str) -> list[OwnerRule]:
    """The rules `owner` (as rules name owners: a username) made, oldest first."""
    raise NotImplementedError


def add_owner_rule(storage: Storage, owner: str, rule: Rule, now: int) -> None:
    raise NotImplementedError


def replace_owner_rule(storage: Storage, owner: str, rule: Rule, now: int) -> bool:
    """False when `owner` has no rule of that id."""
    raise NotImplementedError


def delete_owner_rule(storage: Storage, owner: str, rule_id: str, now: int) -> bool:
    raise NotImplementedError


def effective_rules(storage: Storage, file_rules: RuleSet, owner: str) -> RuleSet:
    """The rules a decision about `owner`'s sets uses: the file's and the owner's own."""
    raise NotImplementedError

"""Owners' own rules (services/owner_rules.py; the form, services/owner_rule_form.py): the form to
a rule through the rule file's reader, every error on its field with the file's message; storing,
versions and the log; and decisions that count them from the next request on, over HTTP, in a
second app on the same database, and not at all with `[policies] owner_rules = false`."""

from __future__ import annotations

import logging
import re
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import Config, load_config
from umaserver.policy.rule_file import parse_rule_table, parse_rules
from umaserver.policy.rules import Rule, RuleSet
from umaserver.services import owner_rules
from umaserver.services.owner_rule_form import RuleFormError, form_from_rule, rule_from_form
from umaserver.services.owner_rules import (
    OwnerRulesDisabled,
    add_owner_rule,
    delete_owner_rule,
    effective_rules,
    replace_owner_rule,
)

from .conftest import (
    FakeClock,
    Party,
    Store,
    make_party,
    make_user,
    owner_rules_version,
    store_owner_rule_as_is,
)
from .flows import EMPLOYEE, OIDC, PHOTO_TYPE, FlaskApi, Flow

RS_ID = "rs-photos"
Form = dict[str, list[str]]


def form(**fields: str | list[str]) -> Form:
    """Form fields as `request.form.to_dict(flat=False)` gives them (`conditions_0_claim` for
    `conditions-0-claim`)."""
    return {
        name.replace("_", "-") if name.startswith("conditions") else name: (
            value if isinstance(value, list) else [value]
        )
        for name, value in fields.items()
    }


def file_rule(text: str, rule_id: str = "o-x") -> Rule:
    """The rule of a rule file's `[[rules]]` table (`id` and `owner` given here), as its reader
    reads it."""
    table = tomllib.loads(f'id = "{rule_id}"\nowner = "alice"\n{text}')
    return parse_rule_table(table)


# -- the form ----------------------------------------------------------------------------------


def test_a_form_makes_the_rule_the_file_would() -> None:
    made = rule_from_form(
        "alice",
        RS_ID,
        {
            "description": [" Doctors may view "],
            "coverage": ["this"],
            "scopes": ["view", " print ", "", "view"],
            # A row without a claim is left out, and the rows need not be numbered from 0.
            "conditions-0-claim": [""],
            "conditions-0-operator": ["equals"],
            "conditions-3-claim": ["role"],
            "conditions-3-operator": ["contains"],
            "conditions-3-value": ["doctor"],
            "conditions-3-types": [f" {EMPLOYEE}  {OIDC} "],
            "conditions-3-issuers": [""],
            "conditions-3-hint": ["Your role"],
            "conditions-12-claim": ["age"],
            "conditions-12-operator": ["one_of"],
            "conditions-12-value": ['[18, 19, "20"]'],
            "conditions-12-issuers": ["https://idp.test"],
        },
        rule_id="o-given",
    )
    assert made == file_rule(
        f"""
scopes = ["view", "print"]
description = "Doctors may view"
resource_sets = {{ ids = ["{RS_ID}"] }}
[[conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}", "{OIDC}"]
hint = "Your role"
[[conditions]]
claim = "age"
one_of = [18, 19, "20"]
issuers = ["https://idp.test"]
""",
        "o-given",
    )


@pytest.mark.parametrize(
    ("coverage", "toml"),
    [
        ({}, f'resource_sets = {{ ids = ["{RS_ID}"] }}'),  # this set, by default
        ({"coverage": "this"}, f'resource_sets = {{ ids = ["{RS_ID}"] }}'),
        ({"coverage": "all"}, ""),
        ({"coverage": "type", "coverage_type": PHOTO_TYPE}, f'resource_sets = {{ types = ["{PHOTO_TYPE}"] }}'),
    ],
)  # fmt: skip
def test_coverage(coverage: dict[str, str], toml: str) -> None:
    made = rule_from_form("alice", RS_ID, form(scopes="view", **coverage), "o-x")
    assert made == file_rule(f'scopes = ["view"]\n{toml}')


def test_clients_are_space_separated_ids() -> None:
    made = rule_from_form(
        "alice", RS_ID, form(scopes="view", coverage="all", clients=" app-1  app-2 app-1 "), "o-x"
    )
    assert made == file_rule('scopes = ["view"]\nclients = ["app-1", "app-2"]')
    assert rule_from_form("alice", RS_ID, form(scopes="view", clients=" ")).clients is None
    # One checkbox per app: the field repeated.
    boxes = form(scopes="view", coverage="all", clients=["app-2", "app-1", "app-2"])
    assert rule_from_form("alice", RS_ID, boxes, "o-x") == made


@pytest.mark.parametrize(
    ("operator", "text", "operand"),
    [
        ("equals", "42", 42),
        ("equals", "1.5", 1.5),
        ("equals", "true", True),
        ("equals", "null", None),
        ("equals", '"42"', "42"),
        ("equals", "doctor", "doctor"),
        ("equals", " doctor ", " doctor "),
        ("equals", '{"a": [1]}', {"a": [1]}),
        ("contains", "nurse", "nurse"),
        ("contains", "7", 7),
        ("one_of", '["a", "b"]', ["a", "b"]),
        ("one_of", "[1, true]", [1, True]),
        ("contains_any", '["editor", "admin"]', ["editor", "admin"]),
        ("prefix", "42", "42"),
        ("suffix", "@example.com", "@example.com"),
        ("regex", "[0-9]+", "[0-9]+"),
        ("regex", '"quoted"', '"quoted"'),
        ("exists", "anything at all", True),
        ("exists", "", True),
    ],
)
def test_values_are_read_by_operator(operator: str, text: str, operand: Any) -> None:
    made = rule_from_form(
        "alice",
        RS_ID,
        form(scopes="view", conditions_0_claim="c", conditions_0_operator=operator, conditions_0_value=text),
    )  # fmt: skip
    [condition] = made.conditions
    assert (condition.operator, condition.operand) == (operator, operand)
    assert type(condition.operand) is type(operand)


SCOPE = 'scopes = ["view"]\n'
CONDITION = SCOPE + '[[conditions]]\nclaim = "c"\n'


# The form's mistake, the field it lands on, and the sentence the owner reads next to it (never
# the reader's words for a rule file, such as "must be a non-empty array of non-empty strings").
LIST = 'as a JSON list such as ["doctor", "nurse"].'
FIELD_ERRORS: list[tuple[Form, str, str]] = [
    (form(), "scopes", "Choose at least one scope."),
    (form(scopes=["", " "]), "scopes", "Choose at least one scope."),
    (form(scopes="view", coverage="type"), "coverage_type", "Write the type of the resource sets the rule covers."),
    (form(scopes="view", coverage="type", coverage_type=" "), "coverage_type", "Write the type of the resource sets the rule covers."),
    (form(scopes="view", coverage="some"), "coverage", "Choose which of your resource sets the rule covers."),
    (form(scopes="view", description=["a", "b"]), "description", "This field was sent more than once: reload the page and fill in the form again."),
    (form(scopes="view", conditions_0_claim="c"), "conditions-0-operator", "Choose a test."),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="starts_with"), "conditions-0-operator", "Choose a test from the list."),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="types"), "conditions-0-operator", "Choose a test from the list."),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="equals"), "conditions-0-value", 'Write the value the claim must have ("" for empty text).'),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="contains", conditions_0_value=" "), "conditions-0-value", 'Write the value the claim must have ("" for empty text).'),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="one_of", conditions_0_value="a"), "conditions-0-value", "Write the values the claim may have, " + LIST),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="one_of", conditions_0_value="[]"), "conditions-0-value", "Write the values the claim may have, " + LIST),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="contains_any", conditions_0_value="editor"), "conditions-0-value", "Write the values, one of which the claim must hold, " + LIST),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="prefix"), "conditions-0-value", "Write the text the claim must start with."),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="suffix", conditions_0_value=""), "conditions-0-value", "Write the text the claim must end with."),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="regex"), "conditions-0-value", "Write the pattern the claim must match."),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="regex", conditions_0_value="(a"), "conditions-0-value", "This pattern cannot be used (missing ): (a): see the rule file's notes on RE2."),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="equals", conditions_0_value="[" * 5000), "conditions-0-value", 'This starts like JSON but is not JSON: correct it, or write the text in quotes, such as "[draft]".'),
    (form(scopes="view", conditions_0_claim="c", conditions_0_operator="one_of", conditions_0_value='["a", "b"'), "conditions-0-value", "Write the values the claim may have, " + LIST),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "field", "sentence"), FIELD_ERRORS)
def test_every_error_is_a_sentence_for_the_owner_on_its_field(
    fields: Form, field: str, sentence: str
) -> None:
    with pytest.raises(RuleFormError) as raised:
        rule_from_form("alice", RS_ID, fields)
    assert raised.value.errors == {field: sentence}


def test_a_lookaround_pattern_says_why_it_cannot_be_used() -> None:
    fields = form(scopes="view", conditions_0_claim="c", conditions_0_operator="regex", conditions_0_value="(?=a)b")  # fmt: skip
    with pytest.raises(RuleFormError) as raised:
        rule_from_form("alice", RS_ID, fields)
    said = raised.value.errors["conditions-0-value"]
    assert said.startswith("This pattern cannot be used (") and "must be" not in said


def test_errors_of_several_rows_land_on_their_rows() -> None:
    fields = form(
        scopes="view",
        conditions_0_claim="a",
        conditions_0_operator="exists",
        conditions_1_claim="",  # left out: the next condition is the form's row 2
        conditions_2_claim="b",
        conditions_2_operator="prefix",
        conditions_5_claim="c",
        conditions_5_operator="one_of",
        conditions_5_value="3",
        coverage="type",
    )
    with pytest.raises(RuleFormError) as raised:
        rule_from_form("alice", RS_ID, fields)
    assert raised.value.errors == {
        "coverage_type": "Write the type of the resource sets the rule covers.",
        "conditions-2-value": "Write the text the claim must start with.",
        "conditions-5-value": "Write the values the claim may have, " + LIST,
    }
    assert "conditions-2-value: Write the text" in str(raised.value)


ROUND_TRIPS = [
    SCOPE + f'resource_sets = {{ ids = ["{RS_ID}"] }}',
    'scopes = ["view", "print"]\ndescription = "everything"',
    SCOPE + f'resource_sets = {{ types = ["{PHOTO_TYPE}"] }}',
    CONDITION + 'equals = "42"',
    CONDITION + 'equals = "true"',
    CONDITION + 'equals = "plain text"',
    CONDITION + 'equals = " spaced "',
    CONDITION + 'equals = "[not json"',
    CONDITION + 'equals = " {x"',
    CONDITION + "equals = 42",
    CONDITION + "equals = false",
    CONDITION + 'equals = { a = [1, "b"] }',
    CONDITION + 'contains = "doctor"\nhint = "Your role"',
    CONDITION + 'one_of = ["a", 1, true]\ntypes = ["t2", "t1"]\nissuers = ["https://i"]',
    CONDITION + 'prefix = "42"',
    SCOPE
    + 'clients = ["app-2", "app-1"]\n[[conditions]]\nclaim = "roles"\ncontains_any = ["a", "b"]',
    SCOPE + 'clients = ["app-1"]',
    CONDITION + 'suffix = "\\"x\\""',
    CONDITION + "regex = '[a-z]+'",
    CONDITION + "exists = true\n" + '[[conditions]]\nclaim = "d"\nequals = "ü"',
]


@pytest.mark.parametrize("toml", ROUND_TRIPS)
def test_a_rule_round_trips_through_its_form(toml: str) -> None:
    rule = file_rule(toml)
    fields = form_from_rule(rule, RS_ID)
    assert rule_from_form("alice", RS_ID, fields, rule.id) == rule
    assert form_from_rule(rule_from_form("alice", RS_ID, fields, rule.id), RS_ID) == fields


def test_a_rule_the_form_cannot_show_is_refused() -> None:
    for toml in ('resource_sets = { names = ["Diary"] }', 'resource_sets = { ids = ["other"] }'):
        with pytest.raises(ValueError, match="covers"):
            form_from_rule(file_rule(SCOPE + toml), RS_ID)


def test_new_rules_get_new_owner_rule_ids() -> None:
    ids = {rule_from_form("alice", RS_ID, form(scopes="view")).id for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"o-[A-Za-z0-9_-]{16}", rule_id) for rule_id in ids)
    assert rule_from_form("bob", RS_ID, form(scopes="view"), "o-kept").owner == "bob"


# -- storing -----------------------------------------------------------------------------------


def a_rule(owner: str = "alice", scopes: str = "view", rule_id: str | None = None) -> Rule:
    return rule_from_form(owner, RS_ID, form(scopes=scopes.split()), rule_id)


def test_add_replace_delete_bump_the_version_and_log_a_line_each(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    make_user(store, "alice")
    make_user(store, "bob")
    now = int(time.time())
    first, second = a_rule(), a_rule(scopes="print")
    with caplog.at_level(logging.INFO, logger="umaserver.policy"):
        add_owner_rule(store, "alice", first, now)
        add_owner_rule(store, "alice", second, now + 1)
        assert owner_rules_version(store, "alice") == 2
        changed = a_rule(scopes="view print", rule_id=first.id)
        assert replace_owner_rule(store, "alice", changed, now + 5) is True
        assert owner_rules_version(store, "alice") == 3
        listed = owner_rules.owner_rules(store, "alice")
        assert [(o.rule, o.created_at, o.updated_at) for o in listed] == [
            (changed, now, now + 5),
            (second, now + 1, now + 1),
        ]
        # Another owner's id, or one that is not there: nothing changes.
        assert replace_owner_rule(store, "bob", a_rule("bob", rule_id=first.id), now) is False
        assert delete_owner_rule(store, "bob", first.id, now) is False
        assert delete_owner_rule(store, "alice", "o-nothing", now) is False
        assert owner_rules_version(store, "alice") == 3
        assert delete_owner_rule(store, "alice", first.id, now) is True
        assert owner_rules_version(store, "alice") == 4
    assert [o.rule for o in owner_rules.owner_rules(store, "alice")] == [second]
    assert owner_rules.owner_rules(store, "bob") == []
    lines = [r.getMessage() for r in caplog.records if r.name == "umaserver.policy"]
    assert lines == [
        f"owner rule added: owner=alice rule={first.id} scopes=view sets=ids ['{RS_ID}'] conditions=0",
        f"owner rule added: owner=alice rule={second.id} scopes=print sets=ids ['{RS_ID}'] conditions=0",
        f"owner rule replaced: owner=alice rule={first.id} scopes=view,print sets=ids ['{RS_ID}'] conditions=0",
        f"owner rule deleted: owner=alice rule={first.id}",
    ]  # fmt: skip


def test_a_rule_of_another_owner_or_with_a_file_id_is_not_stored(store: Store) -> None:
    make_user(store, "alice")
    now = int(time.time())
    with pytest.raises(ValueError, match="a rule of 'bob'"):
        add_owner_rule(store, "alice", a_rule("bob"), now)
    with pytest.raises(ValueError, match="starting with 'o-'"):
        add_owner_rule(store, "alice", a_rule(rule_id="doctors"), now)
    with pytest.raises(LookupError):
        add_owner_rule(store, "nobody", a_rule("nobody"), now)
    rule = a_rule()
    add_owner_rule(store, "alice", rule, now)
    with pytest.raises(ValueError, match="taken"):
        add_owner_rule(store, "alice", rule, now)
    assert owner_rules_version(store, "alice") == 1


def test_turned_off_nothing_changes(store: Store) -> None:
    make_user(store, "alice")
    rule, now = a_rule(), int(time.time())
    add_owner_rule(store, "alice", rule, now)
    with pytest.raises(OwnerRulesDisabled, match="turned off"):
        add_owner_rule(store, "alice", a_rule(), now, enabled=False)
    with pytest.raises(OwnerRulesDisabled):
        replace_owner_rule(store, "alice", rule, now, enabled=False)
    with pytest.raises(OwnerRulesDisabled):
        delete_owner_rule(store, "alice", rule.id, now, enabled=False)
    assert owner_rules_version(store, "alice") == 1
    file_rules = RuleSet()
    assert effective_rules(store, file_rules, "alice", enabled=False) is file_rules


# -- effective rules ---------------------------------------------------------------------------


class CountingStore:
    """A storage handle that counts the reads of owners' rules (everything else passes through)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.reads = 0

    def owner_rules_of(self, user_sub: str) -> Any:
        self.reads += 1
        return self._store.owner_rules_of(user_sub)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_effective_rules_are_the_files_then_the_owners_read_again_only_after_a_change(
    store: Store,
) -> None:
    make_user(store, "alice")
    file_rules = parse_rules(
        '[[rules]]\nid = "file"\nowner = "alice"\nscopes = ["view"]\n'
        '[[rules]]\nid = "bobs"\nowner = "bob"\nscopes = ["view"]\n'
    )
    counting = CountingStore(store)
    reading: Any = counting
    assert effective_rules(reading, file_rules, "alice") is file_rules  # none made yet
    assert effective_rules(reading, file_rules, "client:rs-1") is file_rules
    assert counting.reads == 0
    mine = a_rule()
    add_owner_rule(store, "alice", mine, int(time.time()))
    rules = effective_rules(reading, file_rules, "alice")
    assert [rule.id for rule in rules.rules_for("alice")] == ["file", mine.id]
    assert effective_rules(reading, file_rules, "alice") is rules
    assert counting.reads == 1
    # A reload of the file: built again on the new file's rules, the owner's not read again.
    reloaded = parse_rules('[[rules]]\nid = "new"\nowner = "alice"\nscopes = ["print"]\n')
    assert [r.id for r in effective_rules(reading, reloaded, "alice").rules_for("alice")] == [
        "new",
        mine.id,
    ]
    assert counting.reads == 1
    delete_owner_rule(store, "alice", mine.id, int(time.time()))
    assert [r.id for r in effective_rules(reading, file_rules, "alice").rules_for("alice")] == [
        "file"
    ]
    assert counting.reads == 2


def test_a_broken_stored_rule_is_ignored_and_logged(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    make_user(store, "alice")
    good = a_rule()
    add_owner_rule(store, "alice", good, int(time.time()))
    assert store_owner_rule_as_is(store, "alice", "o-broken", {"scopes": [], "colour": 1})
    with caplog.at_level(logging.ERROR, logger="umaserver.policy"):
        rules = effective_rules(store, RuleSet(), "alice")
    assert [rule.id for rule in rules.rules_for("alice")] == [good.id]
    assert (
        "owner rule o-broken of alice is broken and ignored: o-broken: unknown key" in caplog.text
    )
    assert [o.rule.id for o in owner_rules.owner_rules(store, "alice")] == [good.id]


# -- decisions over HTTP -----------------------------------------------------------------------


@pytest.fixture
def world(http: FlaskClient, store: Store, rs: Party) -> Flow:
    """alice's photo server and her Photos set, which no rule of the file covers (the file has
    none); bob's client, which may push employee claims."""
    app = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))
    return Flow(FlaskApi(http), rs, app, {"name": "Photos", "scopes": ["view", "print"]})


def refused(flow: Flow, *scopes: str) -> bool:
    reply = flow.ask(flow.ticket(*scopes))
    assert reply.status in (201, 403), reply.text
    if reply.status == 403:
        assert reply.json["error"] == "not_authorized_permission", reply.json
    return reply.status == 403


DOCTORS = {
    "scopes": ["view"],
    "conditions-0-claim": ["role"],
    "conditions-0-operator": ["contains"],
    "conditions-0-value": ["doctor"],
    "conditions-0-types": [EMPLOYEE],
    "conditions-0-hint": ["Your role at the hospital"],
}


def test_an_owner_rule_counts_from_the_next_request_until_it_is_deleted(
    world: Flow, store: Store
) -> None:
    assert refused(world, "view")
    rule = rule_from_form("alice", world.rs_id, DOCTORS)
    add_owner_rule(store, "alice", rule, int(time.time()))
    ticket = world.ticket("view")
    asked = world.ask(ticket)
    assert asked.status == 403 and asked.json == {
        "need_claims": [{"type": EMPLOYEE, "name": "role", "value": "Your role at the hospital"}]
    }
    granted = world.ask(ticket, [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}])
    assert granted.status == 201, granted.text
    assert [p["scopes"] for p in world.introspect(granted.json["rpt"])["permissions"]] == [["view"]]
    # Only what it grants, on only the set it covers.
    assert refused(world, "print")
    other = world.register({"name": "Diary", "scopes": ["view"]})
    assert world.ask(world.ticket("view", rs_id=other)).status == 403

    assert delete_owner_rule(store, "alice", rule.id, int(time.time()))
    ticket = world.ticket("view")
    assert world.ask(ticket, [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]).status == 403


def test_another_app_on_the_database_sees_a_change_at_its_next_request(
    world: Flow, store: Store, config: Config, clock: FakeClock
) -> None:
    other = create_app(config, clock=clock)
    elsewhere = Flow(
        FlaskApi(other.test_client()), world.rs, world.app, {"name": "X", "scopes": ["view"]}
    )
    elsewhere.rs_id = world.rs_id
    rule = rule_from_form("alice", world.rs_id, form(scopes="view"))
    add_owner_rule(store, "alice", rule, int(time.time()))
    assert not refused(elsewhere, "view") and not refused(world, "view")
    # Changed by another handle (another process, say): both apps see it at their next request.
    replace_owner_rule(store, "alice", rule_from_form("alice", world.rs_id, form(scopes="print"), rule.id), int(time.time()))  # fmt: skip
    assert refused(elsewhere, "view") and refused(world, "view")
    assert not refused(elsewhere, "print")


@pytest.fixture
def off_config(config_path: Path) -> Config:
    text = config_path.read_text(encoding="utf-8").replace('policies = "policies.toml"\n', "")
    config_path.write_text(
        text + '[policies]\nfile = "policies.toml"\nowner_rules = false\n', encoding="utf-8"
    )
    return load_config(config_path)


@pytest.fixture
def off_app(off_config: Config, clock: FakeClock) -> Iterator[Flask]:
    yield create_app(off_config, clock=clock)


def test_turned_off_the_stored_rules_count_in_no_decision(
    world: Flow, store: Store, off_app: Flask
) -> None:
    add_owner_rule(store, "alice", rule_from_form("alice", world.rs_id, form(scopes="view")), 0)
    assert not refused(world, "view")
    off = Flow(FlaskApi(off_app.test_client()), world.rs, world.app, {"name": "X", "scopes": ["view"]})  # fmt: skip
    off.rs_id = world.rs_id
    assert refused(off, "view")

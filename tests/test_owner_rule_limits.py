"""Server-side limits on owners' own rules (issue 27, N6: `[limits] owner_rules_per_owner`,
`conditions_per_rule`, `rule_value_bytes`), through the owner's policy page and Keycloak's policy
API: past each, the rule is refused with a sentence next to its field (or the JSON error shape),
nothing is stored, and the form keeps what was typed."""

from __future__ import annotations

import re
import threading
from typing import Any

from flask.testing import FlaskClient

from umaserver.config import Config
from umaserver.services.owner_rule_form import rule_from_form
from umaserver.services.owner_rules import add_owner_rule, owner_rules
from umaserver.services.rule_limits import RuleLimits, RuleTooLarge

from . import test_policy_pages as pages
from .conftest import Store, open_store, store_owner_rule_as_is
from .flows import Flow
from .test_policy_pages import NURSES, own_rule_ids, page_of, token_on

# The policy pages' parties: alice signed in on her set, which bob's client asks for.
rules_text, people, viewer, flow, alice = (
    pages.rules_text,
    pages.people,
    pages.viewer,
    pages.flow,
    pages.alice,
)


def error_at(page: Any, field: str) -> str:
    """The sentence shown right after the field `field`."""
    shown = re.search(
        rf'name="{field}"[^>]*>\s*<span class="field-error" id="error-{field}">([^<]+)</span>',
        page.text,
    )
    assert shown is not None, page.text
    return shown.group(1)


def post_rule(alice: FlaskClient, flow: Flow, **fields: Any) -> Any:
    form = {**NURSES, **fields, "csrf_token": token_on(alice, page_of(flow))}
    return alice.post(page_of(flow) + "/rules", data=form)


def test_the_201st_rule_is_refused(alice: FlaskClient, flow: Flow, store: Store) -> None:
    for n in range(199):
        table = {"scopes": ["view"], "resource_sets": {"ids": [flow.rs_id]}}
        assert store_owner_rule_as_is(store, "alice", f"o-kept{n}", table)
    assert post_rule(alice, flow).status_code == 303  # the 200th
    page = post_rule(alice, flow, description="One more")
    assert page.status_code == 400
    assert "You have 200 rules of your own already" in page.text
    assert 'value="One more"' in page.text
    assert len(own_rule_ids(alice, flow)) == 200


def test_a_21st_condition_is_refused(alice: FlaskClient, flow: Flow) -> None:
    rows = {}
    for row in range(21):
        rows |= {
            f"conditions-{row}-claim": f"claim{row}",
            f"conditions-{row}-operator": "equals",
            f"conditions-{row}-value": f"value{row}",
        }
    page = post_rule(alice, flow, **rows)
    assert page.status_code == 400
    assert error_at(page, "conditions-20-claim").startswith("A rule has at most 20 conditions")
    # Every row typed is still there, the 21st too.
    assert 'name="conditions-20-value" value="value20"' in page.text
    assert own_rule_ids(alice, flow) == []
    del rows["conditions-20-claim"]
    assert post_rule(alice, flow, **rows).status_code == 303


def test_a_value_of_1025_bytes_is_refused(alice: FlaskClient, flow: Flow) -> None:
    too_long = "é" * 512 + "x"  # 1,025 bytes in UTF-8
    page = post_rule(alice, flow, **{"conditions-0-value": too_long})
    assert page.status_code == 400
    assert error_at(page, "conditions-0-value") == (
        "This value is 1,025 bytes long; at most 1,024 are kept: shorten it."
    )
    assert f'value="{too_long}"' in page.text
    assert own_rule_ids(alice, flow) == []
    # So is a description that long; 1,024 bytes are kept.
    page = post_rule(alice, flow, description="d" * 1025)
    assert error_at(page, "description").startswith("This description is 1,025 bytes long")
    assert post_rule(alice, flow, **{"conditions-0-value": "é" * 512}).status_code == 303
    [rule_id] = own_rule_ids(alice, flow)
    # Editing it past the limit is refused too, and leaves it as it was.
    edit = f"{page_of(flow)}/rules/{rule_id}"
    form = {**NURSES, "conditions-0-hint": "h" * 1025, "csrf_token": token_on(alice, edit)}
    page = alice.post(edit, data=form)
    assert page.status_code == 400
    assert error_at(page, "conditions-0-hint").startswith("This hint is 1,025 bytes long")
    assert 'value="' + "é" * 512 + '"' in alice.get(edit).text


def test_owners_rules_added_at_once_stop_at_the_limit(config: Config, store: Store) -> None:
    """12 rules of one owner added at once, each on a connection of its own, with room for 5:
    5 are kept (on PostgreSQL too, where nothing else serialises the writers)."""
    limits = RuleLimits(rules_per_owner=5)
    handles = [open_store(config.database) for _ in range(12)]
    start = threading.Barrier(len(handles))
    outcomes: list[str] = []

    def add(handle: Store) -> None:
        rule = rule_from_form("alice", "rs-photos", {"scopes": ["view"]})
        start.wait()
        try:
            add_owner_rule(handle, "alice", rule, 0, limits=limits)
        except RuleTooLarge:
            outcomes.append("refused")
        else:
            outcomes.append("added")

    threads = [threading.Thread(target=add, args=(handle,)) for handle in handles]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for handle in handles:
            handle.close()
    assert sorted(outcomes) == ["added"] * 5 + ["refused"] * 7
    assert len(owner_rules(store, "alice")) == 5

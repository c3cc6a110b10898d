"""The owner's set page as the policy routes share it: the set looked up for its owner, the
references that revoke a permission, and the page rendered with its rules, shares, permissions and
forms (`render_set`). The routes that change it are `pages.policy`'s.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import abort, request
from werkzeug.wrappers import Response as BaseResponse

from ..policy.rules import ResourceSetRef
from ..runtime import runtime
from ..services import owner_permissions, owner_rules
from ..storage.per_request import storage
from ..storage.records import ResourceSet, User
from . import sessions
from .policy_views import (
    ExplainForm,
    RuleForm,
    ShareForm,
    app_choices,
    rule_view,
    share_views,
)
from .rendering import render

MAX_ID = 256  # longer is no _id of ours


def when(moment: int) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


def parameter(name: str, limit: int) -> str | None:
    values = request.args.getlist(name)
    if len(values) > 1:
        abort(400, description=f"The parameter {name} is given more than once.")
    if values and len(values[0]) > limit:
        abort(400, description=f"The parameter {name} is too long.")
    return values[0] if values else None


def signed_in() -> User:
    user = sessions.current_user()
    assert user is not None  # signin_required
    return user


def owned_set(user: User, rs_id: str) -> ResourceSet:
    """The set when it is `user`'s; the 404 page otherwise, the same for an unknown id."""
    found = storage().find_resource_set(rs_id) if len(rs_id) <= MAX_ID else None
    if found is None or found.owner != user.sub:
        abort(404)
    return found


def set_page(rs_id: str) -> str:
    return runtime().config.url(f"/policy/resource_set/{rs_id}")


def reference_key() -> bytes:
    return owner_permissions.reference_key(runtime().config.secret_key)


def reference_keys() -> tuple[bytes, ...]:
    """Every listed secret key's: a page rendered before a rotation still revokes."""
    return tuple(map(owner_permissions.reference_key, runtime().config.secret_keys))


def set_ref(resource_set: ResourceSet) -> ResourceSetRef:
    return ResourceSetRef(resource_set.id, resource_set.name, resource_set.description.get("type"))


# -- the owner's rules ------------------------------------------------------------------------


def editing() -> bool:
    """Whether owners may make rules of their own here (`[policies] owner_rules`)."""
    return runtime().config.owner_rules


def check_editing() -> None:
    if not editing():
        abort(403, description="The operator of this server has turned owners' own rules off.")


def render_set(
    user: User,
    resource_set: ResourceSet,
    *,
    status: int = 200,
    share_form: ShareForm | None = None,
    rule_form: RuleForm | None = None,
    explain_form: ExplainForm | None = None,
    explained: dict[str, Any] | None = None,
) -> BaseResponse:
    store = storage()
    now = runtime().clock.now()
    description = resource_set.description
    ref = set_ref(resource_set)
    file_rules = [
        rule_view(rule, set_id=resource_set.id)
        for rule in runtime().policies.rules.rules_for(user.username)
        if rule.resource_sets.covers(ref)
    ]
    shared = share_views(user, resource_set)
    share_ids = {view.rule_id for view in shared}
    own = [
        rule_view(found.rule, found.name, resource_set.id)
        for found in owner_rules.owner_rules(store, user.username)
        if found.rule.resource_sets.covers(ref) and found.rule.id not in share_ids
    ]
    # How the explanation names each rule: by its title, a share by its person.
    titles = {view.id: (view.title, "the operator's") for view in file_rules}
    titles.update({view.id: (view.title, "yours") for view in own})
    titles.update({view.rule_id: (f"Your share with {view.recipient}", "") for view in shared})
    granted = owner_permissions.granted_on(store, resource_set.id, now, reference_key())
    scopes = [str(scope) for scope in description.get("scopes", [])]
    return render(
        "pages/policy_set.html",
        status,
        rs=resource_set,
        name=resource_set.label,
        type=description.get("type"),
        icon_uri=description.get("icon_uri"),
        scopes=scopes,
        client=store.get_client(resource_set.client_id),
        shares=shared,
        share_form=share_form or ShareForm(),
        file_rules=file_rules,
        own_rules=own,
        editing=editing(),
        rule_form=rule_form or RuleForm.empty(),
        rule_form_open=rule_form is not None,
        permissions=[(g, when(g.expires_at)) for g in granted],
        explain_form=explain_form or ExplainForm(scopes=tuple(scopes[:1])),
        explained=explained,
        rule_titles=titles,
        apps=app_choices(),
        action=f"/policy/resource_set/{resource_set.id}",
    )

"""The owner's policy pages (issue 12): who may do what on the owner's resource sets.

- `GET /policy`: the signed-in owner's resource sets across resource servers, by name, a page of
  `PAGE_SIZE` at a time (`after`, `after_name`: the (id, name) of the last set of the page before).
- `GET /policy/resource_set/<_id>`: a set's page, the `user_access_policy_uri` of its
  registration: the set as registered (names and URIs from registration shown as text, marked
  not verified; scopes, icons and links through `untrusted`), the rule file's rules that cover it
  (the operator's, read-only), the owner's own rules that cover it (edit, delete), a form to add
  one, the permissions granted on it (revoke), and a form to explain a decision.
- `POST .../rules` (add), `GET/POST .../rules/<rule_id>` (edit), `POST .../rules/<rule_id>/delete`,
  `POST .../permissions/revoke`: each answered by a 303 back to the set's page, each logged. A rule
  form's "Add a condition row" button and a refused form render the form again, nothing changed.
- `POST .../shares` (the Share form: `to`, `scopes`, `until`) and `POST .../shares/<rule_id>/stop`
  (Stop sharing): `services.shares`, each a 303 back to the set's page; a refused Share form is the
  page again with a sentence next to its field; a share by an address that no local user has
  comes with an invitation, whose link the set's page shows once (`pages.invitations`). A share's
  rule is listed as a share ("bob - view, print - until 28 Nov 2026"), never among the rules to
  edit or delete.
- `POST .../explain`: the set's page with what the decision would be for a client and claims,
  rule by rule (`services.explain`, as `policy explain` says it).

What the page shows (rules, shares and apps as views, the forms as typed, an explanation's words)
is built in `pages.policy_views`, the set page rendered in `pages.policy_set`; the routes are here.

Signed out: to sign-in and back. A set that is not the signed-in person's is the same 404 page as
an unknown one. Every form carries the CSRF token; no script anywhere.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from flask import Blueprint, abort, redirect, request
from werkzeug.wrappers import Response as BaseResponse

from ..runtime import runtime
from ..services import (
    explain,
    invitations,
    notices,
    owner_permissions,
    owner_rule_form,
    owner_rules,
    rule_limits,
    shares,
)
from ..storage.per_request import storage
from ..storage.records import ResourceSet, User
from . import csrf, sessions
from . import invitations as invitation_pages
from .forms import INCOMPLETE, one_field
from .policy_set import (
    MAX_ID,
    check_editing,
    owned_set,
    parameter,
    reference_keys,
    render_set,
    set_page,
    signed_in,
)
from .policy_views import (
    ADD_ROW,
    ONE_CLAIM,
    ExplainForm,
    RuleForm,
    ShareForm,
    app_choices,
    explain_sentence,
    one_claim,
    rule_fields,
    rule_titles,
    said,
)
from .rendering import render

bp = Blueprint("policy", __name__, template_folder="templates")
log = logging.getLogger("umaserver.policy")

PAGE_SIZE = 50
MAX_NAME = 4096
MAX_CLAIMS_TEXT = 64 * 1024


# -- the list ----------------------------------------------------------------------------------


@bp.get("/policy")
@sessions.signin_required
def policy_list() -> BaseResponse:
    user = signed_in()
    after_id = parameter("after", MAX_ID)
    after_name = parameter("after_name", MAX_NAME)
    after = (after_name or "", after_id) if after_id is not None else None
    store = storage()
    now = runtime().clock.now()
    # One more than shown: whether there is a next page.
    found = store.resource_sets_of(user.sub, now, after, PAGE_SIZE + 1)
    shown = found[:PAGE_SIZE]
    following = None
    if len(found) > PAGE_SIZE:
        last = shown[-1]
        following = {"after": last.id, "after_name": last.name}
    return render(
        "pages/policy_list.html",
        user=user,
        sets=shown,
        total=store.count_resource_sets_of(user.sub),
        following=following,
        paged=after is not None,
    )


# -- one set -----------------------------------------------------------------------------------


@bp.get("/policy/resource_set/<rs_id>")
@sessions.signin_required
def policy_set(rs_id: str) -> BaseResponse:
    user = signed_in()
    return render_set(user, owned_set(user, rs_id))


@bp.post("/policy/resource_set/<rs_id>/rules")
@sessions.signin_required
def add_rule(rs_id: str) -> BaseResponse:
    csrf.require()
    check_editing()
    user = signed_in()
    resource_set = owned_set(user, rs_id)
    fields = rule_fields()
    if ADD_ROW in request.form:
        return render_set(user, resource_set, rule_form=RuleForm(fields, extra_rows=1))
    limits = rule_limits.from_config(runtime().config.limits)
    try:
        rule = owner_rule_form.rule_from_form(user.username, resource_set.id, fields, limits=limits)
        # services.owner_rules logs the change (one line).
        owner_rules.add_owner_rule(
            storage(), user.username, rule, runtime().clock.now(), limits=limits
        )
    except owner_rule_form.RuleFormError as refused:
        return render_set(
            user, resource_set, status=400, rule_form=RuleForm(fields, refused.errors)
        )
    except rule_limits.RuleTooLarge as refused:
        errors = owner_rule_form.limit_errors(refused.excesses)
        return render_set(user, resource_set, status=400, rule_form=RuleForm(fields, errors))
    return redirect(set_page(rs_id) + "#own-rules", 303)


def _own_rule(user: User, rule_id: str) -> owner_rules.OwnerRule:
    for found in owner_rules.owner_rules(storage(), user.username):
        if found.rule.id == rule_id:
            return found
    abort(404)


def _not_a_share(user: User, rule_id: str) -> None:
    """A share's rule is ended by Stop sharing, never edited (the services refuse it too)."""
    if storage().get_share(user.sub, rule_id) is not None:
        abort(400, description=str(owner_rules.ShareRule()))


def _render_edit(
    user: User, resource_set: ResourceSet, rule_id: str, form: RuleForm, status: int = 200
) -> BaseResponse:
    return render(
        "pages/policy_rule.html",
        status,
        rs=resource_set,
        name=resource_set.label,
        scopes=[str(scope) for scope in resource_set.description.get("scopes", [])],
        rule_id=rule_id,
        rule_title=_own_rule(user, rule_id).name or form.value("description") or None,
        rule_form=form,
        apps=app_choices(),
        action=f"/policy/resource_set/{resource_set.id}/rules/{rule_id}",
    )


@bp.get("/policy/resource_set/<rs_id>/rules/<rule_id>")
@sessions.signin_required
def edit_rule_page(rs_id: str, rule_id: str) -> BaseResponse:
    check_editing()
    user = signed_in()
    resource_set = owned_set(user, rs_id)
    rule = _own_rule(user, rule_id).rule
    _not_a_share(user, rule_id)
    fields = owner_rule_form.form_from_rule(rule, resource_set.id)
    return _render_edit(user, resource_set, rule_id, RuleForm(fields, extra_rows=1))


@bp.post("/policy/resource_set/<rs_id>/rules/<rule_id>")
@sessions.signin_required
def edit_rule(rs_id: str, rule_id: str) -> BaseResponse:
    csrf.require()
    check_editing()
    user = signed_in()
    resource_set = owned_set(user, rs_id)
    existing = _own_rule(user, rule_id)
    _not_a_share(user, rule_id)
    fields = rule_fields()
    if ADD_ROW in request.form:
        return _render_edit(user, resource_set, rule_id, RuleForm(fields, extra_rows=1))
    limits = rule_limits.from_config(runtime().config.limits)
    try:
        rule = owner_rule_form.rule_from_form(
            user.username, resource_set.id, fields, rule_id, limits
        )
    except owner_rule_form.RuleFormError as refused:
        return _render_edit(user, resource_set, rule_id, RuleForm(fields, refused.errors), 400)
    # A rule made through Keycloak's policy API keeps its name.
    now = runtime().clock.now()
    try:
        if not owner_rules.replace_owner_rule(
            storage(), user.username, rule, now, name=existing.name, limits=limits
        ):
            abort(404)
    except owner_rules.ShareRule as share:
        abort(400, description=str(share))
    except rule_limits.RuleTooLarge as refused:  # its name, from Keycloak's policy API
        errors = owner_rule_form.limit_errors(refused.excesses)
        return _render_edit(user, resource_set, rule_id, RuleForm(fields, errors), 400)
    return redirect(set_page(rs_id) + "#own-rules", 303)


@bp.post("/policy/resource_set/<rs_id>/rules/<rule_id>/delete")
@sessions.signin_required
def delete_rule(rs_id: str, rule_id: str) -> BaseResponse:
    csrf.require()
    check_editing()
    user = signed_in()
    owned_set(user, rs_id)
    try:
        if not owner_rules.delete_owner_rule(
            storage(), user.username, rule_id, runtime().clock.now()
        ):
            abort(404)
    except owner_rules.ShareRule as share:
        abort(400, description=str(share))
    return redirect(set_page(rs_id) + "#own-rules", 303)


# -- shares ------------------------------------------------------------------------------------


@bp.post("/policy/resource_set/<rs_id>/shares")
@sessions.signin_required
def share(rs_id: str) -> BaseResponse:
    csrf.require()
    user = signed_in()
    resource_set = owned_set(user, rs_id)
    to = one_field("to", 4 * shares.TO_LENGTH)
    until_text = one_field("until", 64)
    scopes = request.form.getlist("scopes")
    if len(scopes) > len(resource_set.scopes) + 1 or any(len(s) > MAX_NAME for s in scopes):
        abort(400, description=INCOMPLETE)
    form = ShareForm(to, tuple(scopes), until_text)
    now = runtime().clock.now()
    errors: dict[str | None, str] = {}
    until = None
    invited = None
    try:
        until = shares.end_of_day(until_text, now)
    except shares.ShareRefused as refused:
        errors[refused.field] = refused.message
    if not errors:
        config = runtime().config
        try:
            # By an address no local account has: with an invitation, its link shown once.
            _, invited = invitations.share(
                storage(),
                user.username,
                resource_set,
                to,
                scopes,
                until,
                now,
                limit=config.limits.shares_per_owner,
                lifetime=config.sharing.invitation_lifetime,
                issuer=config.issuer,
                outbox=notices.Outbox.of(config),
            )
        except shares.ShareRefused as refused:
            errors[refused.field] = refused.message
    if errors:
        return render_set(user, resource_set, status=400, share_form=replace(form, errors=errors))
    if invited is not None:
        invitation_pages.remember_link(invited, rs_id)
        return redirect(set_page(rs_id) + "#new-link", 303)
    return redirect(set_page(rs_id) + "#shares", 303)


@bp.post("/policy/resource_set/<rs_id>/shares/<rule_id>/stop")
@sessions.signin_required
def stop_sharing(rs_id: str, rule_id: str) -> BaseResponse:
    csrf.require()
    user = signed_in()
    owned_set(user, rs_id)
    # Stopped already: the page shows it is gone either way.
    shares.stop_sharing(storage(), user.sub, rule_id, runtime().clock.now())
    return redirect(set_page(rs_id) + "#shares", 303)


@bp.post("/policy/resource_set/<rs_id>/permissions/revoke")
@sessions.signin_required
def revoke_permission(rs_id: str) -> BaseResponse:
    csrf.require()
    user = signed_in()
    owned_set(user, rs_id)
    sent = request.form.getlist("permission")
    if len(sent) != 1 or not sent[0] or len(sent[0]) > 128:
        abort(400, description=INCOMPLETE)
    # Revoked already (or never granted): the page shows it is gone either way.
    if owner_permissions.revoke(storage(), rs_id, sent[0], reference_keys(), runtime().clock.now()):
        log.info("permission revoked owner=%r resource_set=%r", user.username, rs_id)
    return redirect(set_page(rs_id) + "#permissions", 303)


@bp.post("/policy/resource_set/<rs_id>/explain")
@sessions.signin_required
def explain_decision(rs_id: str) -> BaseResponse:
    csrf.require()
    user = signed_in()
    resource_set = owned_set(user, rs_id)
    client = request.form.get("client", "").strip()
    party_name = request.form.get("as", "").strip()
    scopes = tuple(scope for scope in request.form.getlist("scopes") if scope)
    claims_text = request.form.get("claims", "").strip() or "[]"
    one = {name: request.form.get(name, "").strip() for name in ONE_CLAIM}
    errors: dict[str, str] = {}
    if one["claim_name"] and not one["claim_type"]:
        errors["claim_type"] = "Write the type of the claim, as its claim object gives it."
    if any(len(value) > MAX_CLAIMS_TEXT for value in one.values()):
        errors["claim_type"] = f"Keep each field under {MAX_CLAIMS_TEXT:,} characters."
    if len(client) > MAX_ID or (client and storage().get_client(client) is None):
        errors["client"] = "Choose an app from the list."
    party = None
    if len(party_name) > MAX_NAME:
        errors["as"] = "There is no one here with a name that long."
    elif party_name:
        party = storage().get_user_by_username(party_name)
        if party is None:
            errors["as"] = "There is no one with this username here: check the spelling."
    if not scopes:
        errors["scopes"] = "Choose at least one scope."
    if len(claims_text) > MAX_CLAIMS_TEXT:
        errors["claims"] = f"Keep the claims under {MAX_CLAIMS_TEXT:,} characters."
    explained = None
    if not errors:
        try:
            explained = explain.explain_access(
                storage(),
                runtime().config,
                runtime().verifiers,
                runtime().rules_for(storage(), user.username),
                owner=user.username,
                resource_set=resource_set,
                scopes=scopes,
                objects=[*explain.claim_objects(claims_text), *one_claim(one)],
                client_id=client or None,
                party=party,
                now=runtime().clock.now(),
            )
        except explain.ExplainRefused as refused:
            errors[refused.field] = explain_sentence(refused)
    if explained is not None:
        titles = rule_titles(user, resource_set)
        explained["summary"] = said(explained["summary"], titles)
        for verdict in explained["explanation"]:
            verdict["reasons"] = [said(reason, titles) for reason in verdict["reasons"]]
    status = 400 if errors else 200
    form = ExplainForm(
        client=client,
        party=party_name,
        scopes=scopes,
        claims=claims_text,
        errors=errors,
        **one,
    )
    return render_set(user, resource_set, status=status, explain_form=form, explained=explained)

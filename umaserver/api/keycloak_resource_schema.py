"""Keycloak's resource representation (its `ResourceRepresentation` as the protection API takes
it): `name` (required), `displayName`, `type`, `uris` (or the older single `uri`), scopes as
`resource_scopes` or `scopes` (strings or `{"name": ...}` objects; both given must name the same
scopes), `icon_uri`, `ownerManagedAccess`, `attributes` (an object of string lists) and `owner` (a
username, or `{"name": ...}` or `{"id": ...}`). Other members are kept as registered, as the
standard face keeps extensions.

Loaded, it is the description the store keeps (its scopes as names under `scopes`, which both
faces read) and, apart, the owner it names.
"""

from __future__ import annotations

from typing import Any

from marshmallow import (
    INCLUDE,
    Schema,
    ValidationError,
    fields,
    post_load,
    pre_load,
    validate,
    validates_schema,
)

from ..storage.records import ResourceSet
from .schemas import MAX_SCOPES, MAX_STRING, load

_text = validate.Length(max=MAX_STRING)
_non_empty = validate.Length(min=1, max=MAX_STRING)


def _not_blank(value: str) -> None:
    if not value.strip():
        raise ValidationError("Must not be blank.")


class _Scope(fields.Field[str]):
    """A scope as Keycloak takes one: its name, or an object with its name (and perhaps its `id`,
    `iconUri` or `displayName`, which a set's scope does not keep)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        name = value.get("name") if isinstance(value, dict) else value
        if not isinstance(name, str):
            raise ValidationError('Must be a scope name or an object with a "name".')
        if not name.strip() or len(name) > MAX_STRING:
            raise ValidationError("Must be a name of 1 to 2048 characters, not blank.")
        return name


class _Owner(fields.Field[str]):
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, dict):
            value = value.get("name", value.get("id"))
        if not isinstance(value, str) or not value or len(value) > MAX_STRING:
            raise ValidationError('Must be a username, or an object with its "name".')
        return value


_scopes = validate.Length(max=MAX_SCOPES)


class KeycloakResource(Schema):
    class Meta:
        unknown = INCLUDE
        ordered = True

    name = fields.String(required=True, validate=[_non_empty, _not_blank])
    displayName = fields.String(validate=_text)
    type = fields.String(validate=_text)
    uris = fields.List(fields.String(validate=_non_empty), validate=_scopes)
    uri = fields.String(validate=_non_empty)
    scopes = fields.List(_Scope(), validate=_scopes)
    resource_scopes = fields.List(_Scope(), validate=_scopes)
    icon_uri = fields.String(validate=_non_empty)
    ownerManagedAccess = fields.Boolean()
    attributes = fields.Dict(
        keys=fields.String(validate=_non_empty),
        values=fields.List(fields.String(validate=_text)),
    )
    owner = _Owner()

    @pre_load
    def _drop_server_properties(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        # The server assigns these; a client's copy of them means nothing.
        return {k: v for k, v in data.items() if k not in ("_id", "id", "user_access_policy_uri")}

    @validates_schema(skip_on_field_errors=True)
    def _scopes_once(self, data: dict[str, Any], **_: Any) -> None:
        scopes, resource_scopes = data.get("scopes"), data.get("resource_scopes")
        if scopes is not None and resource_scopes is not None and scopes != resource_scopes:
            raise ValidationError(
                "scopes and resource_scopes differ: give one of them, or the same scopes in both."
            )

    @post_load
    def _as_stored(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        resource_scopes = data.pop("resource_scopes", None)
        names = resource_scopes if resource_scopes is not None else data.get("scopes", [])
        data["scopes"] = list(dict.fromkeys(names))  # a set of scopes, as Keycloak keeps them
        uri = data.pop("uri", None)
        if uri is not None and "uris" not in data:
            data["uris"] = [uri]
        return data


_schema = KeycloakResource()


def load_resource(body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The description to store, and the owner the body names (None: the PAT's); raises
    InvalidRequest."""
    description = load(_schema, body)
    return description, description.pop("owner", None)


def representation(resource_set: ResourceSet, owner_id: str, owner_name: str) -> dict[str, Any]:
    """A set as Keycloak's protection API shows one: whichever face registered it, its scopes as
    `{"name": ...}` objects (under both names), its owner as `{"id", "name"}`."""
    description = resource_set.description
    body: dict[str, Any] = {"_id": resource_set.id}
    for member in ("name", "displayName", "type", "icon_uri"):
        if isinstance(description.get(member), str):
            body[member] = description[member]
    body["owner"] = {"id": owner_id, "name": owner_name}
    body["ownerManagedAccess"] = description.get("ownerManagedAccess") is True
    uris = description.get("uris", description.get("uri"))  # or the standard face's one uri
    if isinstance(uris, str):
        uris = [uris]
    body["uris"] = [uri for uri in uris if isinstance(uri, str)] if isinstance(uris, list) else []
    scopes = [{"name": scope} for scope in resource_set.scopes]
    body["resource_scopes"] = scopes
    body["scopes"] = scopes
    attributes = description.get("attributes")
    body["attributes"] = attributes if isinstance(attributes, dict) else {}
    return body

"""One marshmallow schema per wire shape; their messages become one `invalid_request` description."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

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

from ..errors import InvalidRequest

MAX_STRING = 2048
MAX_SCOPES = 256

_non_empty = validate.Length(min=1, max=MAX_STRING)


def _absolute_http_uri(value: str) -> None:
    try:
        parts = urlsplit(value)
    except ValueError:  # "http://[x": an IPv6 host left open
        raise ValidationError("Must be an absolute http or https URI.") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationError("Must be an absolute http or https URI.")


def _not_blank(value: str) -> None:
    if not value.strip():
        raise ValidationError("Must not be blank.")


class ResourceSetDescription(Schema):
    """A resource set description, 1.0 or 2.0: scopes as `scopes` (1.0, with `name` required as in
    V1.0.1) or `resource_scopes` (2.0, Federated Authorization 3.1, where `name` is optional), as
    strings; both given must be the same list. `description` (2.0) is text. Extension properties
    are kept as registered. Loaded, the scopes are under `scopes` alone: a read answers both."""

    class Meta:
        unknown = INCLUDE
        ordered = True

    name = fields.String(validate=[_non_empty, _not_blank])
    scopes = fields.List(
        fields.String(validate=[_non_empty, _not_blank]),
        validate=validate.Length(min=1, max=MAX_SCOPES),
    )
    resource_scopes = fields.List(
        fields.String(validate=[_non_empty, _not_blank]),
        validate=validate.Length(min=1, max=MAX_SCOPES),
    )
    description = fields.String(validate=validate.Length(max=MAX_STRING))
    icon_uri = fields.String(validate=[_non_empty, _absolute_http_uri])
    uri = fields.String(validate=[_non_empty, _absolute_http_uri])
    type = fields.String(validate=[_non_empty, _not_blank])

    @pre_load
    def _drop_server_properties(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        # The server assigns these; a client's copy of them means nothing.
        return {k: v for k, v in data.items() if k not in ("_id", "user_access_policy_uri")}

    @validates_schema(skip_on_field_errors=True)
    def _scopes_once(self, data: dict[str, Any], **_: Any) -> None:
        scopes, resource_scopes = data.get("scopes"), data.get("resource_scopes")
        if resource_scopes is None:
            if "name" not in data:
                raise ValidationError(_MISSING, "name")
            if scopes is None:
                raise ValidationError(_MISSING, "scopes")
        elif scopes is not None and scopes != resource_scopes:
            raise ValidationError(
                "scopes and resource_scopes differ: give one of them, or the same list in both."
            )

    @post_load
    def _scopes_under_one_name(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        resource_scopes = data.pop("resource_scopes", None)
        if resource_scopes is not None:
            data["scopes"] = resource_scopes
        return data


_MISSING = "Missing data for required field."


def _first_message(errors: Any, path: str = "") -> str:
    """The first field error as 'field: message' ('scopes[1]: Not a valid string.')."""
    if isinstance(errors, dict):
        key = next(iter(errors))
        if key == "_schema":  # marshmallow's name for the whole value: the path says it already
            where = path
        elif isinstance(key, int):
            where = f"{path}[{key}]"
        else:
            where = f"{path}.{key}".lstrip(".")
        return _first_message(errors[key], where)
    if isinstance(errors, list) and errors:
        first = errors[0]
        if isinstance(first, str):
            return f"{path}: {first}" if path else first
        return _first_message(first, path)
    return f"{path}: invalid" if path else "invalid"


def load(schema: Schema, data: dict[str, Any]) -> dict[str, Any]:
    try:
        result: dict[str, Any] = schema.load(data)
    except ValidationError as error:
        raise InvalidRequest(_first_message(error.messages)) from None
    return result


class PermissionRequest(Schema):
    """`POST /permission` of UMA 1.0: `{resource_set_id, scopes}`, scopes non-empty."""

    class Meta:
        unknown = INCLUDE

    resource_set_id = fields.String(required=True, validate=_non_empty)
    scopes = fields.List(
        fields.String(validate=_non_empty),
        required=True,
        validate=validate.Length(min=1, max=MAX_SCOPES),
    )


class RequestedPermission(Schema):
    """One requested permission of UMA 2.0 (Federated Authorization 4.1): `{resource_id,
    resource_scopes}`, resource_scopes non-empty."""

    class Meta:
        unknown = INCLUDE

    resource_id = fields.String(required=True, validate=_non_empty)
    resource_scopes = fields.List(
        fields.String(validate=_non_empty),
        required=True,
        validate=validate.Length(min=1, max=MAX_SCOPES),
    )


# At most this many requested permissions in one 2.0 permission request.
MAX_REQUESTED_PERMISSIONS = 50


class ClaimObject(Schema):
    """A claim object: `type` MUST be a string; `value` MUST be a JSON object."""

    class Meta:
        unknown = INCLUDE

    error_messages = {"type": "must be an object with 'type' and 'value'."}

    type = fields.String(required=True, validate=_non_empty)
    value = fields.Dict(required=True)


class JsonBoolean(fields.Boolean):
    """true or false as JSON has them: not 1, "true" nor null."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class AuthorizationRequest(Schema):
    """`POST /rpt_authorization`: `rpt` and `ticket` required, `claims` an array of claim objects."""

    class Meta:
        unknown = INCLUDE

    rpt = fields.String(required=True, validate=_non_empty)
    ticket = fields.String(required=True, validate=_non_empty)
    # How many: `[limits] claim_objects_per_request`, checked with the other claim bounds.
    claims = fields.List(fields.Nested(ClaimObject))
    # Ask the owner when the rules refuse (issue 25): a JSON boolean, nothing else.
    submit_request = JsonBoolean()

"""Reading the pages' own forms: each field at most once and bounded. A form that is not the one
the page sent (a field repeated, missing or too long) is a 400 page saying so, never a 500."""

from __future__ import annotations

from flask import abort, request

INCOMPLETE = "This form is incomplete. Go back, reload the page and try again."


def one_field(name: str, limit: int, *, required: bool = False) -> str:
    """The form field `name` given at most once and at most `limit` characters ("" when absent,
    unless `required`)."""
    values = request.form.getlist(name)
    if len(values) > 1 or (required and not values) or (values and len(values[0]) > limit):
        abort(400, description=INCOMPLETE)
    return values[0] if values else ""

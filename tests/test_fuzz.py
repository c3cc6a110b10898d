"""Property-based fuzz of the JSON API from its own OpenAPI document (Schemathesis over WSGI).

Every operation of /openapi.json gets generated requests, valid and invalid, sent with working
credentials (a PAT, an AAT, a client's secret), and every answer must hold:

- no 5xx, except 503 with `Retry-After`;
- every error body in the one shape, `{"error": string, "error_description": string}`, except the
  authorization request's `need_claims` answer;
- the status code and the body are among those the document gives for the operation.

`make test` runs FUZZ_EXAMPLES (default 50) examples per operation, derandomized (the same inputs
on every run, so CI is repeatable); `make fuzz` runs 1,000 with a fresh seed (FUZZ_SEED=<n> repeats one).
"""

from __future__ import annotations

import base64
import json
import os
import random
from importlib.resources import files
from typing import Any

import pytest
import schemathesis
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import Case, CheckContext, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import Store, make_client, make_initial_access_token, make_party

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))
# Unset or empty: derandomized (the same inputs every run). "random": a fresh seed, printed (shown
# on a failure). A number: that seed, to repeat a run.
SEED = os.environ.get("FUZZ_SEED", "")


# No lone UTF-16 surrogate ("\ud800") is ever sent: Schemathesis generates UTF-8 strings, and
# Hypothesis leaves surrogates out. They are refused by strict_json, whose own tables (and those of
# test_resource_sets.py and test_authorization.py) cover every field.


class ErrorShape(Failure):
    def __init__(self, operation: str, message: str) -> None:
        super().__init__(
            operation=operation, title="Error body not in the one shape", message=message
        )


def error_shape(ctx: CheckContext, response: Any, case: Case) -> bool | None:
    """Every 4xx and 5xx body is `{"error": str, "error_description": str}` (with no other text),
    except the `need_claims` answer."""
    if response.status_code < 400:
        return None
    label = case.operation.label
    try:
        body = response.json()
    except ValueError:
        raise ErrorShape(label, f"{response.status_code} with a body that is not JSON") from None
    if isinstance(body, dict) and "need_claims" in body and response.status_code == 403:
        return True
    if not (
        isinstance(body, dict)
        and isinstance(body.get("error"), str)
        and isinstance(body.get("error_description"), str)
    ):
        raise ErrorShape(label, f"{response.status_code} {body!r}")
    return True


def no_server_error(ctx: CheckContext, response: Any, case: Case) -> bool | None:
    """No 5xx, except 503 with `Retry-After`."""
    if response.status_code == 503 and "Retry-After" in response.headers:
        return True
    return not_a_server_error(ctx, response, case)


CHECKS = [
    no_server_error,
    error_shape,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def registered(http: FlaskClient, credentials: dict[str, dict[str, str]]) -> list[str]:
    """`_id`s of resource sets of the PAT's owner, so that reads, updates and deletes reach past
    the 404 (a generated `_id` is never one of them)."""
    ids = []
    for number in range(5):
        reply = http.post(
            "/rs/resource_set",
            json={"name": f"set {number}", "scopes": ["view", "print"]},
            headers=credentials["pat"],
        )
        assert reply.status_code == 201, reply.get_data(as_text=True)
        ids.append(reply.get_json()["_id"])
    return ids


@pytest.fixture
def credentials(app: Flask, store: Store) -> dict[str, dict[str, str]]:
    """The Authorization header each security scheme of the document gets."""
    pat = make_party(store, "alice", "uma_protection")
    aat = make_party(store, "bob", "uma_authorization")
    client_id, secret = make_client(store, "fuzzing client")
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    initial = make_initial_access_token(store, ("custom",))
    return {
        "pat": pat.auth,
        "aat": aat.auth,
        "client_secret_basic": {"Authorization": f"Basic {basic}"},
        "initial_access_token": {"Authorization": f"Bearer {initial}"},
    }


@pytest.fixture
def dynamic_client(http: FlaskClient, credentials: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A client registered at /register, so that its configuration endpoint's operations reach
    past the 401 (with its registration access token as `registration_access_token`)."""
    reply = http.post(
        "/register",
        json={"client_name": "fuzzed", "redirect_uris": ["https://fuzz.test/cb"]},
        headers=credentials["initial_access_token"],
    )
    assert reply.status_code == 201, reply.get_data(as_text=True)
    registered: dict[str, Any] = reply.get_json()
    credentials["registration_access_token"] = {
        "Authorization": f"Bearer {registered['registration_access_token']}"
    }
    return registered


def _follow_a_renewed_registration_token(
    status: int, content: bytes, headers: dict[str, str]
) -> None:
    """A read or update of the registration answers a new registration access token and ends the
    one used: the next cases send the new one, so that they still reach past the 401."""
    if status != 200 or b"registration_access_token" not in content:
        return
    renewed = json.loads(content).get("registration_access_token")
    if isinstance(renewed, str) and headers.get("Authorization", "").startswith("Bearer uma_rat_"):
        headers["Authorization"] = f"Bearer {renewed}"


def _operations() -> list[str]:
    """`METHOD /path` of every operation in the shipped document, read at collection time."""
    document = json.loads(files("umaserver.api").joinpath("openapi.json").read_text("utf-8"))
    return [
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method in item
        if method in ("get", "put", "post", "delete")
    ]


@pytest.mark.parametrize("label", _operations())
def test_operation(
    app: Flask,
    credentials: dict[str, dict[str, str]],
    registered: list[str],
    dynamic_client: dict[str, Any],
    label: str,
) -> None:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    schema.config.generation.update(with_security_parameters=False)
    operation = schema.find_operation_by_label(label)
    assert operation is not None
    security = operation.definition.raw.get("security") or [{}]
    headers = credentials.get(next(iter(security[0]), ""), {})
    strategies = [operation.as_strategy(GenerationMode.POSITIVE)]
    if operation.body or list(operation.iter_parameters()):
        strategies.append(operation.as_strategy(GenerationMode.NEGATIVE))
    if "{_id}" in operation.path:
        strategies += [
            operation.as_strategy(mode, path_parameters={"_id": rs_id})
            for rs_id in registered
            for mode in GenerationMode
        ]
    if "{client_id}" in operation.path:
        strategies += [
            operation.as_strategy(mode, path_parameters={"client_id": dynamic_client["client_id"]})
            for mode in GenerationMode
        ]

    @given(case=st.one_of(strategies))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not SEED,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink],
    )
    def fuzz(case: Case) -> None:
        response = case.call_and_validate(headers=headers, checks=CHECKS)
        _follow_a_renewed_registration_token(response.status_code, response.content, headers)

    if SEED:
        number = random.randrange(2**32) if SEED == "random" else int(SEED)
        print(f"FUZZ_SEED={number}")
        fuzz = seed(number)(fuzz)
    fuzz()

"""The OpenAPI document at /openapi.json: valid OpenAPI 3.1, and the same set of operations as the
app serves (every route in it, every path of it served). What the server answers is checked
against it by tests/test_fuzz.py."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import jsonschema_rs
import pytest
from flask import Flask
from flask.testing import FlaskClient
from schemathesis.specs.openapi.definitions import OPENAPI_31

from umaserver.pages.rendering import PAGE_BLUEPRINTS

from .conftest import ROOT, Party

# Routes that are not part of the JSON API the document describes.
# /images/...: checked icons and logos, for the pages' <img> elements, not the JSON API.
UNDOCUMENTED = {"/static/<path:filename>", "/openapi.json", "/images/<image_id>"}
# Flask answers these on every route by itself.
AUTOMATIC = {"HEAD", "OPTIONS"}
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def _template(path: str) -> str:
    """`/rs/resource_set/<rs_id>` and `/rs/resource_set/{_id}` alike as `/rs/resource_set/{}`."""
    return re.sub(r"<[^>]*>|\{[^}]*\}", "{}", path)


@pytest.fixture
def document(http: FlaskClient) -> Any:
    response = http.get("/openapi.json")
    assert response.status_code == 200
    return response.get_json()


def test_served_with_public_caching_and_the_issuer_as_server(http: FlaskClient) -> None:
    response = http.get("/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "public, max-age=3600"
    assert response.get_json()["servers"] == [{"url": "http://uma.test"}]


def test_is_valid_openapi_3_1(document: Any) -> None:
    assert document["openapi"].startswith("3.1.")
    jsonschema_rs.validator_for(OPENAPI_31).validate(document)
    # Every schema in it is a valid JSON Schema (2020-12, the dialect of OpenAPI 3.1).
    for name, schema in document["components"]["schemas"].items():
        assert jsonschema_rs.meta.is_valid(schema), name


def test_every_reference_resolves(document: Any) -> None:
    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return found + [ref for value in node.values() for ref in refs(value)]
        if isinstance(node, list):
            return [ref for value in node for ref in refs(value)]
        return []

    for ref in refs(document):
        assert ref.startswith("#/"), ref
        node = document
        for part in ref[2:].split("/"):
            node = node[part]


def test_version_is_the_package_version(document: Any) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert document["info"]["version"] == project["version"]


def _served(app: Flask) -> set[tuple[str, str]]:
    """The JSON API's routes (pages for people are HTML, not in the document)."""
    pages = app.extensions.get(PAGE_BLUEPRINTS, set())
    return {
        (_template(rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if rule.rule not in UNDOCUMENTED and rule.endpoint.rpartition(".")[0] not in pages
        for method in (rule.methods or set()) - AUTOMATIC
    }


def _documented(document: Any) -> set[tuple[str, str]]:
    return {
        (_template(path), method)
        for path, item in document["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def test_every_route_is_documented_and_every_path_served(app: Flask, document: Any) -> None:
    served, documented = _served(app), _documented(document)
    assert {path for path, _ in served} == {path for path, _ in documented}
    assert documented - served == set(), "in /openapi.json but not served"


def test_methods_routed_but_not_documented_are_refused(
    app: Flask, http: FlaskClient, document: Any, rs: Party
) -> None:
    """Registration routes every method so as to authenticate before it refuses: those left out
    of the document answer 405 with `Allow` naming exactly the documented ones."""
    undocumented = _served(app) - _documented(document)
    assert undocumented, "nothing to check"
    for path, method in sorted(undocumented):
        allowed = {
            m.upper() for m in document["paths"][_path_of(document, path)] if m in HTTP_METHODS
        }
        response = http.open(path.replace("{}", "some-id"), method=method.upper(), headers=rs.auth)
        assert response.status_code == 405, (path, method)
        assert set(response.headers["Allow"].split(", ")) == allowed, (path, method)
        assert response.get_json()["error"] == "unsupported_method_type"


def _path_of(document: Any, template: str) -> str:
    return next(path for path in document["paths"] if _template(path) == template)


def test_not_advertised_in_the_configuration_document(http: FlaskClient) -> None:
    assert "openapi" not in http.get("/.well-known/uma-configuration").get_data(as_text=True)


def test_every_error_answer_uses_the_shared_error_shape(document: Any) -> None:
    """Every 4xx and 5xx answer documented is `Error`, except the `need_claims` 403 and the
    uma-ticket grant's 403 (`request_denied` is an `Error`; `need_info` has members beyond it);
    `/readyz`'s 503 is an `Error` with its reasons beside it."""
    error = {"$ref": "#/components/schemas/Error"}
    responses = document["components"]["responses"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            for status, answer in operation["responses"].items():
                if not status.startswith(("4", "5")):
                    continue
                if "$ref" in answer:
                    answer = responses[answer["$ref"].rsplit("/", 1)[1]]
                schema = answer["content"]["application/json"]["schema"]
                if path == "/rpt_authorization" and status == "403":
                    assert error in schema["anyOf"]
                    assert {"$ref": "#/components/schemas/NeedClaims"} in schema["anyOf"]
                elif path == "/token" and status == "403":
                    assert error in schema["anyOf"]
                    assert {"$ref": "#/components/schemas/NeedInfo"} in schema["anyOf"]
                elif path == "/readyz" and status == "503":  # the reasons beside the error
                    assert schema["allOf"][0] == error
                else:
                    assert schema == error, (path, method, status)
            if "requestBody" in operation or path.startswith("/rs/"):
                assert "400" in operation["responses"], (path, method)

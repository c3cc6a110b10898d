"""The README's first walk works as written: its shell blocks, run in order by bash against a real
server that uses policies.example.toml, as `make run` does (the walk applies the seed itself)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from .conftest import ROOT, LiveServer

pytestmark = pytest.mark.live


@pytest.fixture
def rules_text() -> str:
    return (ROOT / "policies.example.toml").read_text(encoding="utf-8")


def walk_script(server: LiveServer) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    walk = text.split("\n## A first walk", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", walk, re.DOTALL)
    assert len(blocks) >= 10, "the walk's shell blocks were not found"
    script = "\n".join(blocks)
    # Only what differs between `make run` and this test: the address, the config, the Python.
    script = script.replace("http://127.0.0.1:8080", server.url)
    script = script.replace(
        "--config local.toml", f"--config {shlex.quote(str(server.config_path))}"
    )
    script = script.replace(".venv/bin/python", shlex.quote(sys.executable))
    return "set -euo pipefail\n" + script


def test_the_readme_walk_works_as_written(live_server: LiveServer) -> None:
    done = subprocess.run(
        ["bash", "-c", walk_script(live_server)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    expected = [
        '"version":"1.0"',  # the configuration document
        '"user:alice"',  # the seed, applied
        "HTTP/1.1 201 CREATED",  # the resource set
        '{"need_claims":[',  # asking without claims ...
        '{"type":"https://example.com/claims/employee","name":"role","value":"Your role at'
        ' the hospital"}',
        '{"rpt":"uma_rpt_',  # ... and with them
        '"scopes":["view"]',  # the RS sees the permission
        '"decision": "need_claims"',  # a nurse's claims, explained: not a doctor ...
        "condition 1 on 'role' failed: no accepted claim contains 'doctor'",  # ... an e-mail would do
        '"uma_profiles_supported":[]',  # UMA 2.0: its document ...
        '"error":"need_info"',  # ... what is missing ...
        '"required_claims":[{"name":"role","friendly_name":"Your role at the hospital"',
        '"access_token":"uma_rpt_',  # ... and an RPT
        '"pct":"uma_pct_',
        "303\n",  # alice signs in ...
        "Holiday photos",  # ... and sees her set on her page
        '{"need_claims":[{"type":"redirect_required"',  # the redirect profile: bob signs in ...
        "http://127.0.0.1:9000/callback?access=granted&state=xyz",  # ... and shares
        '{"rpt":"uma_rpt_',  # the same ticket, granted
        "HTTP/1.1 204 NO CONTENT",
        '"error":"not_found"',
        '"error_description":"name: Missing data for required field."',
        '"error":"invalid_token"',
    ]
    position = 0
    for fragment in expected:  # in this order
        found = out.find(fragment, position)
        assert found >= 0, f"{fragment!r} not found after position {position} in:\n{out}"
        position = found + len(fragment)

"""The pytest plugin (`umaserver.testing`), as a user's suite runs it: pytester writes a small
resource-server test suite with a seed, runs it in a pytest process of its own with the plugin,
and the suite talks to a real `umaserver dev` the plugin started."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.live

pytest_plugins = ["pytester"]

SEED = (ROOT / "umaserver" / "examples" / "seed.toml").read_text(encoding="utf-8")

MORE = """
[[users]]
username = "carol"
password = "carol's example password"
"""

# What a resource server's own tests look like: register a set as alice's photo server, have
# bob's viewer ask for it, and check what the resource server sees.
SUITE = """
import pytest


def register(uma_server, uma_client, name):
    pat = uma_server.pat("alice", "photo-server")
    created = uma_client.post(
        "/rs/resource_set", json_body={"name": name, "scopes": ["view"]}, token=pat
    )
    assert created.status == 201, created.text
    return pat, created.json()["_id"]


def test_the_configuration_names_the_server(uma_server):
    assert uma_server.configuration["issuer"] == uma_server.url
    assert uma_server.url.startswith("http://127.0.0.1:")


def test_bob_gets_an_rpt_for_the_public_album(uma_server, uma_client, uma_reset):
    pat, set_id = register(uma_server, uma_client, "Public album")
    ticket = uma_server.ticket(pat, set_id, ["view"])
    aat = uma_server.aat("bob", "viewer")
    rpt = uma_client.post("/rpt", token=aat).json()["rpt"]
    answer = uma_client.post(
        "/rpt_authorization", json_body={"rpt": rpt, "ticket": ticket}, token=aat
    )
    assert answer.status == 201, answer.text
    seen = uma_client.post("/introspect", form={"token": rpt}, token=pat).json()
    assert seen["active"] is True
    assert [p["scopes"] for p in seen["permissions"]] == [["view"]]


def test_a_private_set_needs_claims(uma_server, uma_client, uma_reset):
    pat, set_id = register(uma_server, uma_client, "Diary")
    aat = uma_server.aat("bob", "viewer")
    rpt = uma_client.post("/rpt", token=aat).json()["rpt"]
    answer = uma_client.post(
        "/rpt_authorization",
        json_body={"rpt": rpt, "ticket": uma_server.ticket(pat, set_id, ["view"])},
        token=aat,
    )
    assert answer.status == 403, answer.text


def test_the_reset_forgot_the_sets_of_earlier_tests(uma_server, uma_client, uma_reset):
    pat = uma_server.pat("alice", "photo-server")
    assert uma_client.get("/rs/resource_set", token=pat).json() == []


@pytest.mark.uma_seed("more.toml")
def test_a_marker_applies_one_more_seed(uma_server):
    users = [user["username"] for user in uma_server.cli("user", "list")["users"]]
    assert sorted(users) == ["alice", "bob", "carol"]
"""


def readme_example() -> str:
    """The README's complete test of a resource server, as written there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Testing your resource server", 1)[1].split("\n## ", 1)[0]
    [example] = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    return example


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # The checkout's package, for the plugin and for the server it starts (an installed package
    # needs neither: tests/test_packaging.py runs the same suite on the wheel).
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeini("[pytest]\numa_seed = seed.toml\n")
    pytester.makefile(".toml", seed=SEED, more=MORE)
    pytester.makepyfile(test_photo_server=SUITE, test_readme_example=readme_example())
    return pytester


def test_a_resource_servers_suite_runs_against_a_real_server(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("-p", "umaserver.testing", "-v", timeout=300)
    result.assert_outcomes(passed=6)  # the suite's five and the README's example


def test_a_failing_command_says_what_the_server_said(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_unknown_user="""
        import pytest
        from umaserver.testing import UmaServerError

        def test_an_unknown_user_has_no_token(uma_server):
            with pytest.raises(UmaServerError, match="There is no user 'nobody'"):
                uma_server.pat("nobody", "photo-server")
        """
    )
    result = suite.runpytest_subprocess(
        "-p", "umaserver.testing", "test_unknown_user.py", timeout=300
    )
    result.assert_outcomes(passed=1)


def test_a_seed_the_server_refuses_stops_the_session_saying_why(
    suite: pytest.Pytester,
) -> None:
    suite.makefile(".toml", seed="[[clients]]\nclient_id = 'x'\ncolour = 'red'\n")
    result = suite.runpytest_subprocess(
        "-p", "umaserver.testing", "test_photo_server.py", "-k", "configuration", timeout=300
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*colour*"])


def test_the_plugin_loads_neither_flask_nor_the_app() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, umaserver.testing;"
            " assert not {'flask', 'umaserver.app_factory'} & set(sys.modules), sorted(sys.modules)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr

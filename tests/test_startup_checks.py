"""What stops or warns a server at its start (issue 27, items 10 and 11): a rule file the config
names but that is not there stops `init`, `serve` and building the app (`create_app`, `app.py`),
with a sentence naming it, and no other command; each `[[saml_idps]]` without `recipients` is
warned of once by `init` and by `serve`."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from umaserver import create_app
from umaserver.config import load_config
from umaserver.policy.store import MissingRuleFile

from .conftest import CLI, ON_POSTGRESQL, ROOT, write_config
from .saml_fixtures import make_idp_key


@pytest.fixture
def missing(tmp_path: Path) -> Path:
    """A config naming policies.toml, which is not there."""
    path = write_config(tmp_path)
    (tmp_path / "policies.toml").unlink()
    return path


def said(tmp_path: Path) -> str:
    return (
        f"The rule file {tmp_path / 'policies.toml'} (`policies` in the config) does not exist:"
        " create it (an empty file means no rules from it, only owners' own rules), or name the"
        " right one."
    )


def test_init_and_serve_stop_without_the_rule_file(
    tmp_path: Path, missing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `serve` sets up logging for its process; this one is pytest's, so put it back afterwards.
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    cli = CLI(missing)
    for command in (["init"], ["serve", "--port", "0"]):
        result = cli(*command)
        assert result.exit_code == 1, result.stdout
        assert result.stderr.strip() == said(tmp_path)
        assert result.stdout == ""
    if not ON_POSTGRESQL:
        assert not (tmp_path / "uma.db").exists()  # nothing was prepared
    # Other commands go on: the file's rules are simply none.
    assert cli("client", "create", "--name", "Viewer").exit_code == 0
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")  # an empty file is fine
    assert json.loads(cli("init").stdout)["status"] == "ready"


def test_building_the_app_without_the_rule_file_says_which(
    tmp_path: Path, missing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(MissingRuleFile) as raised:
        create_app(load_config(missing))
    assert str(raised.value) == said(tmp_path)
    # app.py, which gunicorn, waitress-serve and `flask --app app` import.
    shown = subprocess.run(
        [sys.executable, "-c", "import app"],
        cwd=ROOT,
        env={**os.environ, "UMASERVER_CONFIG": str(missing)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode != 0
    assert shown.stderr.strip().splitlines()[-1] == (
        f"umaserver.policy.store.MissingRuleFile: {said(tmp_path)}"
    )


def test_saml_providers_without_recipients_are_warned_of_once_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    pem = json.dumps(make_idp_key().certificate_pem)
    idps = "".join(
        f'[[saml_idps]]\nentity_id = "https://{name}.example"\ncertificates = [{pem}]\n{extra}'
        for name, extra in (
            ("open", ""),
            ("checked", 'recipients = ["https://app.example/acs"]\n'),
            ("also-open", ""),
        )
    )
    cli = CLI(write_config(tmp_path, extra=idps))
    warning = (
        "[[saml_idps]] https://{}.example has no `recipients`: an assertion it made for another"
        " service is accepted here too (the Recipient of its bearer confirmation is not"
        " checked). List the assertion consumer URLs of the clients that push its assertions."
    )
    result = cli("init")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        "Warning: " + warning.format("open"),
        "Warning: " + warning.format("also-open"),
    ]
    with socket.socket() as taken:  # taken: serve stops right after its start
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="umaserver"):
            result = cli("serve", "--host", "127.0.0.1", "--port", str(port))
    assert result.exit_code == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w for w in warnings if "saml_idps" in w] == [
        warning.format("open"),
        warning.format("also-open"),
    ]

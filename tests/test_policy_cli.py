"""`python -m umaserver policy check` and `policy explain`: JSON on stdout, every error named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import CLI

GOOD = """
[[rules]]
id = "doctors"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
contains = "doctor"

[[rules]]
id = "family"
owner = "alice"
scopes = ["view", "print"]
"""

BROKEN = """
[[rules]]
id = "a"
owner = "alice"
scopes = []

[[rules]]
id = "a"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
regex = "(unclosed"
"""


def test_check_a_valid_file_lists_its_rules(cli: CLI, tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(GOOD, encoding="utf-8")
    assert cli.json("policy", "check", str(path)) == {
        "file": str(path),
        "valid": True,
        "rules": ["doctors", "family"],
    }


def test_check_defaults_to_the_configured_file(cli: CLI, config_path: Path) -> None:
    (config_path.parent / "policies.toml").write_text(GOOD, encoding="utf-8")
    assert cli.json("policy", "check")["rules"] == ["doctors", "family"]


def test_check_the_example_file(cli: CLI) -> None:
    example = Path(__file__).resolve().parent.parent / "policies.example.toml"
    assert cli.json("policy", "check", str(example))["valid"] is True


def test_check_names_every_error_at_once(cli: CLI, tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(BROKEN, encoding="utf-8")
    result = cli("policy", "check", str(path))
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0] == f"{path}:"
    assert "rules[0].scopes: must be a non-empty array of non-empty strings" in lines
    assert "rules[1].id: duplicate id 'a'" in lines
    assert any(
        line.startswith("rules[1].conditions[0].regex: invalid RE2 pattern") for line in lines
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "There is no rule file"),
        ("[[rules]\n", "invalid TOML"),
    ],
)
def test_check_refuses_a_missing_or_unreadable_file(
    cli: CLI, tmp_path: Path, text: str | None, message: str
) -> None:
    path = tmp_path / "rules.toml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    result = cli("policy", "check", str(path))
    assert result.exit_code == 1
    assert message in result.stderr
    assert result.stdout == ""


def test_check_does_not_need_a_config_for_an_explicit_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(GOOD, encoding="utf-8")
    result = CLI(tmp_path / "no-such-config.toml")("policy", "check", str(path))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["valid"] is True

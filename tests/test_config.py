"""The TOML settings: typed, validated, every error at once, unknown keys refused, no default secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from umaserver.config import ConfigError, load_config

from .conftest import ROOT, SECRET

GOOD = f'''issuer = "https://uma.example"
database = "data/uma.db"
policies = "rules.toml"
secret_key = "{SECRET}"
'''


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return path


def errors_of(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    prefix = f"{tmp_path / 'c.toml'}: "
    assert all(line.startswith(prefix) for line in caught.value.errors)
    return [line.removeprefix(prefix) for line in caught.value.errors]


def test_defaults_and_relative_paths(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.issuer == "https://uma.example"
    assert config.database == tmp_path / "data" / "uma.db"
    assert config.policies == tmp_path / "rules.toml"
    assert config.limits.max_body_bytes == 1024 * 1024
    assert config.lifetimes.ticket == 300
    assert config.server.port == 8080
    assert config.url("/rs") == "https://uma.example/rs"
    assert SECRET not in repr(config)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD.replace('issuer = "https://uma.example"', 'issuer = "https://uma.example/"'),
            ["issuer: must not end with a slash"],
        ),
        (
            GOOD.replace('"https://uma.example"', '"uma.example"'),
            ["issuer: must be an absolute http(s) URL"],
        ),
        (
            GOOD.replace(f'secret_key = "{SECRET}"', 'secret_key = ""'),
            [
                'secret_key: must be at least 32 characters; make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
            ],
        ),
        (GOOD.replace(f'secret_key = "{SECRET}"\n', ""), ["secret_key: missing"]),
        (GOOD + "colour = 1\n", ["colour: unknown key"]),
        (
            GOOD + "[limits]\nmax_body_bytes = 0\n",
            ["limits.max_body_bytes: must be greater than 0"],
        ),
        (GOOD + "[limits]\nmax_body = 10\n", ["limits.max_body: unknown key"]),
        (GOOD + "[server]\nport = true\n", ["server.port: must be an integer, not a boolean"]),
        (GOOD + "[server]\nport = 70000\n", ["server.port: must be between 1 and 65535"]),
        (
            GOOD + '[lifetimes]\nticket = "5m"\n',
            ["lifetimes.ticket: must be an integer, not a string"],
        ),
        (GOOD + "server = 3\n", ["server: must be a table, not an integer"]),
        (
            "database = 3\n",
            [
                "issuer: missing",
                "database: must be a string, not an integer",
                "policies: missing",
                "secret_key: missing",
            ],
        ),
    ],
)
def test_every_error_is_reported_one_line_per_key(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    assert errors_of(tmp_path, text) == expected


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    (line,) = errors_of(tmp_path, "issuer = ")
    assert line.startswith("not valid TOML")
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml")


def test_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UMASERVER_CONFIG", str(write(tmp_path, GOOD)))
    assert load_config().issuer == "https://uma.example"
    monkeypatch.delenv("UMASERVER_CONFIG")
    with pytest.raises(ConfigError, match="--config FILE or set UMASERVER_CONFIG"):
        load_config()


def test_the_example_is_complete_but_has_no_secret(tmp_path: Path) -> None:
    text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
    assert errors_of(tmp_path, text) == [
        'secret_key: must be at least 32 characters; make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
    ]
    config = load_config(
        write(tmp_path, text.replace('secret_key = ""', f'secret_key = "{SECRET}"'))
    )
    assert config.issuer == "http://127.0.0.1:8080"

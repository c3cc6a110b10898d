"""The package as it ships: a wheel built from this checkout, installed into a new virtualenv, runs
`init` with only what the wheel holds (the schema and the migrations are package data)."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import site
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from umaserver.storage import prepare_database
from umaserver.storage.migrations import current_version, migrations

ROOT = Path(__file__).resolve().parent.parent
SECRET = "a-secret-key-for-the-packaging-test-0123456789"

# What a build must not see or leave behind: the copy it builds from leaves the checkout clean
# (setuptools writes build/ and *.egg-info beside pyproject.toml).
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "*_cache",
    "__pycache__",
    "build",
    "dist",
    "*.egg-info",
    "*.db",
    "*.db-*",
    "local.toml",
    "results",
)


def run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def clean_env() -> dict[str, str]:
    """This environment without anything that would put the checkout or the dev venv in front."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    }
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    return env


@pytest.mark.live
def test_the_wheel_installs_and_initialises_a_database(tmp_path: Path) -> None:
    env = clean_env()
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCE)

    # Built as pip builds it for an install, with the setuptools (and wheel) of this venv.
    built = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(tmp_path / "wheels"),
            str(source),
        ],
        tmp_path,
        env,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "wheels").glob("umaserver-*.whl")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert fnmatch.filter(names, "umaserver/storage/migrations/0001_*.sqlite.sql")
        assert fnmatch.filter(names, "umaserver/storage/migrations/0008_*.postgresql.sql")
        shipped_sql = {
            name: archive.read(name) for name in names if name.endswith(".sql")
        }  # every .sql of the package, as it is in the checkout
    package_sql = {
        path.relative_to(ROOT).as_posix(): path.read_bytes()
        for path in (ROOT / "umaserver").rglob("*.sql")
    }
    assert shipped_sql == package_sql
    steps = [*migrations("sqlite"), *migrations("postgresql")]
    assert len(fnmatch.filter(names, "umaserver/storage/migrations/*.sql")) == len(steps)

    # A new venv without pip; the dev venv's pip installs the wheel into it, offline.
    venv = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed = run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        tmp_path,
        env,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    # The dependencies come from the dev venv (read after the new venv's own site-packages, and
    # the dev venv has no umaserver of its own); umaserver only from the wheel.
    purelib = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        tmp_path,
        env,
    )
    assert purelib.returncode == 0, purelib.stderr
    (Path(purelib.stdout.strip()) / "dev_dependencies.pth").write_text(
        "".join(f"{folder}\n" for folder in site.getsitepackages()), encoding="utf-8"
    )

    work = tmp_path / "elsewhere"  # neither the checkout nor its copy is on sys.path here
    work.mkdir()
    (work / "policies.toml").write_text("", encoding="utf-8")
    (work / "config.toml").write_text(
        'issuer = "http://uma.test"\n'
        'database = "data/uma.db"\n'
        'policies = "policies.toml"\n'
        f'secret_key = "{SECRET}"\n',
        encoding="utf-8",
    )
    (work / "data").mkdir()

    where = run([str(python), "-c", "import umaserver; print(umaserver.__file__)"], work, env)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()), where.stdout

    init = run([str(python), "-m", "umaserver", "--config", "config.toml", "init"], work, env)
    assert init.returncode == 0, init.stdout + init.stderr
    database = work / "data" / "uma.db"
    assert json.loads(init.stdout) == {
        "database": str(database),
        "status": "ready",
        "schema_version_found": 0,
        "schema_version": current_version(),
    }
    assert database.is_file()
    tables, versions = tables_and_versions(database)
    # The same tables as a database prepared from this checkout.
    reference = database.with_name("reference.db")
    prepare_database(reference, 0)
    assert tables == tables_and_versions(reference)[0]
    assert "schema_migrations" in tables and "clients" in tables
    assert sorted(versions) == list(range(1, current_version() + 1))


def tables_and_versions(database: Path) -> tuple[set[str], list[int]]:
    conn = sqlite3.connect(database)
    try:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
    finally:
        conn.close()
    return tables, versions

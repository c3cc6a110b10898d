"""The package as it ships: a wheel built from this checkout, installed into a new virtualenv, runs
`init` with only what the wheel holds (the schema and the migrations are package data), as the
`umaserver` command from a folder that is not the checkout; the example rules are in it, and its
metadata gives the dependencies as ranges and PostgreSQL's driver as the `postgresql` extra."""

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from umaserver.storage import prepare_database
from umaserver.storage.migrations import current_version, migrations

from . import test_testing_plugin as plugin_suite

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


@dataclass
class Installed:
    wheel: Path
    venv: Path
    python: Path
    command: Path  # the console script `umaserver`
    work: Path  # a folder that is neither the checkout nor its copy, with a config
    env: dict[str, str]

    def umaserver(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.command), "--config", "config.toml", *args],
            cwd=self.work,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The wheel, built from a clean copy of the checkout and installed offline into a new
    virtualenv (once for this file's tests)."""
    tmp_path = tmp_path_factory.mktemp("packaging")
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
    assert "umaserver/examples/policies.example.toml" in names

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
    (work / "data").mkdir()
    (work / "policies.toml").write_text("", encoding="utf-8")
    (work / "config.toml").write_text(
        'issuer = "http://uma.test"\n'
        'database = "data/uma.db"\n'
        'policies = "policies.toml"\n'
        f'secret_key = "{SECRET}"\n',
        encoding="utf-8",
    )
    yield Installed(wheel, venv, python, venv / "bin" / "umaserver", work, env)


@pytest.mark.live
def test_the_wheel_installs_and_initialises_a_database(installed: Installed) -> None:
    python, work, env = installed.python, installed.work, installed.env
    where = run([str(python), "-c", "import umaserver; print(umaserver.__file__)"], work, env)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(installed.venv.resolve())

    # The console script, from a folder that is not the checkout.
    init = installed.umaserver("init")
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


@pytest.mark.live
def test_the_command_works_from_any_folder(installed: Installed) -> None:
    assert installed.umaserver("init").returncode == 0
    created = installed.umaserver("client", "create", "--name", "Photo server")
    assert created.returncode == 0, created.stdout + created.stderr
    client_id = json.loads(created.stdout)["client_id"]

    # By name, as a person types it with the venv's bin/ on PATH, from a folder of its own.
    elsewhere = installed.work / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    path = f"{installed.command.parent}{os.pathsep}{installed.env.get('PATH', os.defpath)}"
    listed = run(
        ["umaserver", "--config", str(installed.work / "config.toml"), "client", "list"],
        elsewhere,
        {**installed.env, "PATH": path},
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert client_id in {client["client_id"] for client in json.loads(listed.stdout)}

    usage = installed.umaserver("--help")
    assert usage.returncode == 0, usage.stderr
    assert usage.stdout.startswith("Usage: umaserver [OPTIONS] COMMAND [ARGS]...")

    # `python -m umaserver` still works, the same commands.
    module = run(
        [str(installed.python), "-m", "umaserver", "--config", "config.toml", "client", "list"],
        installed.work,
        installed.env,
    )
    assert module.returncode == 0, module.stderr
    assert json.loads(module.stdout) == json.loads(listed.stdout)


@pytest.mark.live
def test_the_example_rules_are_package_data(installed: Installed) -> None:
    found = run(
        [
            str(installed.python),
            "-c",
            "import importlib.resources as resources\n"
            "rules = resources.files('umaserver.examples') / 'policies.example.toml'\n"
            "print(rules)\n",
        ],
        installed.work,
        installed.env,
    )
    assert found.returncode == 0, found.stderr
    packaged = Path(found.stdout.strip())
    assert packaged.resolve().is_relative_to(installed.venv.resolve())
    # The checkout's top-level file is a link to the package's, and ships as it is.
    assert (ROOT / "policies.example.toml").resolve() == (
        ROOT / "umaserver" / "examples" / "policies.example.toml"
    )
    assert packaged.read_bytes() == (ROOT / "policies.example.toml").read_bytes()

    checked = installed.umaserver("policy", "check", str(packaged))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["valid"] is True
    assert "doctors-view-and-print" in json.loads(checked.stdout)["rules"]


def pinned() -> dict[str, str]:
    """requirements.txt's pins: {line without the version: version}."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name] = version
    return pins


@pytest.mark.live
def test_the_metadata_gives_ranges_and_the_postgresql_extra(installed: Installed) -> None:
    read = run(
        [
            str(installed.python),
            "-c",
            "import json, importlib.metadata as metadata\n"
            "found = metadata.metadata('umaserver')\n"
            "scripts = metadata.entry_points(group='console_scripts', name='umaserver')\n"
            "print(json.dumps({'requires': found.get_all('Requires-Dist'),\n"
            "    'extras': found.get_all('Provides-Extra'),\n"
            "    'scripts': [script.value for script in scripts]}))\n",
        ],
        installed.work,
        installed.env,
    )
    assert read.returncode == 0, read.stderr
    found = json.loads(read.stdout)
    assert found["extras"] == ["postgresql"]
    assert found["scripts"] == ["umaserver.cli:main"]

    requires = [Requirement(text) for text in found["requires"]]
    base = {str(req.name).lower(): req for req in requires if req.marker is None}
    extra = {str(req.name).lower(): req for req in requires if req.marker is not None}
    for req in extra.values():
        assert req.marker is not None and req.marker.evaluate({"extra": "postgresql"})
        assert not req.marker.evaluate({"extra": ""})

    pins = pinned()
    driver = {"psycopg[binary]", "psycopg-pool"}
    assert set(base) == {Requirement(name).name.lower() for name in pins if name not in driver}
    assert set(extra) == {Requirement(name).name.lower() for name in driver}
    for name, version in pins.items():
        pin = Requirement(name)
        req = (extra if name in driver else base)[pin.name.lower()]
        assert req.extras == pin.extras, name
        tested = Version(version)
        # From the pin's major.minor to the next major: the tested version is in the range.
        assert str(req.specifier) == f"<{tested.major + 1},>={tested.major}.{tested.minor}", name
        assert tested in req.specifier

    # pip's own check: the versions the tests run with (the dev venv's, seen by the new venv)
    # satisfy every range the package asks for.
    checked = run(
        [sys.executable, "-m", "pip", "--python", str(installed.python), "check"],
        installed.work,
        installed.env,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.live
def test_make_clean_removes_what_a_build_leaves(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    left = ["build/lib/umaserver", "umaserver.egg-info", ".venv/bin", ".pytest_cache"]
    for folder in left:
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "umaserver" / "examples").mkdir(parents=True)  # the source stays
    done = run(["make", "--no-print-directory", "clean"], tmp_path, clean_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["Makefile", "umaserver"]


@pytest.mark.live
def test_the_plugin_runs_a_resource_servers_suite_against_umaserver_dev(
    installed: Installed,
) -> None:
    """The wheel's pytest plugin, loaded by its entry point alone (nothing on PYTHONPATH), in a
    suite of another folder: it starts the installed `umaserver dev` with the suite's seed."""
    suite = installed.work / "photo-server-tests"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\numa_seed = seed.toml\n", encoding="utf-8")
    (suite / "seed.toml").write_text(plugin_suite.SEED, encoding="utf-8")
    (suite / "more.toml").write_text(plugin_suite.MORE, encoding="utf-8")
    (suite / "test_photo_server.py").write_text(plugin_suite.SUITE, encoding="utf-8")
    pytest_command = [str(installed.python), "-m", "pytest", "-p", "no:cacheprovider"]

    ran = subprocess.run(
        [*pytest_command, "-q"],
        cwd=suite,
        env=installed.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "5 passed" in ran.stdout, ran.stdout

    # `-p no:umaserver` turns the plugin off: its fixtures are gone.
    listed = run([*pytest_command, "--fixtures"], suite, installed.env)
    assert "uma_server" in listed.stdout, listed.stdout + listed.stderr
    off = run([*pytest_command, "-p", "no:umaserver", "--fixtures"], suite, installed.env)
    assert "uma_server" not in off.stdout, off.stdout

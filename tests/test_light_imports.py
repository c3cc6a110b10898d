"""What importing the package loads: `import umaserver` loads neither Flask nor the app (a pytest
plugin in the package must stay light), and PostgreSQL's driver (psycopg, the `postgresql` extra)
is imported only when a PostgreSQL URL is configured. Each check runs in a fresh interpreter, with
the driver made impossible to import where it says so, as on an install without the extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live  # each test starts a Python process

ROOT = Path(__file__).resolve().parent.parent
SECRET = "a-secret-key-for-the-light-imports-test-0123456789"

# Put first in a fresh interpreter: every import of the driver fails, as when it is not installed.
NO_DRIVER = """
import sys

class NoPostgreSQLDriver:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"psycopg", "psycopg_pool", "psycopg_binary", "psycopg_c"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoPostgreSQLDriver())
"""

# Runs the command line with sys.argv; says afterwards which driver modules were loaded.
CLI = """
import atexit, sys
atexit.register(lambda: print(
    "loaded:", sorted(m for m in sys.modules if m.startswith("psycopg")), file=sys.stderr))
from umaserver.cli import main
main(prog_name="umaserver")
"""


def python(code: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write_config(folder: Path, database: str) -> Path:
    (folder / "policies.toml").write_text("", encoding="utf-8")
    path = folder / "config.toml"
    path.write_text(
        'issuer = "http://uma.test"\n'
        f'database = "{database}"\n'
        'policies = "policies.toml"\n'
        f'secret_key = "{SECRET}"\n',
        encoding="utf-8",
    )
    return path


def test_importing_the_package_loads_neither_flask_nor_the_app() -> None:
    done = python(
        "import sys, umaserver\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'flask', 'werkzeug', 'umaserver', 'psycopg', 'click', 'authlib'})\n"
        "print(loaded)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['umaserver']"


def test_create_app_is_still_imported_from_the_package() -> None:
    done = python(
        "import umaserver, umaserver.app_factory\n"
        "from umaserver import create_app\n"
        "assert create_app is umaserver.app_factory.create_app\n"
        "assert umaserver.create_app is create_app\n"
        "try:\n"
        "    umaserver.no_such_name\n"
        "except AttributeError as error:\n"
        "    print(error)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "module 'umaserver' has no attribute 'no_such_name'"


def test_without_the_driver_only_the_postgresql_modules_cannot_be_imported() -> None:
    done = python(
        NO_DRIVER
        + "import importlib, pkgutil, umaserver\n"
        + "for found in pkgutil.walk_packages(umaserver.__path__, 'umaserver.'):\n"
        + "    if found.name != 'umaserver.__main__':\n"
        + "        try:\n"
        + "            importlib.import_module(found.name)\n"
        + "        except ImportError:\n"
        + "            print(found.name)\n"
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == [
        "umaserver.services.postgresql_opener",
        "umaserver.storage.postgresql.connection",
        "umaserver.storage.postgresql.copy",
        "umaserver.storage.postgresql.database",
        "umaserver.storage.postgresql.migrate",
        "umaserver.storage.postgresql.pool",
    ]


def test_without_the_driver_the_command_line_and_the_app_work_on_sqlite(tmp_path: Path) -> None:
    config = write_config(tmp_path, str(tmp_path / "uma.db"))
    init = python(NO_DRIVER + CLI, "--config", str(config), "init")
    assert init.returncode == 0, init.stderr
    assert json.loads(init.stdout)["status"] == "ready"
    assert "loaded: []" in init.stderr

    created = python(
        NO_DRIVER + CLI, "--config", str(config), "client", "create", "--name", "Photo server"
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["client_id"]
    assert "loaded: []" in created.stderr

    # The served app, as app.py builds it: it answers without the driver.
    served = python(
        NO_DRIVER
        + "import sys\n"
        + "from umaserver import create_app\n"
        + "from umaserver.config import load_config\n"
        + f"app = create_app(load_config({str(config)!r}))\n"
        + "answer = app.test_client().get('/.well-known/uma2-configuration')\n"
        + "print(answer.status_code, answer.json['issuer'])\n"
        + "print(sorted(m for m in sys.modules if m.startswith('psycopg')))\n"
    )
    assert served.returncode == 0, served.stderr
    assert served.stdout.splitlines() == ["200 http://uma.test", "[]"]


@pytest.mark.parametrize("command", [["init"], ["serve"], ["client", "list"]])
def test_without_the_driver_a_postgresql_url_says_to_install_the_extra(
    tmp_path: Path, command: list[str]
) -> None:
    config = write_config(tmp_path, "postgresql://uma@127.0.0.1:1/uma")
    done = python(NO_DRIVER + CLI, "--config", str(config), *command)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"{config}: database: needs the PostgreSQL driver, which is not installed: "
        "install umaserver[postgresql] (pip install 'umaserver[postgresql]')",
        "loaded: []",
    ]
    assert done.stdout == ""


def test_without_the_driver_db_copy_says_to_install_the_extra(tmp_path: Path) -> None:
    config = write_config(tmp_path, str(tmp_path / "uma.db"))
    assert python(NO_DRIVER + CLI, "--config", str(config), "init").returncode == 0
    done = python(
        NO_DRIVER + CLI, "--config", str(config), "db", "copy", "--to", "postgresql://uma@x/uma"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == (
        "Copying into PostgreSQL needs the PostgreSQL driver, which is not installed: "
        "install umaserver[postgresql] (pip install 'umaserver[postgresql]')."
    )
    assert "Traceback" not in done.stderr


def test_with_the_driver_a_postgresql_url_is_read_as_before(tmp_path: Path) -> None:
    """The driver installed, the config's URL is checked by libpq's parser as it always was."""
    config = write_config(tmp_path, "postgresql://uma@127.0.0.1:1/uma?no_such_parameter=1")
    done = python(CLI, "--config", str(config), "init")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == (
        f"{config}: database: is not a PostgreSQL connection URL that libpq can read"
    )

"""Signing in on the pages (`/signin`, `/signout`): sessions, their timeouts and rotation, the
password hashes, the limits on failures, and who is counted (trusted proxies). Through the Flask
test client, time moved with the app's FakeClock."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app, secrets_at_rest
from umaserver.config import SigninSettings, load_config
from umaserver.services.signin import client_address, locked_until

from .conftest import CLI, FakeClock, Store, dump_database, make_person, stored_user, write_config
from .pages_helpers import error_of, sign_in

ISSUER = "http://uma.test"
COOKIE = "umaserver_session"


@pytest.fixture
def alice(store: Store) -> str:
    make_person(store, "alice", secrets_at_rest.hash_password("correct horse"))
    return "alice"


def signed_in_as(http: FlaskClient) -> str | None:
    page = http.get("/")
    marker = "You are signed in as <strong>"
    if marker not in page.text:
        return None
    return page.text.split(marker)[1].split("<")[0]


def test_the_right_password_signs_in_and_goes_to_next(
    http: FlaskClient, alice: str, config_path: Path
) -> None:
    answer = sign_in(http, alice, "correct horse", "/account?tab=consents")
    assert answer.status_code == 303
    assert answer.headers["Location"] == ISSUER + "/account?tab=consents"
    session_id = http.get_cookie(COOKIE)
    assert session_id is not None
    assert signed_in_as(http) == "alice"
    # Stored only as its digest.
    assert session_id.value not in dump_database(config_path.parent / "uma.db")
    assert secrets_at_rest.digest(session_id.value) in dump_database(config_path.parent / "uma.db")


@pytest.mark.parametrize(
    ("username", "password"),
    [("alice", "wrong"), ("nobody", "correct horse"), ("alice", "correct horse ")],
)
def test_a_wrong_password_and_an_unknown_account_get_one_answer(
    http: FlaskClient, alice: str, username: str, password: str
) -> None:
    answer = sign_in(http, username, password)
    assert answer.status_code == 200
    assert error_of(answer) == "The username or the password is wrong."
    assert http.get_cookie(COOKIE) is None
    assert signed_in_as(http) is None


def test_an_unknown_account_costs_a_password_check(http: FlaskClient, alice: str) -> None:
    """Not mocked: the dummy hash's own counter, and the time spent (argon2id's cost)."""
    before = secrets_at_rest.DUMMY.checks
    started = time.perf_counter()
    wrong = sign_in(http, "alice", "wrong")
    wrong_time = time.perf_counter() - started
    assert secrets_at_rest.DUMMY.checks == before  # a real hash was checked
    started = time.perf_counter()
    unknown = sign_in(http, "nobody", "wrong")
    unknown_time = time.perf_counter() - started
    assert secrets_at_rest.DUMMY.checks == before + 1
    assert error_of(wrong) == error_of(unknown)
    assert unknown_time > 0.3 * wrong_time and wrong_time > 0.3 * unknown_time, (
        unknown_time,
        wrong_time,
    )


def test_a_password_less_account_cannot_sign_in(http: FlaskClient, store: Store) -> None:
    make_person(store, "robot", None)
    before = secrets_at_rest.DUMMY.checks
    assert error_of(sign_in(http, "robot", "")) == "Give your username and your password."
    assert error_of(sign_in(http, "robot", "anything")) == "The username or the password is wrong."
    assert secrets_at_rest.DUMMY.checks == before + 1


def test_an_old_scrypt_hash_verifies_and_is_rehashed(http: FlaskClient, store: Store) -> None:
    make_person(store, "old", secrets_at_rest.hash_password_scrypt("s3cret"))
    assert error_of(sign_in(http, "old", "nope")) is not None
    still = stored_user(store, "old")
    assert still is not None and still.password_hash is not None
    assert still.password_hash.startswith("scrypt$")  # only a success rehashes
    assert sign_in(http, "old", "s3cret").status_code == 303
    found = stored_user(store, "old")
    assert found is not None and found.password_hash is not None
    assert found.password_hash.startswith("$argon2id$")
    assert secrets_at_rest.check_password("s3cret", found.password_hash)
    assert not secrets_at_rest.password_needs_rehash(found.password_hash)


# -- sessions ----------------------------------------------------------------------------------


def test_signing_in_rotates_the_session_id(http: FlaskClient, alice: str, store: Store) -> None:
    make_person(store, "bob", secrets_at_rest.hash_password("bobs"))
    http.get("/signin")
    assert http.get_cookie("umaserver_presession") is not None
    sign_in(http, alice, "correct horse")
    assert http.get_cookie("umaserver_presession") is None  # the pre-session is dropped
    first = http.get_cookie(COOKIE)
    assert first is not None
    sign_in(http, "bob", "bobs")
    second = http.get_cookie(COOKIE)
    assert second is not None and second.value != first.value
    assert signed_in_as(http) == "bob"
    # The id before the sign-in is no session any more.
    http.set_cookie(COOKIE, first.value)
    assert signed_in_as(http) is None


def test_signing_out_ends_the_session(http: FlaskClient, alice: str) -> None:
    sign_in(http, alice, "correct horse")
    old = http.get_cookie(COOKIE)
    assert old is not None
    home = http.get("/")
    token = home.text.split('name="csrf_token" value="')[1].split('"')[0]
    answer = http.post("/signout", data={"csrf_token": token})
    assert answer.status_code == 303 and answer.headers["Location"] == ISSUER + "/"
    assert http.get_cookie(COOKIE) is None
    http.set_cookie(COOKIE, old.value)
    assert signed_in_as(http) is None


def test_the_idle_timeout(http: FlaskClient, alice: str, clock: FakeClock) -> None:
    sign_in(http, alice, "correct horse")
    for _ in range(3):
        clock.advance(1799)
        assert signed_in_as(http) == "alice"  # each request restarts the idle time
    clock.advance(1800)
    assert signed_in_as(http) is None
    assert http.get_cookie(COOKIE) is None  # cleared once found dead


def test_the_absolute_timeout(http: FlaskClient, alice: str, clock: FakeClock) -> None:
    sign_in(http, alice, "correct horse")
    for _ in range(43):
        clock.advance(1000)
        assert signed_in_as(http) == "alice"
    clock.advance(199)
    assert signed_in_as(http) == "alice"
    clock.advance(1)  # 43200 s after the sign-in
    assert signed_in_as(http) is None


# -- limits on failures ------------------------------------------------------------------------


def test_repeated_failures_lock_the_account_and_say_when_to_retry(
    http: FlaskClient, alice: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="umaserver.signin")
    for _ in range(4):
        assert error_of(sign_in(http, alice, "wrong")) == "The username or the password is wrong."
        clock.advance(10)
    locked = sign_in(http, alice, "wrong")  # the fifth within the window
    assert locked.status_code == 429
    assert error_of(locked) == (
        "Too many failed sign-ins for this account. Try again in 15 minutes."
    )
    assert locked.headers["Retry-After"] == "900"
    before = secrets_at_rest.DUMMY.checks
    clock.advance(300)
    # Locked: not even the right password is checked.
    again = sign_in(http, alice, "correct horse")
    assert again.status_code == 429
    assert error_of(again) == "Too many failed sign-ins for this account. Try again in 10 minutes."
    assert secrets_at_rest.DUMMY.checks == before
    # Another address: five guesses from one place do not lock the owner out from elsewhere
    # (the account-wide limit is account_max_failures, 20).
    other = sign_in(http, alice, "correct horse", environ_base={"REMOTE_ADDR": "192.0.2.7"})
    assert other.status_code == 303
    clock.advance(600)
    assert sign_in(http, alice, "correct horse").status_code == 303
    lines = [r.getMessage() for r in caplog.records if r.name == "umaserver.signin"]
    assert sum("sign-in failed username='alice'" in line for line in lines) == 5
    assert sum("sign-in locked username='alice'" in line for line in lines) == 1
    assert sum("sign-in succeeded username='alice'" in line for line in lines) == 2
    assert not any("wrong" in line or "correct horse" in line for line in lines)


def test_failures_from_many_addresses_lock_the_account_from_everywhere(
    http: FlaskClient, alice: str, clock: FakeClock
) -> None:
    # 20 guesses from 20 addresses (account_max_failures), none of them past its own 5.
    for n in range(20):
        guess = sign_in(http, alice, "wrong", environ_base={"REMOTE_ADDR": f"192.0.2.{n + 1}"})
        assert guess.status_code == (429 if n == 19 else 200)
        clock.advance(10)
    fresh = sign_in(http, alice, "correct horse", environ_base={"REMOTE_ADDR": "198.51.100.9"})
    assert fresh.status_code == 429
    assert error_of(fresh).startswith("Too many failed sign-ins for this account.")


def test_failures_spread_over_more_than_the_window_do_not_lock(
    http: FlaskClient, alice: str, clock: FakeClock
) -> None:
    for _ in range(8):
        assert sign_in(http, alice, "wrong").status_code == 200
        clock.advance(226)  # four fit in 900 s, never five
    assert sign_in(http, alice, "correct horse").status_code == 303


def test_unknown_accounts_are_locked_like_real_ones(http: FlaskClient, clock: FakeClock) -> None:
    for _ in range(4):
        sign_in(http, "nobody", "guess")
    assert error_of(sign_in(http, "nobody", "guess")) == (
        "Too many failed sign-ins for this account. Try again in 15 minutes."
    )


def test_a_success_forgets_the_failures(http: FlaskClient, alice: str) -> None:
    for _ in range(4):
        sign_in(http, alice, "wrong")
    assert sign_in(http, alice, "correct horse").status_code == 303
    for _ in range(4):
        assert sign_in(http, alice, "wrong").status_code == 200


def proxied_app(tmp_path: Path, clock: FakeClock, trusted: str) -> Flask:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    extra = f"[server]\ntrusted_proxies = [{trusted}]\n[signin]\nmax_failures = 2\n"
    app = create_app(load_config(write_config(tmp_path, extra=extra)), clock=clock)
    app.config["TESTING"] = True
    return app


@pytest.mark.parametrize(
    ("trusted", "forwarded", "logged"),
    [
        ('"10.0.0.1"', "198.51.100.9", "198.51.100.9"),
        ('"10.0.0.1"', "203.0.113.5, 198.51.100.9", "198.51.100.9"),
        ('"10.0.0.0/8"', "198.51.100.9, 10.0.0.3", "198.51.100.9"),
        ('"192.0.2.1"', "198.51.100.9", "10.0.0.1"),  # not a trusted proxy: header ignored
    ],
)
def test_failures_are_counted_for_the_address_a_trusted_proxy_names(
    tmp_path: Path,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    trusted: str,
    forwarded: str,
    logged: str,
) -> None:
    app = proxied_app(tmp_path, clock, trusted)
    with app.app_context():
        from .conftest import open_store

        handle = open_store(tmp_path / "uma.db")
        make_person(handle, "carol", secrets_at_rest.hash_password("pw"))
        handle.close()
    http = app.test_client()
    caplog.set_level(logging.INFO, logger="umaserver.signin")
    via = {"environ_base": {"REMOTE_ADDR": "10.0.0.1"}, "headers": {"X-Forwarded-For": forwarded}}
    sign_in(http, "carol", "wrong", **via)
    assert f"address={logged}" in caplog.text
    locked = sign_in(http, "carol", "wrong", **via)
    assert locked.status_code == 429


@pytest.mark.parametrize(
    ("remote", "forwarded", "trusted", "expected"),
    [
        ("192.0.2.1", ["198.51.100.1"], [], "192.0.2.1"),
        ("192.0.2.1", ["198.51.100.1"], ["10.0.0.0/8"], "192.0.2.1"),
        ("10.0.0.1", ["198.51.100.1"], ["10.0.0.0/8"], "198.51.100.1"),
        ("10.0.0.1", ["1.1.1.1, 198.51.100.1, 10.0.0.2"], ["10.0.0.0/8"], "198.51.100.1"),
        ("10.0.0.1", ["1.1.1.1", "198.51.100.1"], ["10.0.0.0/8"], "198.51.100.1"),
        ("10.0.0.1", ["10.0.0.3, 10.0.0.2"], ["10.0.0.0/8"], "10.0.0.3"),
        ("10.0.0.1", ["evil, 198.51.100.1"], ["10.0.0.0/8"], "198.51.100.1"),
        ("10.0.0.1", ["198.51.100.1, garbage"], ["10.0.0.0/8"], "10.0.0.1"),
        ("10.0.0.1", [], ["10.0.0.0/8"], "10.0.0.1"),
        ("::1", ["2001:db8::5"], ["::1"], "2001:db8::5"),
        (None, [], [], "unknown"),
    ],
)
def test_the_client_address(
    remote: str | None, forwarded: list[str], trusted: list[str], expected: str
) -> None:
    assert client_address(remote, forwarded, trusted) == expected


@pytest.mark.parametrize(
    ("failures", "expected"),
    [
        ([], 0),
        ([100, 200], 0),
        ([100, 200, 300], 300 + 50),
        ([100, 150, 250], 0),  # never three within 100 s
        ([100, 150, 200, 210], 210 + 50),
    ],
)
def test_when_a_lock_ends(failures: list[int], expected: int) -> None:
    settings = SigninSettings(max_failures=3, window=200, lockout=50)
    if failures == [100, 150, 250]:
        settings = SigninSettings(max_failures=3, window=100, lockout=50)
    assert locked_until(failures, settings, 3) == expected


def test_pruning_forgets_ended_sessions_and_old_failures(
    http: FlaskClient, alice: str, store: Store, clock: FakeClock
) -> None:
    from umaserver.services.maintenance import prune

    sign_in(http, alice, "wrong")
    sign_in(http, alice, "correct horse")  # forgets alice's failure
    sign_in(http, "nobody", "guess")  # two failures: the account's key and the address's
    assert prune(store, clock.now()).total == 0
    clock.advance(1801)
    assert prune(store, clock.now()).sessions == 1
    clock.advance(24 * 3600)
    assert prune(store, clock.now()).signin_failures == 2


def test_a_new_password_ends_the_sessions(http: FlaskClient, alice: str, cli: CLI) -> None:
    sign_in(http, alice, "correct horse")
    assert signed_in_as(http) == "alice"
    done = cli.json(
        "user", "set-password", "alice", "--password-stdin", input="new horse battery\n"
    )
    assert done["sessions_ended"] == 1
    assert signed_in_as(http) is None
    assert error_of(sign_in(http, alice, "correct horse")) is not None
    assert sign_in(http, alice, "new horse battery").status_code == 303


def test_user_unlock_ends_the_lockouts_of_a_name_from_everywhere(
    http: FlaskClient, alice: str, cli: CLI
) -> None:
    for n in range(20):  # alice locked from 192.0.2.1 (5 of its own) and from everywhere (20)
        sign_in(http, alice, "wrong", environ_base={"REMOTE_ADDR": f"192.0.2.{1 + n % 4}"})
    sign_in(http, "nobody", "guess")  # a name that is no account is counted too
    for address in ("192.0.2.1", "198.51.100.9"):
        locked = sign_in(http, alice, "correct horse", environ_base={"REMOTE_ADDR": address})
        assert locked.status_code == 429
    assert cli.json("user", "unlock", "alice") == {
        "username": "alice",
        "unlocked": True,
        "failures_forgotten": 40,  # 20 of the account, 20 of the account from its 4 addresses
    }
    again = sign_in(http, alice, "correct horse", environ_base={"REMOTE_ADDR": "192.0.2.1"})
    assert again.status_code == 303
    assert cli.json("user", "unlock", "nobody")["failures_forgotten"] == 2
    assert cli.json("user", "unlock", "nobody")["failures_forgotten"] == 0


def test_deleting_a_user_ends_their_sessions(http: FlaskClient, alice: str, cli: CLI) -> None:
    sign_in(http, alice, "correct horse")
    assert cli.json("user", "delete", "alice") == {"deleted": "alice"}
    assert signed_in_as(http) is None

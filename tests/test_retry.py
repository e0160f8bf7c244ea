"""The reconnect policy of a running capture (pure, no server): what is tried again, for how long, and the
password read again before each new connection."""

from __future__ import annotations

import json
import os
from typing import Any

import pymysql
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.errors import ConnectError, ConnectionLostError, TableError
from mysql_cdc.options import parse_options
from mysql_cdc.profiles import ConnectionProfile, profile_from_url, resolve_profile, running
from mysql_cdc.retry import TRANSIENT, is_transient, keep_trying


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


@given(st.integers(0, 40), st.floats(0.5, 900), st.floats(0, 20))
def test_a_transient_failure_is_tried_again_until_the_window_closes(failures: int, within: float, cost: float
                                                                     ) -> None:
    """``failures`` lost connections in a row, each try taking ``cost`` seconds: the value if a try succeeds
    before ``within`` seconds passed since the first failure, else one ConnectionLostError; never a pause past
    the window."""
    t, calls = FakeTime(), []

    def fn() -> str:
        calls.append(t.now)
        t.now += cost
        if len(calls) <= failures:
            raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
        return "rows"

    try:
        got = keep_trying(fn, within, "reading", sleep=t.sleep, clock=t.clock)
    except ConnectionLostError as e:
        assert len(calls) <= failures and "within" in str(e) and "2013" in str(e)
        assert e.code == 2013 and isinstance(e.__cause__, pymysql.err.OperationalError)
        first_failure_seen = calls[0] + cost
        assert t.now - first_failure_seen >= within  # it gave up only once the window had passed
    else:
        assert got == "rows" and len(calls) == failures + 1
    assert all(0 < s <= 30 for s in t.slept)
    assert sum(t.slept) <= within + 1e-9


def test_other_errors_are_raised_at_once_and_a_window_of_0_tries_once() -> None:
    t = FakeTime()
    for error in (pymysql.err.ProgrammingError(1146, "Table 'd.t' doesn't exist"), TableError("no table"),
                  KeyError(2013), ValueError("bad"), ConnectionLostError("given up", 2013)):
        def fn(e: BaseException = error) -> None:
            raise e

        with pytest.raises(type(error)):
            keep_trying(fn, 600, "x", sleep=t.sleep, clock=t.clock)
    assert t.slept == []
    with pytest.raises(pymysql.err.OperationalError):
        keep_trying(lambda: (_ for _ in ()).throw(pymysql.err.OperationalError(2003, "x")), 0, "x",
                    sleep=t.sleep, clock=t.clock)
    assert t.slept == []


@pytest.mark.parametrize("error,transient", [
    (pymysql.err.OperationalError(2003, "Can't connect"), True),
    (pymysql.err.OperationalError(1053, "Server shutdown in progress"), True),
    (pymysql.err.OperationalError(1045, "Access denied"), True),  # a rotated password, while running
    (pymysql.err.InternalError(1927, "Connection was killed"), True),
    (ConnectError("cannot reach", 2003), True),
    (ConnectionRefusedError(111, "refused"), True),
    (TimeoutError("no answer within 5 s"), True),
    (pymysql.err.OperationalError(1142, "SELECT command denied"), False),
    (pymysql.err.ProgrammingError(1064, "syntax"), False),
    (FileNotFoundError(2, "no file"), False),
    (ConnectError("TLS failed", None), False),
])
def test_which_errors_are_transient(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient
    assert all(isinstance(code, int) for code in TRANSIENT)


def test_a_connect_error_keeps_its_code_through_a_pickle() -> None:
    import pickle

    e = pickle.loads(pickle.dumps(ConnectError("lost", 2013)))
    assert type(e) is ConnectError and e.code == 2013 and str(e) == "lost"


def test_the_password_is_read_again_where_the_profile_names_it(tmp_path: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pw = tmp_path / "pw"
    pw.write_text("first\n")
    prof = profile_from_url(f"mysql://cdc@db:3306?password-file={pw}")
    assert prof.password == "first" and prof.login_password() == "first"
    pw.write_text("rotated\n")
    assert prof.login_password() == "rotated"
    pw.unlink()  # unreadable for a moment (a secret being replaced): the last one read
    assert prof.login_password() == "first"
    # a profile from the profiles file: the file is read again
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps({"shop": {"host": "db", "user": "cdc", "password": "one"}}))
    monkeypatch.setenv("MYSQL_CDC_PROFILES_FILE", str(profiles))
    p2 = running(resolve_profile(parse_options({"source": "shop"})), parse_options({"reconnect_timeout": "30"}))
    assert (p2.password, p2.reconnect_timeout, p2.read_timeout) == ("one", 30.0, 120.0)
    profiles.write_text(json.dumps({"shop": {"host": "db", "user": "cdc", "password": "two"}}))
    assert p2.login_password() == "two"
    assert "two" not in repr(p2) and "profiles" not in repr(p2)
    # a password given as it is stays
    plain = ConnectionProfile("db", password="same")
    assert plain.login_password() == "same" and os.environ.get("MYSQL_CDC_PROFILES_FILE") == str(profiles)

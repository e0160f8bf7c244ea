"""Options and connection profiles (no server): validation errors name the bad value; passwords never show."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mysql_cdc.errors import ConfigError
from mysql_cdc.options import OPTIONS, parse_options
from mysql_cdc.profiles import (
    ConnectionProfile,
    profile_from_mapping,
    profile_from_url,
    resolve_profile,
    url_holds_password,
)


def test_defaults_come_from_the_option_table() -> None:
    opts = parse_options({})
    for spec in OPTIONS:
        assert getattr(opts, spec.key) == spec.default, spec.key


@pytest.mark.parametrize("raw,message", [
    ({"chunk_sise": 5}, "unknown option 'chunk_sise'"),
    ({"chunk_size": "many"}, "'chunk_size' must be a int, got 'many'"),
    ({"chunk_size": -1}, "chunk_size must be >= 1 rows, or 0 to size chunks by bytes, got -1"),
    ({"watermark": "magic"}, "bad watermark 'magic'"),
    ({"server_id_range": "9-1"}, "bad server_id_range '9-1'"),
    ({"tables": "shop.(orders"}, "bad table pattern 'shop.(orders'"),
    ({"tinyint1_as_boolean": "perhaps"}, "must be a bool, got 'perhaps'"),
    ({"split_factor_lower": 5, "split_factor_upper": 1}, "split factors"),
    ({"partitions": -1}, "partitions must be >= 0"),
    ({"chunk_key": "shop.a:k; shop.b:"}, "bad chunk_key entry 'shop.b:' in 'shop.a:k; shop.b:'"),
    ({"chunk_key": "shop.(a:k"}, "bad table pattern 'shop.(a'"),
    ({"tables": "s.t", "large_value_dir": "s3://bucket/lv"}, "large_value_dir 's3://bucket/lv' is a URI"),
    ({"table": "s.t", "large_value_dir": "/mnt/lv"}, "large_value_dir is for reads of many tables"),
    ({"tables": "s.t", "large_value_dir": "/mnt/lv", "large_value_bytes": 0}, "large_value_bytes must be >= 1"),
])
def test_bad_options_are_one_clear_error(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_options(raw)


def test_sql_arguments_never_take_a_password() -> None:
    from mysql_cdc.udtf.spark.sql_functions import _sql_options

    with pytest.raises(ConfigError, match="forbidden.*'password'.*connection profile"):
        _sql_options({"source": "x", "password": "hunter2-secret"})
    assert _sql_options({"SOURCE": "x", "chunk_size": 3}).chunk_size == 3


def test_profiles_resolve_from_registration_environment_and_file(tmp_path: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    reg = {"a": ConnectionProfile("h1", 1, "u1", "p1-secret")}
    assert resolve_profile(parse_options({"source": "a"}), reg).host == "h1"
    monkeypatch.setenv("MYSQL_CDC_PROFILE_MY_DB", "mysql://u%40x:p%2Fw@h2:3307")
    prof = resolve_profile(parse_options({"source": "my-db"}))
    assert (prof.host, prof.port, prof.user, prof.password) == ("h2", 3307, "u@x", "p/w")
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"f": {"host": "h3", "user": "u3", "password": "p3-secret"}}))
    monkeypatch.setenv("MYSQL_CDC_PROFILES_FILE", str(path))
    assert resolve_profile(parse_options({"source": "f"})).host == "h3"
    with pytest.raises(ConfigError, match="unknown connection profile 'nope'.*MYSQL_CDC_PROFILE_NOPE"):
        resolve_profile(parse_options({"source": "nope"}))
    with pytest.raises(ConfigError, match="not both"):
        resolve_profile(parse_options({"source": "a", "host": "h"}), reg)
    with pytest.raises(ConfigError, match="no connection"):
        resolve_profile(parse_options({}))


def test_passwords_never_show_in_reprs() -> None:
    prof = ConnectionProfile("h", 1, "u", "p1-secret")
    opts = parse_options({"host": "h", "user": "u"})
    for text in (repr(prof), str(prof), repr(opts), str(opts)):
        assert "secret" not in text


@pytest.mark.parametrize("value", ["hunter2-literal", "env:CDC_TEST_PW", "file:/etc/cdc-secret", ""])
def test_query_options_never_carry_or_name_a_password(value: str) -> None:
    """Options come with the query (SQL text, .option()): whoever writes it could have a password, or a secret
    the process holds (an environment variable, a file), sent to a server of their choosing. A password option
    of any form is refused, without echoing it; a profile's connection cannot be moved by options."""
    with pytest.raises(ConfigError, match="option 'password' is not taken.*connection profile") as e:
        parse_options({"host": "h", "user": "u", "PASSWORD": value})
    assert "hunter2" not in str(e.value) and "CDC_TEST_PW" not in str(e.value)
    for key, v in (("host", "evil.example"), ("port", "3307"), ("user", "root"), ("ssl_mode", "disabled"),
                   ("ssl_ca", "/tmp/ca.pem")):
        with pytest.raises(ConfigError, match=rf"source='shop' \(a connection profile\) or the option\(s\) {key}, "
                           "not both: a profile's password goes only to the server the profile names"):
            parse_options({"source": "shop", key: v})
    assert resolve_profile(parse_options({"host": "h", "user": "u"})).password == ""  # a login without one


def test_a_profile_reads_its_password_from_an_environment_variable_or_a_file(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """References to secrets live in profiles only (set up by whoever runs Spark), resolved where the query runs."""
    pw = tmp_path / "pw"
    pw.write_text("from-a-file\n")
    monkeypatch.setenv("CDC_TEST_PW", "from-env")
    assert profile_from_url(f"mysql://cdc@db?password-file={pw}").password == "from-a-file"
    assert profile_from_url("mysql://cdc@db:3307?password-env=CDC_TEST_PW&ssl-mode=required").password == "from-env"
    assert profile_from_mapping({"host": "db", "password_env": "CDC_TEST_PW"}).password == "from-env"
    assert profile_from_mapping({"host": "db", "password_file": str(pw)}).password == "from-a-file"
    with pytest.raises(ConfigError, match="give one of password, password-env and password-file"):
        profile_from_url("mysql://cdc:pw@db?password-env=CDC_TEST_PW", "x")
    with pytest.raises(ConfigError, match="profile 'x' reads its password from the environment variable "
                       "'CDC_TEST_NOPE', which is not set"):
        profile_from_url("mysql://cdc@db?password-env=CDC_TEST_NOPE", "x")
    with pytest.raises(ConfigError, match="cannot be read"):
        profile_from_mapping({"host": "db", "password_file": str(tmp_path / "none")}, "x")
    assert url_holds_password("mysql://cdc:pw@db") and not url_holds_password(f"mysql://cdc@db?password-file={pw}")
    # a profile's password in a variable of its own, which Spark redacts (its name says PASSWORD)
    monkeypatch.setenv("MYSQL_CDC_PROFILE_SHOP_EU", "mysql://cdc@db.internal:3306")
    monkeypatch.setenv("MYSQL_CDC_PASSWORD_SHOP_EU", "p@ss/word")
    prof = resolve_profile(parse_options({"source": "shop-eu"}))
    assert (prof.user, prof.password, prof.host) == ("cdc", "p@ss/word", "db.internal")
    # a URL with its password in a Spark setting is refused (Spark logs it unredacted); the split form is not
    from mysql_cdc.udtf.spark.register import check_conf_secrets

    check_conf_secrets([("spark.executorEnv.MYSQL_CDC_PROFILE_SHOP", "mysql://cdc@db:3306"),
                        ("spark.executorEnv.MYSQL_CDC_PASSWORD_SHOP", "pw")])
    with pytest.raises(ConfigError, match=r"'spark.kubernetes.driverEnv.MYSQL_CDC_PROFILE_SHOP' holds a profile URL "
                       r"with its password.*'spark.kubernetes.driverEnv.MYSQL_CDC_PASSWORD_SHOP'") as e:
        check_conf_secrets([("spark.kubernetes.driverEnv.MYSQL_CDC_PROFILE_SHOP", "mysql://cdc:Hunter2@db:3306")])
    assert "Hunter2" not in str(e.value)


# any text, marked so that it cannot occur by chance in a pickle or a message
_PASSWORDS = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30).map(lambda t: f"Pw<{t}>")


@settings(deadline=None)  # its time is the machine's load, not the rule's
@given(password=_PASSWORDS, source=st.sampled_from(["file", "env", "profiles", "named", "session"]))
def test_a_pickled_profile_holds_no_password_and_reads_it_where_it_lands(password: str, source: str) -> None:
    """Spark pickles readers, partitions and functions (and may log or spill them): a profile pickles without
    its password, under every pickler Spark uses, and the copy reads it where the profile names it, or from the
    session's file that ``register`` gave the session (docs/DESIGN.md §8). Where it can read neither, a login is
    one error that says how executors get it; a password with nowhere to be read is refused, not pickled."""
    import os
    import pickle
    import tempfile

    from pyspark import cloudpickle

    with tempfile.TemporaryDirectory() as d:
        env = {}
        if source == "file":
            path = os.path.join(d, "pw")
            with open(path, "w", encoding="utf-8") as f:
                f.write(password + "\n")
            prof = profile_from_mapping({"host": "db", "password_file": path}, "p")
        elif source == "env":
            env = {"CDC_PROP_PW": password}
            os.environ.update(env)
            prof = profile_from_mapping({"host": "db", "password_env": "CDC_PROP_PW"}, "p")
        elif source == "profiles":
            path = os.path.join(d, "profiles.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"p": {"host": "db", "password": password}}, f)
            env = {"MYSQL_CDC_PROFILES_FILE": path}
            os.environ.update(env)
            prof = resolve_profile(parse_options({"source": "p"}))
        elif source == "named":
            env = {"MYSQL_CDC_PROFILE_P": "mysql://cdc@db:3306", "MYSQL_CDC_PASSWORD_P": password}
            os.environ.update(env)
            prof = resolve_profile(parse_options({"source": "p"}))
        else:  # registered: the session's private file, as Spark's files serve it
            from pyspark import SparkFiles

            with open(os.path.join(d, "s.json"), "w", encoding="utf-8") as f:
                json.dump({"p": password}, f)
            SparkFiles._root_directory, SparkFiles._is_running_on_worker = d, True
            prof = ConnectionProfile("db", password=password, session_secret=("s.json", "p"))
        try:
            assert prof.password == password
            for dumps in (pickle.dumps, cloudpickle.dumps):
                data = dumps(prof)
                assert password.encode() not in data and password.encode("unicode_escape") not in data
                copy = pickle.loads(data)
                assert copy.password == "" and copy.login_password() == password
                assert dataclasses.replace(copy, password=password) == prof
            for k in env:  # where it lands, nothing is where the profile names it
                os.environ.pop(k)
            for name in os.listdir(d):
                os.remove(os.path.join(d, name))
            with pytest.raises(ConfigError, match="its password cannot be read in this process.*register it"
                               ".*spark.executorEnv.MYSQL_CDC_PROFILE_<NAME>") as e:
                pickle.loads(pickle.dumps(prof)).login_password()
            assert password not in str(e.value)
        finally:
            for k in env:
                os.environ.pop(k, None)
            if source == "session":
                SparkFiles._root_directory, SparkFiles._is_running_on_worker = None, False
    with pytest.raises(ConfigError, match="holds its password and would travel inside a pickled object"):
        pickle.dumps(ConnectionProfile("db", password=password))
    assert pickle.loads(pickle.dumps(ConnectionProfile("db"))).login_password() == ""  # a login without one


def test_public_face_and_pure_logic_load_no_spark_and_no_driver() -> None:
    import subprocess
    import sys

    code = ("import sys, mysql_cdc, mysql_cdc.chunks, mysql_cdc.sql, mysql_cdc.types, mysql_cdc.udtf.snapshot.correct, "
            "mysql_cdc.udtf.binlog.emit, mysql_cdc.udtf.convert, mysql_cdc.offsets; "
            "print(sorted(m for m in ('pyspark', 'pymysql', 'MySQLdb', 'connectorx', 'pymysqlreplication') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    import mysql_cdc

    assert set(mysql_cdc.__all__) >= {"register", "plan_chunks", "MysqlCdcError", "ConnectionProfile"}


_PATTERN_PARTS = st.sampled_from(["shop", "[.]", "orders", r"\d{2,4}", "(a|b)", "(x,y)", "[,;]", r"a\,b", ".*",
                                  "[]x]", "[^],]", "{1,2}", "_"])


@given(st.lists(st.lists(_PATTERN_PARTS, min_size=1, max_size=5).map("".join), min_size=1, max_size=4))
def test_patterns_split_at_the_commas_between_them_only(patterns: list[str]) -> None:
    from mysql_cdc.options import split_patterns

    assert split_patterns(", ".join(patterns)) == tuple(patterns)
    assert split_patterns(",".join(patterns)) == tuple(patterns)


def test_a_password_read_again_goes_only_to_the_connection_it_was_read_for(tmp_path: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a profile is read again in another process (an executor's environment, a profiles file changed
    since), a profile of the same name that names another host, port or user gives no password: it would go to
    the pickled profile's server."""
    import pickle

    monkeypatch.setenv("MYSQL_CDC_PROFILE_SHOP", "mysql://cdc@db-a:3306")
    monkeypatch.setenv("MYSQL_CDC_PASSWORD_SHOP", "Pw-of-a")
    copy = pickle.loads(pickle.dumps(resolve_profile(parse_options({"source": "shop"}))))
    assert copy.login_password() == "Pw-of-a"
    monkeypatch.setenv("MYSQL_CDC_PROFILE_SHOP", "mysql://cdc@db-b:3306")  # this process's 'shop' is elsewhere
    monkeypatch.setenv("MYSQL_CDC_PASSWORD_SHOP", "Pw-of-b")
    with pytest.raises(ConfigError, match="its password cannot be read in this process") as e:
        copy.login_password()
    assert "Pw-of-b" not in str(e.value)

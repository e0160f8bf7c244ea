"""Options and connection profiles (no server): validation errors name the bad value; passwords never show."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mysql_cdc.errors import ConfigError
from mysql_cdc.options import OPTIONS, ConnectionProfile, parse_options, resolve_profile


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
])
def test_bad_options_are_one_clear_error(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_options(raw)


def test_sql_arguments_never_take_a_password() -> None:
    from mysql_cdc.udtf.sql_functions import _sql_options

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
    opts = parse_options({"host": "h", "password": "file:/p2-secret"})
    for text in (repr(prof), str(prof), repr(opts), str(opts)):
        assert "secret" not in text


def test_a_password_option_is_a_reference_never_a_literal(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Option values travel in the query itself, which Spark Connect writes to its event log: a password option
    names where the password is read (env:, file:), and a literal one is refused without being echoed."""
    pw = tmp_path / "pw"
    pw.write_text("from-a-file\n")
    monkeypatch.setenv("CDC_TEST_PW", "from-env")
    assert resolve_profile(parse_options({"host": "h", "password": f"file:{pw}"})).password == "from-a-file"
    assert resolve_profile(parse_options({"host": "h", "password": "env:CDC_TEST_PW"})).password == "from-env"
    with pytest.raises(ConfigError, match="literal password") as e:
        resolve_profile(parse_options({"host": "h", "password": "hunter2-literal"}))
    assert "hunter2" not in str(e.value)
    with pytest.raises(ConfigError, match="'CDC_TEST_NOPE', which is not set"):
        resolve_profile(parse_options({"host": "h", "password": "env:CDC_TEST_NOPE"}))
    with pytest.raises(ConfigError, match="cannot be read"):
        resolve_profile(parse_options({"host": "h", "password": f"file:{tmp_path}/none"}))
    # a profile's password in a variable of its own, which Spark redacts (its name says PASSWORD)
    monkeypatch.setenv("MYSQL_CDC_PROFILE_SHOP_EU", "mysql://cdc@db.internal:3306")
    monkeypatch.setenv("MYSQL_CDC_PASSWORD_SHOP_EU", "p@ss/word")
    prof = resolve_profile(parse_options({"source": "shop-eu"}))
    assert (prof.user, prof.password, prof.host) == ("cdc", "p@ss/word", "db.internal")


def test_public_face_and_pure_logic_load_no_spark_and_no_driver() -> None:
    import subprocess
    import sys

    code = ("import sys, mysql_cdc, mysql_cdc.chunks, mysql_cdc.sql, mysql_cdc.types, mysql_cdc.udtf.correct, "
            "mysql_cdc.udtf.emit, mysql_cdc.udtf.convert, mysql_cdc.offsets; "
            "print(sorted(m for m in ('pyspark', 'pymysql', 'MySQLdb', 'connectorx', 'pymysqlreplication') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    import mysql_cdc

    assert set(mysql_cdc.__all__) >= {"register", "plan_chunks", "MysqlCdcError", "ConnectionProfile"}

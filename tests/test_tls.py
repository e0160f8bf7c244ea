"""TLS to the database: the profile's ssl_mode and ssl_ca are honoured by every connection (planner, both SELECT
paths, the binlog stream), against MySQL 9.7 with its own certificates and require_secure_transport=ON; on a
server without TLS (the test MariaDB) a mode that requires it fails with one clear error."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from mysql_cdc.connect import connect, connect_fast
from mysql_cdc.errors import ConfigError, ConnectError
from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.profiles import ConnectionProfile, profile_from_mapping, profile_from_url
from mysql_cdc.udtf.binlog.phase import BinlogPhase
from mysql_cdc.udtf.binlog.startup import ReadFrom, server_end
from mysql_cdc.udtf.convert import batch_to_rows
from mysql_cdc.udtf.snapshot.reader import SnapshotReader
from tests.helpers import counted, insert_rows
from tests.servers import ServerProcess


def _cipher(profile: ConnectionProfile, fast: bool = False) -> str:
    """The session's TLS cipher, over pymysql or (``fast``) the mysqlclient connection of the SELECT path."""
    conn = connect_fast(profile) if fast else connect(profile)
    try:
        cur = conn.cursor()
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        row = cur.fetchone()
        return str(row[1]) if row else ""
    finally:
        conn.close()


def test_profiles_carry_tls_settings_and_urls_parse_strictly() -> None:
    p = profile_from_url("mysql://cdc:a@b#c/d?e@db.internal:3307?ssl-mode=VERIFY_CA&ssl-ca=/etc/ca%20x.pem")
    assert (p.user, p.password, p.host, p.port) == ("cdc", "a@b#c/d?e", "db.internal", 3307)
    assert (p.ssl_mode, p.ssl_ca) == ("verify_ca", "/etc/ca x.pem")
    assert "a@b#c" not in repr(p) and "ssl_mode='verify_ca'" in repr(p)
    m = profile_from_mapping({"host": "h", "ssl_mode": "required"})
    assert m.ssl_mode == "required" and m.ssl_ca is None
    for bad in ("mysql://cdc:S3cret-pw@db:33x06", "mysql://cdc:S3cret-pw@db:3306?ssl-mode=sometimes",
                "postgres://cdc:S3cret-pw@db", "mysql://cdc:S3cret-pw@db:3306?sslmode=required"):
        with pytest.raises(ConfigError) as e:
            profile_from_url(bad, "shop")
        assert "S3cret" not in str(e.value) and "'shop'" in str(e.value)


def test_tls_settings_are_honoured_by_every_connection(server: ServerProcess, profile: ConnectionProfile, db: str,
                                                       root: Any) -> None:
    info = server.info
    assert info is not None
    cur = root.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    insert_rows(root, "t", ["id", "v"], [(i, f"v{i}") for i in range(1, 101)])
    counted(root, "t")  # three chunks by the row estimate, which lags behind the insert
    opts = parse_options({"tables": re.escape(db) + r"\.t", "chunk_size": 40})
    if server.kind == "mariadb":  # the test MariaDB has no certificate: TLS cannot be had, and is not faked
        for mode in ("required", "verify_ca"):
            with pytest.raises(ConnectError, match=rf"TLS to 127\.0\.0\.1:{profile.port} failed with ssl_mode "
                                                   rf"'{mode}'.*ssl_mode and ssl_ca"):
                plan_tables(dataclasses.replace(profile, ssl_mode=mode), opts)
        assert plan_tables(dataclasses.replace(profile, ssl_mode="disabled"), opts)[1][0].chunks
        with pytest.raises(ConnectError, match="TLS to .* failed with ssl_mode 'required'"):  # mysqlclient too
            connect_fast(dataclasses.replace(profile, ssl_mode="required"))
        return
    ca = Path(info.datadir) / "ca.pem"
    assert ca.is_file(), f"MySQL made no certificates in {info.datadir}"
    cur.execute("SET GLOBAL require_secure_transport = ON")
    try:
        with pytest.raises(ConnectError, match=r"TLS to .* failed with ssl_mode 'disabled'"):
            plan_tables(dataclasses.replace(profile, ssl_mode="disabled"), opts)
        verified = dataclasses.replace(profile, ssl_mode="verify_ca", ssl_ca=str(ca))
        assert _cipher(verified) != ""
        facts, plans = plan_tables(verified, opts)
        assert len(plans[0].chunks) == 3
        for fast in (True, False):
            rows = [r for c in plans[0].chunks
                    for b in SnapshotReader(verified, plans[0].schema, facts, opts, fast=fast).read(c).batches
                    for r in batch_to_rows(b)]
            assert sorted(r[:2] for r in rows) == [(i, f"v{i}") for i in range(1, 101)]
        start = server_end(verified, facts)
        cur.execute("UPDATE t SET v = 'tls' WHERE id = 5")
        phase = BinlogPhase(verified, facts, opts, {plans[0].schema.table: plans[0].schema},
                            {plans[0].schema.table: None})
        changes = [(c.op, c.values[:2]) for c in phase.changes(ReadFrom(start), server_end(verified, facts))]
        assert changes == [("-U", (5, "v5")), ("+U", (5, "tls"))]
        assert _cipher(dataclasses.replace(profile, ssl_mode="required")) != ""
        assert _cipher(dataclasses.replace(profile, ssl_mode="required"), fast=True) != ""  # mysqlclient
        rows = [r for c in plans[0].chunks for b in SnapshotReader(dataclasses.replace(profile, ssl_mode="required"),
                                                                   plans[0].schema, facts, opts, fast=False
                                                                   ).read(c).batches for r in batch_to_rows(b)]
        assert len(rows) == 100
        with pytest.raises(ConnectError, match="TLS to .* failed with ssl_mode 'verify_identity'"):
            connect_fast(dataclasses.replace(verified, ssl_mode="verify_identity"))
        # the server's own certificate names no host: verify_identity refuses it; a CA that did not sign it too
        with pytest.raises(ConnectError, match="TLS to .* failed with ssl_mode 'verify_identity'"):
            plan_tables(dataclasses.replace(verified, ssl_mode="verify_identity"), opts)
        other_ca = next(p for p in (Path(info.datadir) / "server-cert.pem", Path(info.datadir) / "client-cert.pem")
                        if p.is_file())
        with pytest.raises(ConnectError, match="TLS to .* failed with ssl_mode 'verify_ca'"):
            plan_tables(dataclasses.replace(verified, ssl_ca=str(other_ca)), opts)
        with pytest.raises(ConnectError, match="cannot read the CA certificate file '/nonexistent/ca.pem'"):
            plan_tables(dataclasses.replace(verified, ssl_ca="/nonexistent/ca.pem"), opts)
    finally:
        cur.execute("SET GLOBAL require_secure_transport = OFF")

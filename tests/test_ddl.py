"""Which DDL statements stop the binlog phase for a captured table (pure: no server)."""

from __future__ import annotations

import pytest

from mysql_cdc.ddl import ddl_tables
from mysql_cdc.ids import TableId

T, U = TableId("d", "t"), TableId("d", "u")
G, H = TableId("d", "größe"), TableId("d", "表")


@pytest.mark.parametrize(("statement", "default_db", "hit"), [
    ("ALTER TABLE t ADD COLUMN c INT", "d", [T]),
    ("alter table `d`.`t` drop column v", "other", [T]),
    ("/* ApplicationName=x */ ALTER TABLE t MODIFY v BIGINT", "d", [T]),
    ("DROP TABLE IF EXISTS `t`", "d", [T]),
    ("RENAME TABLE t TO t_old, t_new TO t", "d", [T]),
    ("TRUNCATE TABLE t", "d", [T]),
    ("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)", "d", [T]),
    ("CREATE INDEX i ON t (v)", "d", [T]),
    ("ALTER TABLE other.t ADD c INT", "d", []),  # same name, another database
    ("ALTER TABLE t ADD c INT", "other", []),  # unqualified name in another default database
    ("CREATE TABLE t (id INT PRIMARY KEY, v INT)", "d", []),  # a creation changes no existing rows
    ("CREATE TEMPORARY TABLE IF NOT EXISTS t (id INT)", "d", []),
    ("CREATE TABLE t2 LIKE t", "d", []),
    ("INSERT INTO t VALUES (1, 2)", "d", []),
    ("ALTER TABLE `t``x` ADD c INT", "d", []),
    ("ALTER TABLE u ADD c INT, RENAME TO t", "d", [T, U]),
    # unquoted names outside ASCII (they went undetected, and the stream died later with raw Arrow errors)
    ("ALTER TABLE größe ADD c INT", "d", [G]),
    ("alter table d.größe drop column v", "x", [G]),
    ("ALTER TABLE größer ADD c INT", "d", []),
    ("DROP TABLE 表", "d", [H]),
    # comments of each kind and MariaDB's SET STATEMENT before the verb (they hid the statement)
    ("-- deploy 42\nALTER TABLE t ADD c INT", "d", [T]),
    ("# note\nDROP TABLE t", "d", [T]),
    ("SET STATEMENT max_statement_time=10 FOR ALTER TABLE t ADD c INT", "d", [T]),
])
def test_ddl_tables(statement: str, default_db: str, hit: list[TableId]) -> None:
    assert ddl_tables(statement, default_db, {T, U, G, H}) == hit

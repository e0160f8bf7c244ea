"""Small helpers for integration tests: loading rows, recording where each write landed in the binlog."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from state.offsets import BinlogOffset, GtidSet


def status_sql(conn: Any) -> str:
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    v = str(cur.fetchone()[0])
    cur.close()
    return "SHOW MASTER STATUS" if "mariadb" in v.lower() else "SHOW BINARY LOG STATUS"


def binlog_end(conn: Any) -> tuple[str, int, str]:
    cur = conn.cursor()
    cur.execute(status_sql(conn))
    row = cur.fetchone()
    cur.close()
    gtids = str(row[4]).replace("\n", "") if len(row) > 4 and row[4] is not None else ""
    return str(row[0]), int(row[1]), gtids


def insert_rows(conn: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], batch: int = 2000
                ) -> None:
    cols = ", ".join(f"`{c}`" for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    cur = conn.cursor()
    for lo in range(0, len(rows), batch):
        cur.executemany(f"INSERT INTO `{table}` ({cols}) VALUES ({marks})", rows[lo:lo + batch])
    cur.close()


@dataclass(frozen=True)
class Write:
    sql: str
    params: tuple[Any, ...]
    file: str
    pos: int
    gtids: str

    def covered_by(self, high: BinlogOffset) -> bool:
        """Whether the high watermark includes this write (GTID membership, or binlog position)."""
        if high.kind == "gtid":
            return GtidSet.parse(self.gtids).issubset(high.gtid_set())
        return (self.file, self.pos) <= (high.file, high.pos)


class Writer:
    """Runs autocommit writes one at a time on an otherwise idle server and records where each ended."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.writes: list[Write] = []

    def __call__(self, sql: str, *params: Any) -> None:
        cur = self.conn.cursor()
        cur.execute(sql, params)
        cur.close()
        file, pos, gtids = binlog_end(self.conn)
        self.writes.append(Write(sql, params, file, pos, gtids))

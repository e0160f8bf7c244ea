"""Row-image decoding behind one small interface: :func:`read_row_changes` yields :class:`BinlogRow`.

Today the decoder is python-mysql-replication; a faster one can replace it here without touching the
correction or emit rules. Each concurrent binlog connection claims its own replica server id from the
configured range with a server-side user lock (``GET_LOCK``), so two readers never share an id (sharing one
makes the server drop the older connection, and events are lost).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mysql_cdc.errors import BinlogError
from mysql_cdc.options import ConnectionProfile
from planner.chunks import TableId
from planner.connect import connect
from state.offsets import BinlogOffset, GtidSet

LOCK_PREFIX = "mysql_cdc.server_id."
READ_TIMEOUT = 120  # seconds without a byte from the server before a binlog read fails instead of hanging


@dataclass(frozen=True)
class BinlogRow:
    database: str
    table: str
    op: str  # insert | update | delete
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    file: str
    pos: int  # end position of the event that carried the row
    gtid: str | None
    timestamp: int


@contextlib.contextmanager
def claimed_server_id(profile: ConnectionProfile, ids: range, prefer: int | None = None) -> Iterator[int]:
    """Hold a replica server id from ``ids`` for the duration of the block (a GET_LOCK per id)."""
    conn = connect(profile)
    start = prefer if prefer is not None else random.randrange(len(ids))
    try:
        cur = conn.cursor()
        for k in range(len(ids)):
            sid = ids[(start + k) % len(ids)]
            cur.execute("SELECT GET_LOCK(%s, 0)", (LOCK_PREFIX + str(sid),))
            if cur.fetchone()[0] == 1:
                try:
                    yield sid
                finally:
                    with contextlib.suppress(Exception):
                        cur.execute("SELECT RELEASE_LOCK(%s)", (LOCK_PREFIX + str(sid),))
                return
        raise BinlogError(f"all {len(ids)} replica server ids {ids.start}-{ids.stop - 1} are in use by other "
                          "readers; widen server_id_range or run fewer readers at once")
    finally:
        conn.close()


def read_row_changes(profile: ConnectionProfile, server_id: int, start: BinlogOffset, tables: set[TableId],
                     *, flavor: str, use_gtid: bool,
                     done: Callable[[str | None, str, int], bool]) -> Iterator[BinlogRow]:
    """Row changes of ``tables`` from ``start`` (exclusive): by GTID auto-positioning from ``start.gtids``
    when ``use_gtid``, else from ``start.file``/``start.pos``. Stops at the end of the binlog, or when
    ``done(gtid, file, pos)`` says so at a transaction boundary (before a new GTID, after a commit)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    settings = {"host": profile.host, "port": profile.port, "user": profile.user, "password": profile.password,
                "charset": "utf8mb4", "connect_timeout": max(1, int(round(profile.connect_timeout))),
                "init_command": "SET SESSION time_zone = '+00:00'", "read_timeout": READ_TIMEOUT}
    kw: dict[str, Any] = {}
    if use_gtid:
        kw["auto_position"] = start.gtids or ""
    else:
        kw.update(log_file=start.file, log_pos=start.pos, resume_stream=True)
    try:
        stream = BinLogStreamReader(
            connection_settings=settings, server_id=server_id, blocking=False,
            only_events=[GtidEvent, MariadbGtidEvent, XidEvent, QueryEvent, RotateEvent, WriteRowsEvent,
                         UpdateRowsEvent, DeleteRowsEvent],
            only_schemas=sorted({t.database for t in tables}), only_tables=sorted({t.table for t in tables}),
            # the library's MariaDB mode starts from a GTID state and ignores file/position
            is_mariadb=flavor == "mariadb" and use_gtid, enable_logging=False, freeze_schema=True, **kw)
    except Exception as e:  # pragma: no cover - constructor does not connect
        raise BinlogError(f"cannot open the binlog from {start.to_dict()!r}: {type(e).__name__}") from e
    wanted = {(t.database, t.table) for t in tables}
    file = start.file
    gtid: str | None = None
    try:
        for ev in stream:
            pos = int(ev.packet.log_pos)
            if isinstance(ev, RotateEvent):
                file = ev.next_binlog
                continue
            if isinstance(ev, GtidEvent | MariadbGtidEvent):
                if done(gtid, file, pos):
                    return
                gtid = str(ev.gtid)
                continue
            if isinstance(ev, XidEvent) or (isinstance(ev, QueryEvent) and ev.query == "COMMIT"):
                if done(gtid, file, pos):
                    return
                continue
            if isinstance(ev, QueryEvent):
                continue
            if (ev.schema, ev.table) not in wanted:
                continue
            ts = int(ev.timestamp)
            for row in ev.rows:
                if isinstance(ev, WriteRowsEvent):
                    yield BinlogRow(ev.schema, ev.table, "insert", None, row["values"], file, pos, gtid, ts)
                elif isinstance(ev, UpdateRowsEvent):
                    yield BinlogRow(ev.schema, ev.table, "update", row["before_values"], row["after_values"],
                                    file, pos, gtid, ts)
                else:
                    yield BinlogRow(ev.schema, ev.table, "delete", row["values"], None, file, pos, gtid, ts)
    except BinlogError:
        raise
    except Exception as e:
        code = getattr(e, "args", [None])[0]
        if code == 1236:
            raise BinlogError(f"the server cannot send the binlog from {start.to_dict()!r}: {e.args[1]!r}; the "
                              "needed binlog files were purged: take a new snapshot") from None
        raise
    finally:
        stream.close()


def gtid_window_done(needed: GtidSet) -> Callable[[str | None, str, int], bool]:
    """A ``done`` test for a GTID backfill: true once every transaction of ``needed`` has passed."""
    remaining = needed.count()
    seen: set[str] = set()

    def done(gtid: str | None, file: str, pos: int) -> bool:
        if gtid is not None and gtid not in seen and needed.contains_gtid(gtid):
            seen.add(gtid)
        return len(seen) >= remaining

    return done


def position_window_done(high: BinlogOffset) -> Callable[[str | None, str, int], bool]:
    """A ``done`` test for a position backfill: true once the stream reached the high watermark."""
    target = high.position_key()

    def done(gtid: str | None, file: str, pos: int) -> bool:
        return BinlogOffset(file, pos).position_key() >= target

    return done

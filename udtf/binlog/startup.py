"""Where a binlog read starts and ends: the startup modes (after the recorded snapshot, earliest, latest, an
offset, a timestamp), the server's binlog files and end, and the smallest high watermark the binlog phase
starts from."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mysql_cdc.connect import ServerFacts, connect
from mysql_cdc.errors import BinlogError, ConfigError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset, MariadbGtidPos, binlog_file_key, is_mariadb_gtids
from mysql_cdc.options import CdcOptions
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.udtf.binlog.emit import EmitRule
from mysql_cdc.xa import PendingXa


@dataclass(frozen=True)
class ReadFrom:
    """Where a binlog read starts: a transaction boundary, or (MySQL) every transaction not in a GTID set; and
    the XA transactions prepared before it and still open there (:mod:`mysql_cdc.xa`), whose rows the read
    delivers at their commit."""

    offset: BinlogOffset
    auto_position: bool = False
    skip_before: int | None = None  # startup from a timestamp: events committed before it are not emitted
    xa: tuple[PendingXa, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"file": self.offset.file, "pos": self.offset.pos}
        if self.auto_position:
            d["gtids"] = self.offset.gtids or ""
        if self.skip_before is not None:
            d["skip_before"] = self.skip_before
        if self.xa:
            d["xa"] = [p.to_dict() for p in self.xa]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReadFrom:
        auto = "gtids" in d
        off = BinlogOffset(str(d["file"]), int(d["pos"]), d.get("gtids"), "gtid" if auto else "position")
        sb = d.get("skip_before")
        return cls(off, auto, None if sb is None else int(sb), tuple(PendingXa.from_dict(x) for x in d.get("xa", ())))


def server_end(profile: ConnectionProfile, facts: ServerFacts, conn: Any | None = None) -> BinlogOffset:
    """The binlog end now (a transaction boundary), with MySQL's executed GTID set."""
    own = conn is None
    conn = conn or connect(profile)
    try:
        cur = conn.cursor()
        cur.execute(facts.status_sql)
        row = cur.fetchone()
        cur.close()
    finally:
        if own:
            conn.close()
    if row is None:
        raise BinlogError("the server reports no binlog position: enable log_bin")
    gtids = str(row[4]).replace("\n", "") if facts.flavor == "mysql" and len(row) > 4 and row[4] else None
    return BinlogOffset(str(row[0]), int(row[1]), gtids, "position")


def binary_logs(profile: ConnectionProfile) -> list[tuple[str, int]]:
    """The server's binary log files and their sizes in bytes, oldest first (``SHOW BINARY LOGS``)."""
    conn = connect(profile)
    try:
        cur = conn.cursor()
        cur.execute("SHOW BINARY LOGS")
        rows = [(str(r[0]), int(r[1])) for r in cur.fetchall()]
        cur.close()
    finally:
        conn.close()
    return sorted(rows, key=lambda r: binlog_file_key(r[0]))


def earliest(profile: ConnectionProfile) -> BinlogOffset:
    files = binary_logs(profile)
    if not files:
        raise BinlogError("the server lists no binary logs: enable log_bin")
    return BinlogOffset(files[0][0], 4)


def parse_offset(text: str) -> ReadFrom:
    """A startup offset: ``file:pos``, a JSON offset dict, or a MySQL GTID set (read by auto-positioning)."""
    import json

    t = text.strip()
    if t.startswith("{"):
        try:
            return ReadFrom.from_dict(json.loads(t))
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"bad startup_offset {text!r}: {e}; expected 'file:pos' or a GTID set") from e
    if is_mariadb_gtids(t):
        return ReadFrom(BinlogOffset("", 0, str(MariadbGtidPos.parse(t)), "gtid"), auto_position=True)
    file, sep, pos = t.rpartition(":")
    if sep and file and pos.isdigit() and "-" not in pos and not file.count(":"):
        return ReadFrom(BinlogOffset(file, int(pos)))
    from mysql_cdc.offsets import GtidSet

    try:
        gs = GtidSet.parse(t)
    except ConfigError:
        gs = GtidSet()
    if gs:
        return ReadFrom(BinlogOffset("", 0, str(gs), "gtid"), auto_position=True)
    raise ConfigError(f"bad startup_offset {text!r}; expected 'binlog.000003:4', a JSON offset, a MySQL GTID set "
                      "or a MariaDB GTID position ('0-1-100')")


# epoch seconds beyond this (the year 5138) are taken for milliseconds written without their unit
_MAX_EPOCH_SECONDS = 10**11


def parse_timestamp(text: str) -> int:
    """A startup timestamp as epoch seconds: seconds, milliseconds with their unit (Flink's
    ``scan.startup.timestamp-millis``), or ISO-8601 (UTC unless it says otherwise).

    >>> parse_timestamp("1700000000"), parse_timestamp("1700000000123ms"), parse_timestamp("2023-11-14T22:13:20Z")
    (1700000000, 1700000000, 1700000000)
    """
    t = text.strip()
    unit = 1
    if t.lower().endswith("ms"):
        t, unit = t[:-2].strip(), 1000
    elif t.lower().endswith("s") and t[:-1].strip().replace(".", "", 1).isdigit():
        t = t[:-1].strip()
    try:
        seconds = float(t) / unit
    except ValueError:
        seconds = None
    if seconds is not None:
        if unit == 1 and seconds >= _MAX_EPOCH_SECONDS:
            raise ConfigError(f"startup_timestamp {text!r} is not a time in seconds (it would be after the year "
                              f"5000): for milliseconds write {t + 'ms'!r}")
        return int(seconds)
    if unit != 1:
        raise ConfigError(f"bad startup_timestamp {text!r}; milliseconds are a number followed by 'ms'")
    try:
        d = dt.datetime.fromisoformat(t.replace("Z", "+00:00") if t.endswith("Z") else t)
    except ValueError:
        raise ConfigError(f"bad startup_timestamp {text!r}; expected seconds since the epoch, milliseconds "
                          "with 'ms' ('1700000000000ms') or ISO-8601 such as '2026-11-22T10:00:00+00:00'") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.timezone.utc)
    return int(d.timestamp())


def check_offset_exists(profile: ConnectionProfile, offset: BinlogOffset) -> None:
    """A startup offset names a binlog file the server has, at a position inside it (else one clear error,
    instead of an empty result)."""
    logs = binary_logs(profile)
    files = dict(logs)
    names = [name for name, _ in logs]
    have = f"the server has {names[0]} .. {names[-1]}" if names else "the server lists no binary logs"
    if offset.file not in files:
        purged = bool(names) and binlog_file_key(offset.file) < binlog_file_key(names[0])
        why = "was purged" if purged else "does not exist"
        raise ConfigError(f"startup_offset names binlog file {offset.file!r}, which {why} ({have}); give a file "
                          "and position from SHOW BINARY LOGS / SHOW BINLOG EVENTS, or start from 'earliest'")
    if offset.pos < 4 or offset.pos > files[offset.file]:
        raise ConfigError(f"startup_offset position {offset.pos} is outside {offset.file!r}, which is "
                          f"{files[offset.file]} bytes long; give the end position of an event (SHOW BINLOG EVENTS)")


def rules_start(rules: Mapping[TableId, EmitRule]) -> ReadFrom:
    """Where the binlog phase starts: the smallest high watermark over all captured tables. With GTID
    watermarks, every transaction not in the smallest executed set (GTID auto-positioning), since a
    transaction can sit in the binlog before that position and still be missing from the set."""
    starts = [r.start for r in rules.values()]
    first = min(starts)
    if first.kind == "gtid":
        from mysql_cdc.offsets import GtidSet

        common = GtidSet.parse(starts[0].gtids)
        for s in starts[1:]:
            common = common.intersection(GtidSet.parse(s.gtids))
        return ReadFrom(BinlogOffset(first.file, first.pos, str(common), "gtid"), auto_position=True)
    return ReadFrom(BinlogOffset(first.file, first.pos))


def read_from(profile: ConnectionProfile, facts: ServerFacts, opts: CdcOptions,
              rules: Mapping[TableId, EmitRule] | None) -> ReadFrom:
    """Where the binlog read starts under ``opts.startup`` (``initial`` needs the recorded ``rules``)."""
    mode = opts.startup
    if mode == "initial":
        if not rules:
            raise StateError("startup 'initial' needs the recorded snapshot of the tables (state_dir)")
        return rules_start(rules)
    if mode == "latest":
        end = server_end(profile, facts)
        return ReadFrom(BinlogOffset(end.file, end.pos))
    if mode == "earliest":
        return ReadFrom(earliest(profile))
    if mode == "offset":
        rf = parse_offset(opts.startup_offset or "")
        if not rf.auto_position:
            check_offset_exists(profile, rf.offset)
        return rf
    if mode == "timestamp":
        return ReadFrom(earliest(profile), skip_before=parse_timestamp(opts.startup_timestamp or ""))
    raise ConfigError(f"startup {mode!r} reads no binlog; use initial, latest, earliest, offset or timestamp")


def parse_end(text: str, profile: ConnectionProfile, facts: ServerFacts) -> BinlogOffset:
    if text.strip().lower() == "latest":
        return server_end(profile, facts)
    try:
        rf = parse_offset(text)
    except ConfigError:
        rf = None
    if rf is None or rf.auto_position:
        raise ConfigError(f"bad end {text!r}; expected 'latest' or 'file:pos'")
    return rf.offset

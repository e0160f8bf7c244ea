"""What exists because of python-mysql-replication: its decoding adapted so that values come as stored, the
row images it decodes (where no plan compiled per table map does: :mod:`.rowimage`), and the events and
images it would decode wrongly, refused with the setting to fix."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from mysql_cdc.errors import BinlogError, ServerSettingError
from mysql_cdc.jsontext import JSON_NULL, JsonOpaque
from mysql_cdc.types import FieldType
from mysql_cdc.udtf.binlog.compressed import BLOB_COMPRESSED, COMPRESSED_TYPES, VARCHAR_COMPRESSED, inflated
from mysql_cdc.udtf.binlog.oldtemporal import OLD_TYPES, TIME, old_size, old_value
from mysql_cdc.udtf.convert import MemberIndex, negative_time_fix


def library_image(row: dict[str, Any], prefix: str, where: str) -> dict[str, Any]:
    """A row image from the library's row dict. The library decodes an empty SET as None, like NULL; its
    ``none_sources`` tell them apart (every None-making branch but JSON's records why), and an empty SET
    becomes an empty set here. A column left out of the image (a session that set binlog_row_image to
    MINIMAL or NOBLOB) is an error: reading it as NULL would be a wrong value."""
    values: dict[str, Any] = row[f"{prefix}values"]
    sources = row.get(f"{prefix}none_sources") or {}
    if not sources:
        return values
    missing = [k for k, why in sources.items() if why == "cols bitmap"]
    if missing:
        raise ServerSettingError(
            f"a change to {where} was logged without column(s) "
            f"{', '.join(map(repr, missing))}: the writing session set binlog_row_image to MINIMAL or NOBLOB, so "
            "the binlog does not hold the row; keep binlog_row_image=FULL in every session (revoke the "
            "privilege to set it) and take a new snapshot of the table")
    empty = [k for k, why in sources.items() if why == "empty set"]
    if not empty:
        return values
    return {**values, **{k: frozenset() for k in empty}}


# the types that have a character set in FULL metadata (MariaDB's compressed VARCHAR and BLOB too)
_STRING_TYPES = (FieldType.VARCHAR, FieldType.VAR_STRING, FieldType.STRING, FieldType.BLOB, *COMPRESSED_TYPES)
_ADAPTING = threading.Lock()  # adapt_library's changes are made once, by one thread


def check_described(columns: list[Any], where: str) -> None:
    """A table map written while binlog_row_metadata was not FULL lacks column names, ENUM/SET members and
    character sets: its rows would decode to wrong values (an ENUM as NULL, text as UTF-8)."""
    lacking = [i for i, c in enumerate(columns) if c.name is None
               or (c.type == FieldType.ENUM and c.enum_values is None)
               or (c.type == FieldType.SET and c.set_values is None)
               or (c.type in _STRING_TYPES and c.character_set_name is None)]
    if lacking:
        raise ServerSettingError(
            f"the change to {where} was logged without column metadata (column positions {lacking}): "
            "binlog_row_metadata was not FULL when it was written; keep binlog_row_metadata=FULL and take a new "
            "snapshot of the table")


def refuse_partial_json(rows: list[dict[str, Any]], where: str) -> None:
    """An update logged with binlog_row_value_options=PARTIAL_JSON carries a diff, not the new JSON value."""
    from pymysqlreplication.json_binary import JsonDiff

    for row in rows:
        diffs = [k for k, v in row["after_values"].items() if isinstance(v, JsonDiff)]
        if diffs:
            raise ServerSettingError(
                f"the update of {where} was logged as a partial JSON change of column(s) {diffs!r} "
                "(binlog_row_value_options=PARTIAL_JSON in the writing session): the binlog does not hold the new "
                "value. SET GLOBAL binlog_row_value_options = '', keep sessions from setting it, and take a new "
                "snapshot of the table")


def _stored_bytes(self: Any, size: int, _column: Any) -> bytes:
    """The library's string reader without its decoding: the value as stored."""
    return bytes(self.packet.read_length_coded_pascal_string(size))


def _member_indexes(self: Any, length: int) -> list[list[MemberIndex]] | None:
    """ENUM/SET member lists of a table map as positions (see :class:`udtf.convert.MemberIndex`)."""
    packet = self.packet
    read_until = packet.read_bytes + length
    if packet.read_bytes >= read_until:
        return None
    out = []
    while packet.read_bytes < read_until:
        count = packet.read_length_coded_binary()
        for _ in range(count):
            packet.read_variable_length_string()
        out.append([MemberIndex(i) for i in range(count)])
    return out


def _json_opaque(data: bytes) -> JsonOpaque | None:
    """An opaque value of binary JSON (its field type, a length, the bytes) as a :class:`JsonOpaque`."""
    from pymysqlreplication.util.bytes import decode_variable_length

    if len(data) < 2:
        return None
    length, n = decode_variable_length(data[1:])
    return JsonOpaque(data[0], bytes(data[1 + n:1 + n + length]))


def _or_none(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The library's reader of a DATE or an old-format DATETIME (MySQL before 5.6.4, MariaDB's
    ``mysql56_temporal_format=OFF``), giving None where the library raised ValueError: after reading the value's
    bytes, it made a date Python has not (year 0, or ``2024-02-30`` under ALLOW_INVALID_DATES), which stopped the
    read. Its zero dates were None already.

    >>> import datetime as dt
    >>> _or_none(lambda event: dt.date(2024, 2, 30))(None), _or_none(lambda event: dt.date(2024, 2, 29))(None)
    (None, datetime.date(2024, 2, 29))
    """
    @functools.wraps(read)
    def read_or_none(self: Any) -> Any:
        try:
            return read(self)
        except ValueError:
            return None
    return read_or_none


def _old_and_compressed(read: Callable[..., Any]) -> Callable[..., Any]:
    """The library's reader of one value, reading two kinds of columns it misread:

    - a column the table map logs in an old temporal format, with the precision
      :meth:`udtf.binlog.rowimage.RowDecoders.for_library` gave it (``mysql_cdc_fsp``), as
      :mod:`udtf.binlog.oldtemporal` says: the library read MariaDB 5.3's DATETIME(2) as 8 bytes where it holds 6,
      and a negative classic TIME as unsigned. A negative TIME with a fraction comes as the library gives a TIME2
      (:func:`udtf.convert.negative_time_fix`, which the fix-up undoes);
    - MariaDB's compressed VARCHAR and BLOB (:mod:`udtf.binlog.compressed`), which it did not know: their stored
      bytes inflated, as the library's strings come (:func:`_stored_bytes`)."""
    from pymysqlreplication.bitmap import BitGet

    @functools.wraps(read)
    def read_values_name(self: Any, column: Any, null_bitmap: Any, null_bitmap_index: int, is_partial: bool,
                         cols_bitmap: Any, unsigned: bool, i: int) -> Any:
        fsp: int | None = getattr(column, "mysql_cdc_fsp", None)
        ours = column.type in COMPRESSED_TYPES or (fsp is not None and column.type in OLD_TYPES)
        if not ours or BitGet(cols_bitmap, i) == 0 or self._is_null(null_bitmap, null_bitmap_index):
            return read(self, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i)
        if column.type in COMPRESSED_TYPES:
            size = (2 if column.max_length > 255 else 1) if column.type == VARCHAR_COMPRESSED else column.length_size
            try:
                return inflated(bytes(self.packet.read_length_coded_pascal_string(size)))
            except ValueError as e:
                raise BinlogError(f"a rows event of {self.schema}.{self.table} could not be decoded (column "
                                  f"{column.name!r}: {e}); a binlog this reader misreads is a bug: report it with "
                                  "the table's definition") from e
        fsp = fsp or 0
        v = old_value(column.type, bytes(self.packet.read(old_size(column.type, fsp))), fsp)
        return negative_time_fix(v) if column.type == TIME and fsp else v
    return read_values_name


def _compressed_metadata(parse: Callable[..., Any]) -> Callable[..., Any]:
    """The library's parsing of a table map's column, reading the metadata of MariaDB's compressed VARCHAR (a
    VARCHAR's: the maximum length, 2 bytes) and BLOB (a BLOB's: the size of its length, 1 byte), which it did not
    know: it read none, and took the next columns' metadata from the wrong bytes."""
    @functools.wraps(parse)
    def parse_column_definition(self: Any, column_type: int, packet: Any) -> None:
        parse(self, column_type, packet)
        if column_type == VARCHAR_COMPRESSED:
            self.max_length = int.from_bytes(packet.read(2), "little")
        elif column_type == BLOB_COMPRESSED:
            self.length_size = packet.read_uint8()
    return parse_column_definition


def adapt_library() -> None:
    """Eight changes to python-mysql-replication's decoding (process-wide; this package is its only user in
    a Spark worker), so that :mod:`udtf.convert` decodes from the stored bytes with the column's definition,
    and more lost connections read on after a reconnect:

    - strings (text and binary) come as their stored bytes: the library decodes text with the Python codec
      named like the MySQL character set, which is wrong for utf16/ucs2/utf32 (big-endian in MySQL), latin1
      (five bytes) and others, and missing for some (it then keeps the bytes anyway, after a failed codec
      lookup per value);
    - ENUM and SET members come as positions: the library decodes member names as UTF-8 whatever the column's
      character set and makes a name it cannot decode '';
    - a value in binary JSON that JSON has no type for (DECIMAL, dates and times, binary data) comes as a
      :class:`mysql_cdc.jsontext.JsonOpaque` of its type and bytes: the library made binary data lossy text and a
      TIME a time of day;
    - MySQL's JSON null literal comes as :data:`mysql_cdc.jsontext.JSON_NULL`: the library gives None, and its
      ``none_sources`` cannot tell that from SQL NULL (it reports "null" for any None without a recorded
      reason, and the reasons are kept per event, not per row);
    - a DATE or an old-format DATETIME Python has not (year 0, or ``2024-02-30`` under ALLOW_INVALID_DATES)
      comes as None (:func:`_or_none`), as its zero dates do and as a SELECT gives it: the library raised
      ValueError, which stopped the read;
    - DATETIME, TIME and TIMESTAMP in the old formats are read with their column's precision
      (:func:`_old_and_compressed`): MariaDB 5.3's DATETIME(2) misread the rest of its row, a classic negative
      TIME came out as a large positive one;
    - MariaDB's compressed columns are parsed in the table map and read inflated (:func:`_compressed_metadata`,
      :func:`_old_and_compressed`): the library stopped on them ("Unknown MySQL column type: 141").
    """
    with _ADAPTING:  # by one thread at a time: the table map's parsing must not be wrapped twice
        _adapt()


def _adapt() -> None:
    from pymysqlreplication import binlogstream, json_binary
    from pymysqlreplication.column import Column
    from pymysqlreplication.event import QueryEvent
    from pymysqlreplication.exceptions import StatusVariableMismatch
    from pymysqlreplication.packet import BinLogPacketWrapper
    from pymysqlreplication.row_event import RowsEvent, TableMapEvent

    # the errors after which the library connects again and reads on from the last event it read: also a server
    # shutting down, a connection killed (MariaDB), a packet cut short and one closed for inactivity (its own list
    # has 2006 and 2013 only); the new connection waits for the server as connect() does (guarded_connect)
    expected = binlogstream.MYSQL_EXPECTED_ERROR_CODES
    expected.extend(c for c in (1053, 1927, 2055, 4031) if c not in expected)
    setattr(RowsEvent, "_RowsEvent__read_string", _stored_bytes)  # noqa: B010 (a name-mangled method)
    TableMapEvent._read_type_values = _member_indexes
    json_binary.parse_opaque = _json_opaque
    read_json = BinLogPacketWrapper.read_binary_json
    if getattr(read_json, "_mysql_cdc", False):
        return

    # - a query event's status variables unknown to the library (MySQL 9.7 logs 0x12, the default utf8mb4
    #   collation, with statement-format DML) made it raise; the block's length is in the post-header, so the
    #   rest is skipped (only the schema and the statement are used here).
    advance, read_var = QueryEvent._advance_to_payload, QueryEvent._read_status_vars_value_for_key

    def advance_to_payload(self: Any, known: int) -> Any:
        out = advance(self, known)
        self._mysql_cdc_status_start = self.packet.read_bytes
        return out

    def read_status_var(self: Any, key: int) -> None:
        try:
            read_var(self, key)
        except StatusVariableMismatch:
            start = getattr(self, "_mysql_cdc_status_start", None)
            if start is None:
                raise
            self.packet.advance(start + self.status_vars_length - self.packet.read_bytes)

    QueryEvent._advance_to_payload = advance_to_payload
    QueryEvent._read_status_vars_value_for_key = read_status_var

    def read_binary_json(self: Any, size: int, is_partial: bool) -> Any:
        value = read_json(self, size, is_partial)
        return JSON_NULL if value is None and not is_partial else value

    read_binary_json._mysql_cdc = True  # type: ignore[attr-defined]
    BinLogPacketWrapper.read_binary_json = read_binary_json
    for name in ("_RowsEvent__read_date", "_RowsEvent__read_datetime"):  # name-mangled methods
        setattr(RowsEvent, name, _or_none(getattr(RowsEvent, name)))
    read_values = RowsEvent._RowsEvent__read_values_name  # name-mangled methods
    setattr(RowsEvent, "_RowsEvent__read_values_name", _old_and_compressed(read_values))  # noqa: B010
    parse_column = Column._Column__parse_column_definition
    setattr(Column, "_Column__parse_column_definition", _compressed_metadata(parse_column))  # noqa: B010
    # a compressed column has a character set in FULL metadata (MariaDB gives one to every column that has one):
    # not counted, the next string columns took their neighbours' collations
    is_character = TableMapEvent._is_character_column

    def is_character_column(column_type: int, dbms: str = "mysql") -> bool:
        return column_type in COMPRESSED_TYPES or bool(is_character(column_type, dbms=dbms))

    TableMapEvent._is_character_column = staticmethod(is_character_column)



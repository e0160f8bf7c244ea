"""The vocabulary of the rows every surface outputs: their metadata columns and ops.

Pure, no pyspark: the Spark adapters make these rows, the sync job and :func:`mysql_cdc.split` read them.

Every output row is the table's columns (typed; or, in a read of many tables, their values as JSON in
``__values``) and metadata: the op, where the row comes from (database, table, chunk) and where it is in the
binlog (a snapshot row: its chunk's high watermark). Changes apply in the order (``__file`` by numeric suffix,
``__pos``, ``__row``), which is the order of ``_change_seq`` for each key (an XA transaction's rows come at its
commit and keep the sequences of its prepare). Then Spark's change-data vocabulary: ``_change_type`` (insert,
update_preimage, update_postimage, delete; a snapshot row is an insert), ``_change_seq`` (a LONG growing with the
binlog order, 0 for snapshot rows: :func:`offsets.change_sequence`)
and ``_commit_timestamp`` (the transaction's commit time; NULL for snapshot rows).

>>> CHANGE_TYPES[BEFORE], [name for name, _ in META_COLUMNS][:3]
('update_preimage', ['__op', '__database', '__table'])
"""

from __future__ import annotations

from typing import Final, Literal

Op = Literal["r", "+I", "-U", "+U", "-D", "T", "-R"]
SNAPSHOT: Final = "r"  # a row of a chunk, exact at its high watermark
INSERT: Final = "+I"
BEFORE: Final = "-U"  # an update's before image
AFTER: Final = "+U"  # an update's after image
DELETE: Final = "-D"
# A T row (a read of many tables, schema_changes follow) says that every row of its table before it is gone: the
# table was dropped, truncated, renamed away, or changed so that it is snapshotted again, whose rows then follow
# as r rows. Its __values is {} and its _change_seq orders it among the changes.
RESET_OP: Final = "T"
# A -R row says the same of the rows in one key range of its table (a range read again on demand, whose rows
# follow as r rows): __position holds the range as JSON, {"file", "pos", "range": {"key_columns", "start",
# "end", ...}} (mysql_cdc.keyrange; start and end: whole keys or null, the end excluded; "keys" or "held", when
# there, the keys themselves: README, Capture a whole database). Its __values is {}.
RANGE_RESET_OP: Final = "-R"
RESETS: Final = frozenset({RESET_OP, RANGE_RESET_OP})
CHANGE_TYPES: dict[str, str] = {SNAPSHOT: "insert", INSERT: "insert", BEFORE: "update_preimage",
                                AFTER: "update_postimage", DELETE: "delete", RESET_OP: "truncate",
                                RANGE_RESET_OP: "delete_range"}

OP_COLUMN: Final = "__op"
DATABASE_COLUMN: Final = "__database"
TABLE_COLUMN: Final = "__table"
POSITION_COLUMN: Final = "__position"
FILE_COLUMN: Final = "__file"
POS_COLUMN: Final = "__pos"
SEQ_COLUMN: Final = "_change_seq"
COMMIT_COLUMN: Final = "_commit_timestamp"
VALUES_COLUMN: Final = "__values"  # a read of many tables: the row's values as JSON (mysql_cdc.rowjson)

META_COLUMNS: tuple[tuple[str, str], ...] = (
    (OP_COLUMN, "STRING"), (DATABASE_COLUMN, "STRING"), (TABLE_COLUMN, "STRING"), ("__chunk_id", "STRING"),
    (POSITION_COLUMN, "STRING"), (FILE_COLUMN, "STRING"), (POS_COLUMN, "BIGINT"), ("__row", "INT"),
    ("__gtid", "STRING"), ("_change_type", "STRING"), (SEQ_COLUMN, "BIGINT"), (COMMIT_COLUMN, "TIMESTAMP"))
META_NULLABLE = frozenset({"__chunk_id", "__position", FILE_COLUMN, POS_COLUMN, "__row", "__gtid", COMMIT_COLUMN})

"""What the planner learns about a table: its columns (as the server describes them) and its keys.

Pure data, no driver. Filled by :mod:`planner.discover` from ``information_schema``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Final, Literal

from mysql_cdc.ids import TableId

# What a schema history entry says of a table from a binlog point on (see mysql_cdc.state.history): a snapshot
# described it, a DDL statement left its columns the same or changed them in place (evolve), or it leaves the
# capture until it is snapshotted again (reset). The last three are also the verdicts of udtf.schema.evolve.
HistoryAction = Literal["snapshot", "same", "evolve", "reset"]
ChangeKind = Literal["same", "evolve", "reset"]  # what a DDL statement did (udtf.schema.evolve.Verdict)
SNAPSHOT: Final = "snapshot"
SAME: Final = "same"
EVOLVE: Final = "evolve"
RESET: Final = "reset"


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    data_type: str  # lower case, as information_schema.COLUMNS.DATA_TYPE: "int", "varchar", "decimal", ...
    column_type: str  # full type text, e.g. "bigint unsigned", "decimal(65,30)", "enum('a','b')", "tinyint(1)"
    nullable: bool
    charset: str | None = None
    collation: str | None = None
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None
    generated: bool = False

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    @property
    def is_integral(self) -> bool:
        return self.data_type in ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")

    @property
    def is_text(self) -> bool:
        """A string compared under a (possibly case- or accent-insensitive) collation."""
        return (self.data_type in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set")
                and self.charset not in (None, "binary"))


@dataclass(frozen=True)
class TableSchema:
    table: TableId
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...]
    chunk_key: tuple[str, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> ColumnInfo:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def positions(self, names: tuple[str, ...]) -> tuple[int, ...]:
        idx = {c.name: i for i, c in enumerate(self.columns)}
        return tuple(idx[n] for n in names)

    @property
    def nullable_key(self) -> bool:
        """Whether a chunk key column may be NULL (its NULL keys then form a chunk of their own)."""
        return any(self.column(c).nullable for c in self.chunk_key)

    @property
    def identity(self) -> tuple[str, ...]:
        """Columns that identify a row under correction: the primary key, else every column."""
        return self.primary_key or self.column_names

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (kept in the state directory: a stream decodes with the schema it was planned with).

        >>> t = TableSchema(TableId("d", "t"), (ColumnInfo("id", "int", "int", False),), ("id",), ("id",))
        >>> TableSchema.from_dict(t.to_dict()) == t
        True
        """
        return {"database": self.table.database, "table": self.table.table,
                "columns": [asdict(c) for c in self.columns], "primary_key": list(self.primary_key),
                "chunk_key": list(self.chunk_key)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableSchema:
        names = {f.name for f in fields(ColumnInfo)}
        return cls(TableId(str(d["database"]), str(d["table"])),
                   tuple(ColumnInfo(**{k: v for k, v in c.items() if k in names}) for c in d["columns"]),
                   tuple(d["primary_key"]), tuple(d["chunk_key"]))

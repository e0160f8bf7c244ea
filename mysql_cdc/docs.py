"""Generate the README's option and type tables from the code (``python -m mysql_cdc.docs``); a test checks
that the README holds exactly these tables."""

from __future__ import annotations

from mysql_cdc.options import OPTIONS


def option_table() -> str:
    lines = ["| option | type | default | meaning |", "| --- | --- | --- | --- |"]
    for o in OPTIONS:
        default = "" if o.default is None else f"`{o.default}`"
        lines.append(f"| `{o.key}` | {o.type.__name__} | {default} | {o.meaning} |")
    return "\n".join(lines)


def type_table() -> str:
    """The type table: each MySQL type, the Spark type a capture reads it as, and the column type of a mirror
    table in Delta and in Iceberg (``udtf/sync/lake_types.py``: "same" where it is the Spark type)."""
    from mysql_cdc.types import TYPE_TABLE
    from mysql_cdc.udtf.sync.lake_types import lake_type_note

    def lake(spark: str, fmt: str) -> str:
        return "" if spark.startswith("(") else lake_type_note(spark, fmt) or "same"  # type: ignore[arg-type]

    lines = ["| MySQL / MariaDB | Spark | Delta | Iceberg | note |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r.mysql} | {r.spark} | {lake(r.spark, 'delta')} | {lake(r.spark, 'iceberg')} | {r.note} |"
              for r in TYPE_TABLE]
    return "\n".join(lines)


if __name__ == "__main__":
    print(option_table())
    print()
    print(type_table())

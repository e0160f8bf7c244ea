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
    from mysql_cdc.types import TYPE_TABLE

    lines = ["| MySQL / MariaDB | Spark | note |", "| --- | --- | --- |"]
    lines += [f"| {r.mysql} | {r.spark} | {r.note} |" for r in TYPE_TABLE]
    return "\n".join(lines)


if __name__ == "__main__":
    print(option_table())
    print()
    print(type_table())

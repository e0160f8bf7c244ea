"""Names of tables and columns: :class:`TableId`, and identifiers quoted and escaped for SQL text.

Pure: no driver. Every identifier that goes into SQL text is quoted here (backticks, a backtick doubled);
values never go into SQL text, they are bound as parameters (:mod:`mysql_cdc.sql`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mysql_cdc.errors import ConfigError


def quote_ident(name: str) -> str:
    """Quote a MySQL identifier with backticks, doubling any backtick inside.

    >>> quote_ident("my`table")
    '`my``table`'
    """
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True, order=True)
class TableId:
    database: str
    table: str

    def __str__(self) -> str:
        return f"{_id_part(self.database)}.{_id_part(self.table)}"

    def quoted(self) -> str:
        return f"{quote_ident(self.database)}.{quote_ident(self.table)}"

    @classmethod
    def parse(cls, text: str) -> TableId:
        """Parse ``db.table``; a part holding ``.``, ``:`` or a backtick is written in backticks.

        >>> TableId.parse("shop.orders"), TableId.parse("`my.db`.t")
        (TableId(database='shop', table='orders'), TableId(database='my.db', table='t'))
        """
        parts, rest = split_ident_parts(text, 2)
        if rest or len(parts) != 2:
            raise ConfigError(f"bad table name {text!r}; expected 'database.table'")
        return cls(parts[0], parts[1])


def _id_part(name: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_$\-]+", name):
        return name
    return quote_ident(name)


def split_ident_parts(text: str, count: int) -> tuple[list[str], str]:
    """Read up to ``count`` dot-separated identifiers (bare or backticked); return them and the unread rest."""
    parts: list[str] = []
    i = 0
    while len(parts) < count and i <= len(text):
        if i < len(text) and text[i] == "`":
            j = i + 1
            buf = []
            while True:
                k = text.find("`", j)
                if k < 0:
                    raise ConfigError(f"bad identifier in {text!r}: unclosed backtick")
                if text[k + 1 : k + 2] == "`":
                    buf.append(text[j : k + 1])
                    j = k + 2
                    continue
                buf.append(text[j:k])
                i = k + 1
                break
            parts.append("".join(buf))
        else:
            m = re.match(r"[^.:`]+", text[i:])
            if not m:
                break
            parts.append(m.group(0))
            i += m.end()
        if len(parts) < count and i < len(text) and text[i] == ".":
            i += 1
        else:
            break
    return parts, text[i:]


def ident(name: str) -> str:
    """A quoted identifier for text executed with parameters.

    >>> ident("100%"), ident("a`b")
    ('`100%%`', '`a``b`')
    """
    return quote_ident(name).replace("%", "%%")


def table_ident(table: TableId) -> str:
    return f"{ident(table.database)}.{ident(table.table)}"

"""How a row enters a verification's checksum: the same canonical text computed by the source server (MySQL SQL)
and by Spark over the mirror table (Spark SQL, one Python function for floats), so that equal values hash
equally on both sides and different values do not.

Pure rules (text only: no driver, no Spark). Each column becomes one short ASCII text, or ``~`` for NULL:

=========================================  ===========================================  =====================
capture type (README's type table)         source server (MySQL / MariaDB)              mirror (Spark)
=========================================  ===========================================  =====================
integers, YEAR, BIGINT UNSIGNED            the decimal digits (the column as it is,     ``CAST(c AS STRING)``
                                           ``c + 0`` for YEAR and ZEROFILL)
BOOLEAN (BIT(1), TINYINT(1) as boolean)    ``1`` / ``0`` (any non-zero is ``1``)        ``1`` / ``0``
DECIMAL(p,s)                               its digits at its scale, ``12.50``           the same (STRING
                                                                                        beyond 38 digits)
FLOAT, DOUBLE                              ``CAST(CAST(c AS DOUBLE) AS CHAR)``, a zero  :func:`double_text`
                                           ``0`` whatever its sign (``0.1``, ``1e21``)  (the server's rule)
BIT(n), n > 1                              hex of its ceil(n/8) bytes                   ``hex(c)``
DATE                                       ``2024-02-29`` (NULL where the capture has   the same
                                           none: a zero part, year 0, ``2024-02-30``)
DATETIME(p)                                ``2024-02-29 10:00:00.25`` (fraction         ``CAST(c AS STRING)``
                                           without trailing zeros; NULL as a DATE)
TIMESTAMP(p)                               microseconds since 1970 UTC (zero NULL)      ``unix_micros(c)``
TIME(p)                                    signed microseconds                          the mirror's BIGINT
CHAR, VARCHAR, ENUM, SET, INET/UUID        ``<bytes>|<its UTF-8 text>``                 the same
BINARY, VARBINARY (and undecodable CHAR)   ``<bytes>|<its bytes>``                      the same
TEXT, JSON / BLOB, geometry                SHA-256 of its UTF-8 text / of its bytes     ``sha2`` of the same
                                           (geometry: its WKB)
=========================================  ===========================================  =====================

A row's hash is the SHA-256 of its columns' texts joined by ``|`` (unambiguous: a string's text starts with its
length, no other text holds a ``|`` or is ``~``). The server writes most values by its own implicit conversion to
text, which is their canonical text already: the column itself, not ``CAST(c + 0 AS CHAR)`` or ``DATE_FORMAT``,
which took about a third of the texts' time (TPC-H orders, 1.5 M rows, the texts alone: MariaDB 10.11 3.5 s so,
2.3-2.4 s without; MySQL 9.7 4.5 s and 3.2 s). SHA-256 and not MD5: MySQL 9.7 has no ``MD5()`` or ``SHA1()`` any
more. The checksum of a set of rows is their count and the sum of each row hash's first 16 hex digits read as an
unsigned 64-bit number: order-independent, and exact on both sides (the server sums into DECIMAL, Spark sums its
three parts apart in BIGINT: :func:`mirror_values`). Rows go into :data:`BUCKETS`-many buckets by the CRC-32 of
their key's text, so that both sides group them alike whatever the column's collation; a differing bucket is
narrowed down to its keys.

>>> double_text(0.1), double_text(1e21), double_text(1.5e15), double_text(3e-7), double_text(-0.0, 'mysql')
('0.1', '1e21', '1.5e15', '0.0000003', '0')
>>> double_text(1234567890123456.8), double_text(1e-16), double_text(float("1.2345678901234568e17"))
('1234567890123456.8', '1e-16', '1.2345678901234568e17')
"""

from __future__ import annotations

import zlib
from decimal import Decimal

from mysql_cdc.ids import ident
from mysql_cdc.schema import ColumnInfo
from mysql_cdc.types import GEO_TYPES, held_date, spark_type

NULL_TEXT = "~"  # X'7E' in Spark's binary join
# values short enough to enter a row's text as they are, after their length in bytes and "|" (a length makes the
# joined text unambiguous); longer types (TEXT, BLOB, JSON, geometry) enter as their SHA-256, so that a row's
# text stays within the server's max_allowed_packet
SHORT_TYPES = frozenset({"char", "varchar", "enum", "set", "binary", "varbinary", "inet4", "inet6", "uuid"})
_UTF8_SETS = frozenset({"utf8mb4", "utf8mb3", "utf8"})  # whose bytes are UTF-8 (utf8mb3's are utf8mb4's too)
_UTF8_TYPES = frozenset({"char", "varchar", "enum", "set", "tinytext", "text", "mediumtext", "longtext"})
SEPARATOR = "|"
BUCKETS = 1024  # a differing bucket of a table of 1.5 M rows is narrowed down among ~1,500 rows
MYSQL_WIDTH = 22  # MySQL's text of a double: at most this many characters
_F_DIGITS = 15  # the server writes a double's digits without an exponent from 1e-15 up to below 1e16


def _digits(x: float, significant: int | None = None, after_point: int | None = None) -> tuple[str, int]:
    """The shortest digits that read back to ``x`` (> 0), or, when those are more, ``x`` rounded to
    ``significant`` digits or to ``after_point`` places (as dtoa's modes 4 and 5 do), without trailing zeros;
    and the decimal point's place after the first digit."""
    t = Decimal(repr(x)).as_tuple()
    digits, point = "".join(map(str, t.digits)).rstrip("0") or "0", len(t.digits) + int(t.exponent)
    if significant is not None and len(digits) > significant:
        t = Decimal(x).quantize(Decimal(1).scaleb(point - significant)).as_tuple()
    elif after_point is not None and len(digits) - point > after_point:
        t = Decimal(x).quantize(Decimal(1).scaleb(-after_point)).as_tuple()
    else:
        return digits, point
    d = "".join(map(str, t.digits))
    return d.rstrip("0") or "0", len(d) + int(t.exponent)


def double_text(x: float, flavor: str = "mariadb") -> str:
    """A double as the server prints it (``CAST(CAST(d AS DOUBLE) AS CHAR)``): the shortest digits that read
    back to it, without an exponent when the decimal point is between 14 places left of the first digit and 15
    right of it (or falls inside the digits), else ``<d>[.<ddd>]e<exp>``. MySQL 9.7 fits the text in 22
    characters (:data:`MYSQL_WIDTH`) and rounds to fewer digits where it must (its ``my_gcvt``); MariaDB 10.11
    writes them all. A zero is ``0`` whatever its sign: MySQL prints a negative zero as ``-0``, but the capture
    does not keep the sign, so :func:`source_text` makes it ``0`` too.

    >>> double_text(-1.7976931348623157e308, "mysql"), double_text(-1.7976931348623157e308, "mariadb")
    ('-1.797693134862316e308', '-1.7976931348623157e308')
    >>> double_text(-7.5221541919745505e-06, "mysql"), double_text(-7.5221541919745505e-06, "mariadb")
    ('-7.5221541919745505e-6', '-0.0000075221541919745505')
    """
    if x == 0:  # a negative zero too: the source's text is made 0 (source_text), as MariaDB prints it anyway
        return "0"
    sign = "-" if x < 0 else ""
    x = abs(x)
    width = MYSQL_WIDTH - len(sign) if flavor == "mysql" else 10_000
    digits, point = _digits(x, significant=width)
    n = len(digits)
    exp_len = 1 + (point >= 101 or point <= -99) + (point >= 11 or point <= -9)
    have_space = (n - point + 2 if point <= 0 else n + 1 if point < n else point) <= width
    force_e = point <= 0 and width <= 2 - point and width >= 3 + exp_len
    fixed = ((have_space or (point <= width and (point >= -1 or (point == -2 and (n > 1 or not force_e)))
                             and not force_e))
             and (not have_space or (point >= -_F_DIGITS + 1 and (point <= _F_DIGITS or n > point))))
    if fixed:
        room = width - (point < n) - (1 - point if point <= 0 else 0)
        if room < n:
            digits, point = _digits(x, after_point=max(room, point) - point)
            n = len(digits)
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= n:
            return sign + digits + "0" * (point - n)
        return f"{sign}{digits[:point]}.{digits[point:]}"
    exp = point - 1
    room = width - (exp < 0) - (1 + (1 + (abs(exp) >= 100) + (abs(exp) >= 10))) - (n > 1)
    if room < n:
        digits, point = _digits(x, significant=room)
        exp, n = point - 1, len(digits)
    mantissa = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{sign}{mantissa}e{exp}"


def _text(col: ColumnInfo) -> bool:
    return spark_type(col) == "STRING"


def source_text(col: ColumnInfo, tinyint1_as_boolean: bool = False) -> str:
    """The source server's SQL for one column's canonical text (NULL for NULL).

    The server's own text of most values is their canonical text already (a column in ``CONCAT_WS`` is written
    so), which is cheaper than any function over it:

    >>> c = ColumnInfo("price", "decimal", "decimal(10,2)", True, numeric_precision=10, numeric_scale=2)
    >>> source_text(c), source_text(ColumnInfo("n", "int", "int(5) unsigned zerofill", True))  # no padding: + 0
    ('`price`', '`n` + 0')
    >>> source_text(ColumnInfo("d", "datetime", "datetime(3)", True, datetime_precision=3))  # 10:00:00.250
    "IF(`d` >= '0001-01-01' AND DAYOFMONTH(`d`) BETWEEN 1 AND DAYOFMONTH(LAST_DAY(`d`)), TRIM(TRAILING '.' \
FROM TRIM(TRAILING '0' FROM `d`)), NULL)"
    >>> source_text(ColumnInfo("at", "timestamp", "timestamp(3)", True))
    'CAST(NULLIF(UNIX_TIMESTAMP(`at`) * 1000000, 0) AS SIGNED)'
    """
    c, t = ident(col.name), col.data_type
    st = spark_type(col, tinyint1_as_boolean)
    held = held_date(c)  # else the capture holds the date as NULL
    if st == "BOOLEAN":
        return f"CASE WHEN {c} <> 0 THEN '1' WHEN {c} = 0 THEN '0' END"
    if t == "year":
        return f"CAST({c} + 0 AS CHAR)"
    if t in ("float", "double", "real"):
        return f"IF({c} = 0, '0', CAST(CAST({c} AS DOUBLE) AS CHAR))"
    if t == "bit":
        return f"LPAD(HEX({c}), {2 * (((col.numeric_precision or 1) + 7) // 8)}, '0')"
    if t == "date":  # written 2024-02-29 (a year below 1000 with its zeros, as DATE_FORMAT's %Y)
        return f"IF({held}, {c}, NULL)"
    if t == "datetime":
        p = _fraction_digits(col)
        if p == 0:  # 2024-02-29 10:00:00
            return f"IF({held}, {c}, NULL)"
        if p is not None:  # its p digits after a point: their trailing zeros, then a bare point, trimmed
            return f"IF({held}, TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {c})), NULL)"
        return (f"IF({held}, TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM "
                f"DATE_FORMAT({c}, '%%Y-%%m-%%d %%H:%%i:%%s.%%f'))), NULL)")
    if t == "timestamp":
        return f"CAST(NULLIF(UNIX_TIMESTAMP({c}) * 1000000, 0) AS SIGNED)"
    if t == "time":
        return (f"CAST(IF({c} < TIME'00:00:00', -1, 1) * (((HOUR({c}) * 60 + MINUTE({c})) * 60 + SECOND({c}))"
                f" * 1000000 + MICROSECOND({c})) AS CHAR)")
    if col.is_integral or t in ("decimal", "numeric"):  # + 0: a ZEROFILL column's text has no padding then
        return f"{c} + 0" if "zerofill" in col.column_type.lower() else c
    if t in GEO_TYPES:  # the stored bytes less the SRID: the WKB the capture reads (x first, whatever the SRS)
        return f"SHA2(SUBSTRING(CAST({c} AS BINARY), 5), 256)"
    value = _bytes_of(col, tinyint1_as_boolean)
    if value is not None:
        return f"CONCAT(OCTET_LENGTH({value}), '|', {value})" if t in SHORT_TYPES else f"SHA2({value}, 256)"
    return f"CAST({c} AS CHAR)"


def _bytes_of(col: ColumnInfo, b1: bool) -> str | None:
    """The source's SQL for a string's UTF-8 bytes or a binary value's bytes (None for any other column)."""
    c, t, st = ident(col.name), col.data_type, spark_type(col, b1)
    if _text(col) and t not in ("decimal", "numeric"):
        # a UTF-8 column's bytes are its UTF-8 text already: CONVERT would copy every value (a fifth of the
        # checksum's time on TPC-H orders: 4.1 s instead of 5.3 for the texts of 1.5 M rows, MariaDB 10.11)
        utf8 = t in _UTF8_TYPES and (col.charset or "").lower() in _UTF8_SETS
        return c if utf8 else f"CONVERT({c} USING utf8mb4)"
    if st == "BINARY":
        return f"CAST({c} AS BINARY)"
    return None


def _fraction_digits(col: ColumnInfo) -> int | None:
    """A DATETIME's digits after the point (None: not known).

    >>> _fraction_digits(ColumnInfo("d", "datetime", "datetime", True)), _fraction_digits(ColumnInfo("d", \
"datetime", "datetime(6)", True))
    (0, 6)
    """
    kind = col.column_type.lower().strip()
    if kind == "datetime":
        return 0
    if kind.startswith("datetime(") and kind.endswith(")") and kind[9:-1].isdigit():
        return int(kind[9:-1])
    return None if col.datetime_precision is None else int(col.datetime_precision)


_MAY_BE_NULL = frozenset({"date", "datetime", "timestamp"})  # a zero date's text is NULL, in a NOT NULL column too


def source_join(cols: list[ColumnInfo], b1: bool = False) -> str:
    """The source's SQL for a row's columns' texts joined by ``|`` (what its hash is of). A NULL is ``~``; a
    column that holds none (NOT NULL, and not a DATE, DATETIME or TIMESTAMP, whose zero is NULL) goes in without
    the ``COALESCE``, which cost a fifth of the texts' time (MySQL 9.7, TPC-H orders, the texts alone less the
    scan: 3.1 s instead of 3.9). The mirror keeps its ``COALESCE`` on every column (:func:`mirror_join`): a NULL
    there is damage, and must be hashed. Verify takes a column as NOT NULL only if it was so at the mirror's point
    and is so now (:func:`~mysql_cdc.udtf.sync.verify.nullable_either`).

    >>> source_join([ColumnInfo("id", "int", "int", False), ColumnInfo("t", "timestamp", "timestamp", False),
    ...              ColumnInfo("n", "char", "char(2)", False, "utf8mb4")])
    "CONCAT_WS('|', `id`, COALESCE(CAST(NULLIF(UNIX_TIMESTAMP(`t`) * 1000000, 0) AS SIGNED), '~'), \
OCTET_LENGTH(`n`), `n`)"
    """
    texts = ", ".join(_short_parts(c, b1) or source_text(c, b1) if not c.nullable and c.data_type not in _MAY_BE_NULL
                      else f"COALESCE({source_text(c, b1)}, '{NULL_TEXT}')" for c in cols)
    return f"CONCAT_WS('{SEPARATOR}', {texts})"


def _short_parts(col: ColumnInfo, b1: bool) -> str | None:
    """A NOT NULL short string's text as two parts of the row's ``CONCAT_WS``, its length and itself: the same
    text as :func:`source_text`'s ``CONCAT`` without a call per value (a tenth of the texts' time on TPC-H
    orders, MariaDB 10.11); None for any other column.

    >>> _short_parts(ColumnInfo("n", "varchar", "varchar(9)", False, "utf8mb4"), False)
    'OCTET_LENGTH(`n`), `n`'
    """
    value = _bytes_of(col, b1) if col.data_type in SHORT_TYPES else None
    return None if value is None else f"OCTET_LENGTH({value}), {value}"


def source_row(cols: list[ColumnInfo], tinyint1_as_boolean: bool = False) -> str:
    """The source server's SQL for the hash of a row of ``cols`` (64 hex digits).

    >>> source_row([ColumnInfo("id", "int", "int", False), ColumnInfo("n", "varchar", "varchar(9)", True, "latin1")])
    "SHA2(CONCAT_WS('|', `id`, COALESCE(CONCAT(OCTET_LENGTH(CONVERT(`n` USING utf8mb4)), '|', \
CONVERT(`n` USING utf8mb4)), '~')), 256)"
    >>> source_row([ColumnInfo("n", "varchar", "varchar(9)", True, "utf8mb4")])  # UTF-8 already: no CONVERT
    "SHA2(CONCAT_WS('|', COALESCE(CONCAT(OCTET_LENGTH(`n`), '|', `n`), '~')), 256)"
    """
    return f"SHA2({source_join(cols, tinyint1_as_boolean)}, 256)"


def source_key(cols: list[ColumnInfo], tinyint1_as_boolean: bool = False) -> str:
    """The source's SQL for a row's key text as hex (what names a key on both sides) of the key's ``cols``."""
    return f"HEX({source_join(cols, tinyint1_as_boolean)})"


def source_value(row_hash: str) -> str:
    """The source's SQL for what a row hash adds to its bucket's sum (summed with ``SUM``: exact, a DECIMAL)."""
    return f"CAST(CONV(LEFT({row_hash}, 16), 16, 10) AS UNSIGNED)"


def source_bucket(key_cols: list[ColumnInfo], tinyint1_as_boolean: bool = False, buckets: int = BUCKETS) -> str:
    """The source's SQL for a row's bucket: the CRC-32 of its key's text."""
    return f"MOD(CRC32({source_join(key_cols, tinyint1_as_boolean)}), {int(buckets)})"


DOUBLE_FUNCTION = "mysql_cdc_double_text"  # a session function the verification registers (double_text)


def _spark_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def mirror_text(col: ColumnInfo, tinyint1_as_boolean: bool = False) -> str:
    """Spark SQL over the mirror table for one column's canonical text (the same text as :func:`source_text`;
    the column as the mirror holds it: ``lake_types``).

    >>> mirror_text(ColumnInfo("at", "timestamp", "timestamp(3)", True))
    'CAST(unix_micros(`at`) AS STRING)'
    >>> mirror_text(ColumnInfo("w", "float", "float", True))
    'mysql_cdc_double_text(CAST(`w` AS DOUBLE))'
    """
    c, t = _spark_ident(col.name), col.data_type
    st = spark_type(col, tinyint1_as_boolean)
    if st == "BOOLEAN":
        return f"CASE WHEN {c} THEN '1' WHEN NOT {c} THEN '0' END"
    if t in ("float", "double", "real"):
        return f"{DOUBLE_FUNCTION}(CAST({c} AS DOUBLE))"
    if t == "bit":
        return f"hex({c})"
    if t == "timestamp":
        return f"CAST(unix_micros({c}) AS STRING)"
    if t in GEO_TYPES or st == "BINARY":
        return f"concat(CAST(CAST(length({c}) AS STRING) AS BINARY), X'7C', {c})" if t in SHORT_TYPES \
            else f"sha2({c}, 256)"
    if _text(col) and t not in ("decimal", "numeric"):
        return f"concat(CAST(octet_length({c}) AS STRING), '|', {c})" if t in SHORT_TYPES \
            else f"sha2(CAST({c} AS BINARY), 256)"
    scale = 0 if t == "bigint" else col.numeric_scale or 0  # BIGINT UNSIGNED is DECIMAL(20,0)
    if st.startswith("DECIMAL") and scale > 6:
        # its digits at its scale, never an exponent: with ANSI off, Spark's cast writes a value under 10^-6 (0 too)
        # as Java's BigDecimal does, 0E-10; format_number is exact but slow, so it takes those alone
        return (f"CASE WHEN CAST({c} AS STRING) LIKE '%E%' THEN regexp_replace(format_number({c}, {scale}), ',', '') "
                f"ELSE CAST({c} AS STRING) END")
    return f"CAST({c} AS STRING)"


def mirror_join(cols: list[ColumnInfo], b1: bool = False) -> str:
    """The columns' texts joined as bytes (a short binary value is its bytes, a string its UTF-8)."""
    texts = ", X'7C', ".join(f"COALESCE(CAST({mirror_text(c, b1)} AS BINARY), X'7E')" for c in cols)
    return f"concat({texts})"


def mirror_row(cols: list[ColumnInfo], tinyint1_as_boolean: bool = False) -> str:
    """Spark SQL for the hash of a mirror row of ``cols``: the same as :func:`source_row` gives for it."""
    return f"sha2({mirror_join(cols, tinyint1_as_boolean)}, 256)"


def mirror_key(cols: list[ColumnInfo], tinyint1_as_boolean: bool = False) -> str:
    """Spark SQL for a mirror row's key text as hex: the same as :func:`source_key`."""
    return f"hex({mirror_join(cols, tinyint1_as_boolean)})"


# a row hash's number (its first 16 hex digits) in parts, as (first digit, digits): 20, 24 and 20 bits
PARTS = ((1, 5), (6, 6), (12, 5))


def mirror_values(row_hash: str) -> list[str]:
    """Spark SQL for the parts of the number a row hash adds to its bucket's sum (:func:`source_value`'s): its hex
    digits 1-5, 6-11 and 12-16 (:data:`PARTS`), each a BIGINT. Summed apart they stay exact in BIGINT (each below
    2^24, so up to 2^39 rows in a group), and the bucket's sum is :func:`joined_sum` of theirs: the same number as
    summing the whole values into DECIMAL(38, 0), which took Spark about twice as long (the hash and its sum over
    1.5 M rows on 2 cores, alone: 2.0-2.6 s so, 1.2-1.3 s in two BIGINT halves).

    >>> mirror_values("h")[1]
    'CAST(conv(substr(h, 6, 6), 16, 10) AS BIGINT)'
    >>> h = "fffff1234567abcde" + "0" * 47
    >>> joined_sum([int(h[a - 1:a - 1 + n], 16) for a, n in PARTS]) == hash_value(h)
    True
    """
    return [f"CAST(conv(substr({row_hash}, {a}, {n}), 16, 10) AS BIGINT)" for a, n in PARTS]


def joined_sum(sums: list[int]) -> int:
    """A sum of row hashes' numbers from the sums of their parts (:func:`mirror_values`), in order."""
    total = 0
    for (_, n), part in zip(PARTS, sums, strict=True):
        total = (total << (4 * n)) + part
    return total


def mirror_bucket(key_cols: list[ColumnInfo], tinyint1_as_boolean: bool = False, buckets: int = BUCKETS) -> str:
    return f"CAST(pmod(crc32({mirror_join(key_cols, tinyint1_as_boolean)}), {int(buckets)}) AS INT)"


def bucket_of(key_hex: str, buckets: int = BUCKETS) -> int:
    """A key's bucket from its text as hex (:func:`source_key`), as both SQL rules compute it.

    >>> bucket_of("31") == zlib.crc32(b"1") % BUCKETS
    True
    """
    return zlib.crc32(bytes.fromhex(key_hex)) % buckets


def hash_value(row_hash: str) -> int:
    """What a row hash adds to its bucket's sum."""
    return int(row_hash[:16], 16)

"""Binlog offsets: (file, position) plus, when GTIDs are on, the executed GTID set.

Pure logic, no driver and no pyspark. An offset is a frozen dataclass with a small JSON-safe dict form and a
total order: file names compare by their numeric suffix (whatever its width), then the position, then the GTID
text. GTID sets are a partial order by inclusion; MySQL watermarks compare by set membership
(:meth:`GtidSet.contains`), which is what the correction and the emit rule use on MySQL with GTIDs.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from mysql_cdc.errors import ConfigError

_SUFFIX = re.compile(r"^(.*?)(\d+)$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")


@functools.lru_cache(maxsize=256)
def binlog_file_key(name: str) -> tuple[str, int]:
    """Sort key of a binlog file name: base name, then the numeric suffix as a number.

    >>> binlog_file_key("binlog.000009") < binlog_file_key("binlog.000010") < binlog_file_key("binlog.1000000")
    True
    """
    m = _SUFFIX.match(name)
    if not m:
        return (name, -1)
    return (m.group(1), int(m.group(2)))


# the change sequence: file number above bit 32, byte offset below (binlog positions are 4-byte fields)
SEQ_POS_BITS = 32
SEQ_MAX_FILE = (1 << 31) - 1  # MySQL's largest binlog file number; keeps the sequence a positive signed LONG


def change_sequence(file: str, event_start: int, image: int) -> int:
    """The LONG sequence of one row image of the binlog: ``file_number << 32 | (event_start + image)``.

    ``event_start`` is where the rows event begins in its file (its end position minus its size) and ``image``
    the image's index in the event (an update's before and after images count as two). Every image takes at
    least one byte of its event (a row's null bitmap), so ``event_start + image`` stays inside the event: two
    images never share a sequence, and the sequence grows with the binlog order (file, event, image). It is
    positive and below 2**63 for files numbered up to 2**31 - 1, MySQL's own limit.

    Worked example: an UPDATE of two rows logged in ``binlog.000003`` by an event spanning bytes 1000-1100
    gives four images, sequences 3 << 32 | 1000 ... 3 << 32 | 1003; the next event (bytes 1100-1150) starts
    at 3 << 32 | 1100. Snapshot rows carry sequence 0 (see :data:`SNAPSHOT_SEQUENCE`).

    >>> change_sequence("binlog.000003", 1000, 1) == (3 << 32) + 1001
    True
    >>> change_sequence("binlog.000003", 1100, 0) > change_sequence("binlog.000003", 1000, 3)
    True
    >>> change_sequence("binlog.000004", 4, 0) > change_sequence("binlog.000003", 4_000_000_000, 0)
    True
    """
    number = binlog_file_key(file)[1]
    if not 0 <= number <= SEQ_MAX_FILE or not 0 <= event_start + image < (1 << SEQ_POS_BITS):
        raise ConfigError(f"binlog position {file!r}:{event_start!r} (+{image!r}) is outside what the change "
                          f"sequence encodes (file numbers up to {SEQ_MAX_FILE}, positions below 2**32)")
    return (number << SEQ_POS_BITS) | (event_start + image)


# Snapshot rows' sequence: below every change. A snapshot row is its key's state at its chunk's high watermark,
# and only changes after that watermark are emitted for the key, so every later change of the key orders after
# it. (The watermark's own position cannot serve: with GTIDs a change emitted after the watermark by its GTID
# can sit in the binlog just before the watermark's position.)
SNAPSHOT_SEQUENCE = 0


def _merge(intervals: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Merge closed intervals [a, b] into sorted, disjoint, non-adjacent ones."""
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


@dataclass(frozen=True)
class GtidSet:
    """A MySQL GTID set: source uuid -> closed intervals of transaction numbers (``uuid:1-5:7``).

    Tagged GTIDs (``uuid:tag:1-5``, MySQL 8.3+) are kept with the tag as part of the source name.

    >>> s = GtidSet.parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7")
    >>> s.contains("3e11fa47-71ca-11e1-9e33-c80aa9429562", 7), s.contains("3e11fa47-71ca-11e1-9e33-c80aa9429562", 6)
    (True, False)
    >>> str(GtidSet.parse("a-b:1-3").difference(GtidSet.parse("a-b:2")))
    'a-b:1:3'
    """

    sources: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> GtidSet:
        text = (text or "").replace("\n", "").replace(" ", "")
        acc: dict[str, list[tuple[int, int]]] = {}
        if not text:
            return cls()
        for part in text.split(","):
            if not part:
                continue
            fields = part.split(":")
            source = fields[0].lower()
            tag = ""
            ranges: list[tuple[int, int]] = []
            for field in fields[1:]:
                if not field:
                    raise ConfigError(f"bad GTID set {text!r}: empty interval in {part!r}")
                if field[0].isdigit():
                    lo, _, hi = field.partition("-")
                    try:
                        a, b = int(lo), int(hi or lo)
                    except ValueError:
                        raise ConfigError(f"bad GTID set {text!r}: interval {field!r} is not a-b") from None
                    if a < 1 or b < a:
                        raise ConfigError(f"bad GTID set {text!r}: interval {field!r} is empty or below 1")
                    acc.setdefault(source + tag, []).append((a, b))
                    ranges.append((a, b))
                else:
                    tag = ":" + field.lower()
            if len(fields) == 1:
                raise ConfigError(f"bad GTID set {text!r}: {part!r} has no transaction numbers")
        return cls(tuple(sorted((s, _merge(iv)) for s, iv in acc.items())))

    def _map(self) -> dict[str, tuple[tuple[int, int], ...]]:
        return dict(self.sources)

    def contains(self, source: str, gno: int) -> bool:
        for a, b in self._map().get(source.lower(), ()):
            if a <= gno <= b:
                return True
            if a > gno:
                return False
        return False

    def contains_gtid(self, gtid: str) -> bool:
        """``gtid`` as ``uuid:n`` or ``uuid:tag:n``."""
        source, _, gno = gtid.rpartition(":")
        return self.contains(source, int(gno))

    def union(self, other: GtidSet) -> GtidSet:
        acc: dict[str, list[tuple[int, int]]] = {}
        for s, iv in (*self.sources, *other.sources):
            acc.setdefault(s, []).extend(iv)
        return GtidSet(tuple(sorted((s, _merge(v)) for s, v in acc.items())))

    def difference(self, other: GtidSet) -> GtidSet:
        theirs = other._map()
        out: list[tuple[str, tuple[tuple[int, int], ...]]] = []
        for s, mine in self.sources:
            rest: list[tuple[int, int]] = []
            for a, b in mine:
                cur = a
                for c, d in theirs.get(s, ()):
                    if d < cur or c > b:
                        continue
                    if c > cur:
                        rest.append((cur, c - 1))
                    cur = max(cur, d + 1)
                if cur <= b:
                    rest.append((cur, b))
            if rest:
                out.append((s, _merge(rest)))
        return GtidSet(tuple(out))

    def intersection(self, other: GtidSet) -> GtidSet:
        return self.difference(self.difference(other))

    def issubset(self, other: GtidSet) -> bool:
        return not self.difference(other).sources

    def __bool__(self) -> bool:
        return bool(self.sources)

    def count(self) -> int:
        return sum(b - a + 1 for _, iv in self.sources for a, b in iv)

    def __str__(self) -> str:
        parts = []
        for s, iv in self.sources:
            parts.append(s + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in iv))
        return ",".join(parts)


_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")


@dataclass(frozen=True)
class MariadbGtidPos:
    """A MariaDB GTID position: per replication domain, the last applied ``domain-server-seq``.

    Within a domain, sequence numbers grow with the binlog order, so a GTID ``d-s-n`` is at or before the
    position when ``n`` is at most the position's sequence number of domain ``d``.

    >>> p = MariadbGtidPos.parse("0-1-100,1-2-7")
    >>> p.contains_gtid("0-1-99"), p.contains_gtid("0-3-101"), p.contains_gtid("2-1-1"), str(p)
    (True, False, False, '0-1-100,1-2-7')
    """

    domains: tuple[tuple[int, int, int], ...] = ()  # (domain, server, seq), sorted by domain

    @classmethod
    def parse(cls, text: str | None) -> MariadbGtidPos:
        acc: dict[int, tuple[int, int]] = {}
        for part in (text or "").replace(" ", "").replace("\n", "").split(","):
            if not part:
                continue
            m = _MARIADB_GTID.match(part)
            if not m:
                raise ConfigError(f"bad MariaDB GTID position {text!r}: {part!r} is not domain-server-seq")
            d, srv, seq = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if d in acc and acc[d][1] >= seq:
                continue
            acc[d] = (srv, seq)
        return cls(tuple((d, srv, seq) for d, (srv, seq) in sorted(acc.items())))

    def contains_gtid(self, gtid: str) -> bool:
        m = _MARIADB_GTID.match(gtid.strip())
        if not m:
            raise ConfigError(f"bad MariaDB GTID {gtid!r}; expected domain-server-seq")
        d, seq = int(m.group(1)), int(m.group(3))
        return any(dd == d and seq <= s for dd, _, s in self.domains)

    def union(self, other: MariadbGtidPos) -> MariadbGtidPos:
        return MariadbGtidPos.parse(f"{self},{other}")

    def __str__(self) -> str:
        return ",".join(f"{d}-{srv}-{seq}" for d, srv, seq in self.domains)


def is_mariadb_gtids(text: str | None) -> bool:
    """Whether a GTID text is MariaDB's ``domain-server-seq`` list rather than a MySQL ``uuid:n`` set."""
    parts = [p for p in (text or "").replace(" ", "").split(",") if p]
    return bool(parts) and all(_MARIADB_GTID.match(p) for p in parts)


@dataclass(frozen=True)
class BinlogOffset:
    """A point in the binlog.

    ``file``/``pos`` locate it; ``gtids`` is the executed GTID set at that point (MySQL with GTIDs: the exact
    watermark, see docs/DESIGN.md §4) or MariaDB's GTID position; ``None`` where unknown.
    ``kind`` says which part is exact: ``"snapshot"`` (MariaDB consistent-snapshot position), ``"gtid"``
    (MySQL executed set) or ``"position"`` (plain binlog position, as DBLog and Flink CDC take it).
    """

    file: str
    pos: int
    gtids: str | None = None
    kind: str = "position"

    def __post_init__(self) -> None:
        if self.kind not in ("snapshot", "gtid", "position"):
            raise ConfigError(f"bad offset kind {self.kind!r}; expected 'snapshot', 'gtid' or 'position'")
        if self.pos < 0:
            raise ConfigError(f"bad binlog position {self.pos!r}; positions are >= 0")

    def sort_key(self) -> tuple[str, int, int, str]:
        return (*self.position_key(), self.gtids or "")

    def position_key(self) -> tuple[str, int, int]:
        """Where the offset is in the binlog, ignoring GTIDs: (file base name, file number, position)."""
        base, num = binlog_file_key(self.file)
        return (base, num, self.pos)

    def __lt__(self, other: BinlogOffset) -> bool:
        return self.sort_key() < other.sort_key()

    def __le__(self, other: BinlogOffset) -> bool:
        return self.sort_key() <= other.sort_key()

    def __gt__(self, other: BinlogOffset) -> bool:
        return self.sort_key() > other.sort_key()

    def __ge__(self, other: BinlogOffset) -> bool:
        return self.sort_key() >= other.sort_key()

    def gtid_set(self) -> GtidSet:
        return GtidSet.parse(self.gtids)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"file": self.file, "pos": self.pos, "kind": self.kind}
        if self.gtids is not None:
            d["gtids"] = self.gtids
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BinlogOffset:
        try:
            return cls(file=str(d["file"]), pos=int(d["pos"]), gtids=d.get("gtids"), kind=d.get("kind", "position"))
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"bad binlog offset {d!r}: needs 'file' and an integer 'pos'") from e

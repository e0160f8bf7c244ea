"""XA transactions as the binlog holds them, and as a capture follows them.

A two-phase XA transaction is logged twice: at ``XA PREPARE`` its rows (the group ends with an XA prepare
event naming its xid), and later, in a group of its own, ``XA COMMIT <xid>`` or ``XA ROLLBACK <xid>`` as a
statement. Its rows are invisible to every other session until the commit, so a capture delivers them at the
commit's position (where a chunk's SELECT could first see them) and drops them at a rollback. ``XA COMMIT ...
ONE PHASE`` is logged as one group and is a transaction like any other.

Between a prepare and its commit a read may end (a micro-batch's range, a restart): the next read must know the
prepared transactions still open at its start. A stream's offset carries them (:class:`PendingXa`: the xid and
where its prepare's group starts, to be read again), kept up to date by :func:`after`:

>>> one, two = Xid(b"one"), Xid(b"two", b"bq", 7)
>>> open_ = after((), [("prepare", one, ("binlog.000001", 400)), ("prepare", two, ("binlog.000001", 900))])
>>> [p.xid.gtrid for p in open_]
[b'one', b'two']
>>> [p.xid.gtrid for p in after(open_, [("commit", one, None)])]
[b'two']
>>> PendingXa.from_dict(open_[1].to_dict()) == open_[1], open_[1].to_dict()
(True, {'gtrid': '74776f', 'bqual': '6271', 'format': 7, 'file': 'binlog.000001', 'pos': 900})
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

XaVerb = Literal["start", "end", "prepare", "commit", "rollback"]


@dataclass(frozen=True)
class Xid:
    """An XA transaction's id: global transaction id, branch qualifier, format id."""

    gtrid: bytes
    bqual: bytes = b""
    format_id: int = 1

    def __str__(self) -> str:
        return f"X'{self.gtrid.hex()}',X'{self.bqual.hex()}',{self.format_id}"


# an xid as written in an XA statement: 'gtrid' or X'hex' or 0xhex, then optionally bqual and format id
_PART = r"(?:'((?:[^'\\]|\\.|'')*)'|[Xx]'([0-9A-Fa-f]*)'|0[xX]([0-9A-Fa-f]+))"
_XA = re.compile(rf"^\s*XA\s+(START|BEGIN|END|PREPARE|COMMIT|ROLLBACK|RECOVER)\b\s*(?:{_PART}"
                 rf"(?:\s*,\s*{_PART}(?:\s*,\s*(\d+))?)?)?", re.IGNORECASE)


def _part(quoted: str | None, hexed: str | None, hex0: str | None) -> bytes:
    if quoted is not None:
        return re.sub(r"\\(.)|''", lambda m: m.group(1) or "'", quoted).encode()
    return bytes.fromhex(hexed if hexed is not None else hex0 or "")


def xa_statement(statement: str) -> tuple[XaVerb, Xid | None] | None:
    """An XA statement's verb and xid (``None`` for other statements).

    >>> xa_statement("XA COMMIT X'74776f',X'6271',7"), xa_statement("xa rollback 'one'")
    (('commit', Xid(gtrid=b'two', bqual=b'bq', format_id=7)), ('rollback', Xid(gtrid=b'one', bqual=b'', format_id=1)))
    >>> xa_statement("XA START 0x6a, 'b', 3")[1], xa_statement("COMMIT")
    (Xid(gtrid=b'j', bqual=b'b', format_id=3), None)
    """
    m = _XA.match(statement)
    if m is None:
        return None
    verb = m.group(1).lower()
    verb = "start" if verb == "begin" else verb
    if verb == "recover":
        return None
    if m.group(2) is None and m.group(3) is None and m.group(4) is None:
        return verb, None  # type: ignore[return-value]
    gtrid = _part(m.group(2), m.group(3), m.group(4))
    has_bqual = any(m.group(i) is not None for i in (5, 6, 7))
    bqual = _part(m.group(5), m.group(6), m.group(7)) if has_bqual else b""
    return verb, Xid(gtrid, bqual, int(m.group(8)) if m.group(8) else 1)  # type: ignore[return-value]


@dataclass(frozen=True)
class PendingXa:
    """A prepared XA transaction not committed or rolled back yet at some binlog point: its xid, and where
    the group that holds its rows starts (a transaction boundary)."""

    xid: Xid
    file: str
    pos: int

    def to_dict(self) -> dict[str, Any]:
        return {"gtrid": self.xid.gtrid.hex(), "bqual": self.xid.bqual.hex(), "format": self.xid.format_id,
                "file": self.file, "pos": self.pos}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PendingXa:
        return cls(Xid(bytes.fromhex(str(d["gtrid"])), bytes.fromhex(str(d.get("bqual", ""))),
                       int(d.get("format", 1))), str(d["file"]), int(d["pos"]))


def after(pending: Sequence[PendingXa], events: Iterable[tuple[str, Xid, tuple[str, int] | None]]
          ) -> tuple[PendingXa, ...]:
    """The prepared transactions still open after ``events`` (``("prepare", xid, (file, pos))`` with where the
    prepare's group starts, ``("commit" | "rollback", xid, None)``), in the order they were prepared."""
    out = {p.xid: p for p in pending}
    for verb, xid, where in events:
        if verb == "prepare" and where is not None:
            out[xid] = PendingXa(xid, where[0], int(where[1]))
        elif verb in ("commit", "rollback"):
            out.pop(xid, None)
    return tuple(out.values())

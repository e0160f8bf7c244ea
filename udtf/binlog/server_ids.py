"""Replica server ids for binlog readers: each concurrent binlog connection claims its own id from the
configured range with a server-side user lock (``GET_LOCK``), never the id of a registered replica: two readers
sharing one id, or a reader taking a replica's, make the server drop the older connection, and events are lost."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

from mysql_cdc.connect import connect, registered_replica_ids, unlisted_replicas
from mysql_cdc.errors import BinlogError
from mysql_cdc.options import CdcOptions
from mysql_cdc.profiles import ConnectionProfile

LOCK_PREFIX = "mysql_cdc.server_id."


@contextlib.contextmanager
def claimed_server_id(profile: ConnectionProfile, ids: range, prefer: int | None = None, *,
                      unchecked: bool = False) -> Iterator[int]:
    """Hold a replica server id from ``ids`` for the duration of the block (a GET_LOCK per id), never the id of
    a registered replica: a binlog connection with a replica's id makes the server end that replica's. Where the
    capture user may not list the replicas, no id is claimed (:func:`mysql_cdc.connect.unlisted_replicas`),
    unless ``unchecked`` (option ``unchecked_server_ids``) says to claim one without looking."""
    conn = connect(profile)
    start = prefer if prefer is not None else random.randrange(len(ids))
    try:
        replicas = registered_replica_ids(conn)
        if replicas is None and not unchecked:
            raise unlisted_replicas(ids)
        cur = conn.cursor()
        # the session holds the id's lock while it waits, idle, for the read to end: not closed by the server's
        # wait_timeout (which would release the lock without a word, for another reader to take the same id)
        cur.execute("SET SESSION wait_timeout = 31536000")
        for k in range(len(ids)):
            sid = ids[(start + k) % len(ids)]
            if replicas and sid in replicas:
                continue
            cur.execute("SELECT GET_LOCK(%s, 0)", (LOCK_PREFIX + str(sid),))
            if cur.fetchone()[0] == 1:
                try:
                    yield sid
                finally:
                    with contextlib.suppress(Exception):
                        cur.execute("SELECT RELEASE_LOCK(%s)", (LOCK_PREFIX + str(sid),))
                return
        raise BinlogError(f"all {len(ids)} replica server ids {ids.start}-{ids.stop - 1} are in use by other "
                          "readers or registered replicas; widen server_id_range or run fewer readers at once")
    finally:
        conn.close()


def claimed_id(profile: ConnectionProfile, opts: CdcOptions) -> contextlib.AbstractContextManager[int]:
    """:func:`claimed_server_id` from the options' range, checked as they say."""
    return claimed_server_id(profile, opts.server_ids, unchecked=opts.unchecked_server_ids)

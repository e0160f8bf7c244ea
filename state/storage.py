"""Where a state dir (and what we read of a Spark checkpoint) lives: a local path or a URI of a cluster's store,
read and written through one layer, pyarrow's filesystems.

Why pyarrow and not Spark's Hadoop filesystem: the state dir is read and written from Python processes that have
no JVM at hand (a data source's planner and readers, a Spark Connect client's server side), pyarrow is already a
dependency, and its filesystems cover S3 (and S3-compatible stores), Google Cloud Storage, Azure Data Lake and
HDFS. fsspec would add a package per store for the same coverage. Spark's own checkpoints go through Hadoop as
always (``s3a://`` needs the cluster's hadoop-aws, which EMR, Dataproc and Databricks have).

The rule, a scheme at a time (:func:`parse_location`):

==============================  ==================================================================================
given                           served as
==============================  ==================================================================================
``/path``, ``rel``, ``file:``   a local path (atomic ``rename``/``link``, private modes)
``/Volumes/c/s/v/...``          a local path (Databricks mounts Unity Catalog volumes as files)
``dbfs:/x``                     ``/dbfs/x`` where Databricks' DBFS mount is (``/dbfs`` exists), refused elsewhere
``s3://b/k``, ``s3a://``,       S3: bucket ``b``, key ``k``; credentials and region from AWS's usual chain
``s3n://``                      (environment, ``~/.aws``, instance profile), endpoint from ``AWS_ENDPOINT_URL_S3``
                                or ``AWS_ENDPOINT_URL`` for an S3-compatible store
``gs://b/k``, ``gcs://``        Google Cloud Storage (application default credentials)
``abfss://c@a.dfs.core.``       Azure Data Lake Storage: account ``a``, container ``c``; credentials from the
``windows.net/k``, ``abfs://``  environment (``AZURE_*``) or a managed identity
``hdfs://nn:8020/p``            HDFS through Hadoop's libhdfs (``HADOOP_HOME``, ``CLASSPATH``, Java)
anything else                   refused before anything is written: one :class:`ConfigError` naming the scheme
==============================  ==================================================================================

Object stores have no rename: a file there is written whole by one PUT, which replaces an object atomically, so
a reader sees the old or the new file and never half of one; "first record wins" is a check, then a write, which
holds with one writer per file (the driver records chunks; a batch read's task records its own chunk). A move
(retiring a dropped table's records) is a copy and a delete per file. No lock can be taken there: one sync per
state dir is the user's to keep (the sync still locks its target folder).

>>> parse_location("s3a://lake/cdc/state")
Location(given='s3a://lake/cdc/state', kind='s3', path='lake/cdc/state', authority='lake')
>>> parse_location("file:///srv/state").path, parse_location("/Volumes/main/cdc/state").kind
('/srv/state', 'local')
>>> parse_location("ftp://host/state")
Traceback (most recent call last):
...
mysql_cdc.errors.ConfigError: state dir 'ftp://host/state' names the scheme 'ftp', which is not served: give one of ...
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal

from mysql_cdc.errors import ConfigError, StateError

Kind = Literal["local", "s3", "gcs", "azure", "hdfs"]

URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")  # a URI's scheme (a drive letter on Windows too)
_KINDS: dict[str, Kind] = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gcs", "gcs": "gcs", "abfs": "azure",
                           "abfss": "azure", "hdfs": "hdfs", "viewfs": "hdfs"}
SERVED = ("a local path", "file:", "s3://", "s3a://", "gs://", "abfss://", "hdfs://", "dbfs:/ (on Databricks)",
          "/Volumes/...")
DBFS_MOUNT = "/dbfs"  # where Databricks mounts DBFS on its clusters' machines


@dataclass(frozen=True)
class Location:
    """A place to keep files: ``kind`` says which filesystem serves it, ``path`` is the path that filesystem
    takes (local: absolute; S3 and GCS: ``bucket/key``; Azure: ``container/key``; HDFS: ``/path``), and
    ``authority`` the URI's host part (bucket, ``container@account...``, ``namenode:port``)."""

    given: str
    kind: Kind
    path: str
    authority: str = ""

    @property
    def local(self) -> bool:
        return self.kind == "local"

    def join(self, *parts: str) -> str:
        """A path under this location, as its filesystem takes it.

        >>> parse_location("s3://b/x/").join("offsets", "0")
        'b/x/offsets/0'
        """
        base = self.path.rstrip("/")
        return "/".join([base, *parts]) if base else "/" + "/".join(parts)

    def filesystem(self) -> Any:
        """The pyarrow filesystem that serves this location (``None`` for a local path, which plain ``os`` calls
        serve with modes and atomic renames). Fails with one :class:`StateError` naming what to set."""
        if self.local:
            return None
        import pyarrow.fs as pafs

        try:
            if self.kind == "s3":
                return pafs.S3FileSystem(**s3_settings(os.environ))
            if self.kind == "gcs":
                return pafs.GcsFileSystem()
            if self.kind == "azure":
                account = self.authority.partition("@")[2].split(".")[0]
                if not account:
                    raise ConfigError(f"{self.given!r} names no storage account: write it as "
                                      "abfss://<container>@<account>.dfs.core.windows.net/<path>")
                return pafs.AzureFileSystem(account_name=account)
            host, _, port = self.authority.partition(":")
            return pafs.HadoopFileSystem(host or "default", int(port) if port.isdigit() else 0)
        except ConfigError:
            raise
        except Exception as e:
            need = {"s3": "AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile or an instance role)",
                    "gcs": "Google application default credentials",
                    "azure": "Azure credentials (AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET or a managed "
                             "identity)",
                    "hdfs": "Hadoop's libhdfs: HADOOP_HOME, JAVA_HOME and CLASSPATH=$(hadoop classpath --glob)"}
            raise StateError(f"cannot open {self.given!r}: {type(e).__name__}: {e}; this store needs "
                             f"{need[self.kind]}") from e


def s3_settings(env: Any) -> dict[str, Any]:
    """pyarrow's S3 settings from the environment: the endpoint of an S3-compatible store
    (``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``, as AWS's own tools read them) split into scheme and
    host, the region if one is set. Credentials are left to AWS's chain, never passed through here.

    >>> s3_settings({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1"})
    {'endpoint_override': '127.0.0.1:9000', 'scheme': 'http', 'region': 'eu-west-1'}
    >>> s3_settings({})
    {}
    """
    out: dict[str, Any] = {}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        out["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
        out["scheme"] = parts.scheme
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        out["region"] = region
    return out


def parse_location(given: str, what: str = "state dir", here: bool = True) -> Location:
    """Which filesystem serves ``given`` and the path it takes there (the table in the module's docstring).
    Pure but for one look at whether ``/dbfs`` exists (``here=False``: the location is another machine's, a
    Spark Connect server's, and is not looked at). Refuses, naming the scheme and what is served, anything else:
    nothing is ever created under a local folder named like a URI.

    >>> az = parse_location("abfss://c@acct.dfs.core.windows.net/cdc/s")
    >>> az.kind, az.path, az.authority
    ('azure', 'c/cdc/s', 'c@acct.dfs.core.windows.net')
    >>> parse_location("hdfs://nn:8020/cdc").path, parse_location("gs://b").path
    ('/cdc', 'b')
    """
    if not given or not given.strip():
        raise ConfigError(f"{what} is empty: give a directory or a URI ({', '.join(SERVED)})")
    m = URI_SCHEME.match(given)
    if not m or (os.name == "nt" and len(m.group(1)) == 1):
        return Location(given, "local", os.path.abspath(given))
    scheme = m.group(1).lower()
    parts = urllib.parse.urlsplit(given)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"{what} {given!r} names the host {parts.netloc!r}: a file: URI here is local "
                              "(file:///path)")
        return Location(given, "local", os.path.abspath(urllib.parse.unquote(parts.path) or "/"))
    if scheme == "dbfs":
        if parts.netloc:
            raise ConfigError(f"{what} {given!r}: write a DBFS path as dbfs:/<path> (one slash)")
        if here and not os.path.isdir(DBFS_MOUNT):
            raise ConfigError(f"{what} {given!r} is on DBFS, which is mounted on Databricks clusters only "
                              f"({DBFS_MOUNT} is not here): give a Unity Catalog volume (/Volumes/...), an object "
                              "store URI (s3://, abfss://, gs://) or a local path")
        return Location(given, "local", os.path.join(DBFS_MOUNT, parts.path.lstrip("/")))
    kind = _KINDS.get(scheme)
    if kind is None:
        raise ConfigError(f"{what} {given!r} names the scheme {scheme!r}, which is not served: give one of "
                          f"{', '.join(SERVED)}")
    user, at, host = parts.netloc.rpartition("@")
    if at and (":" in user or kind in ("s3", "gcs")):  # a bucket name has no "@"; abfss' is container@account
        shown = f"{scheme}://...@{host}{parts.path}"  # never the credentials themselves
        raise ConfigError(f"{what} {shown!r} carries credentials in the URI, which are never taken (they would "
                          "show in errors, logs and the state): give them as the store's own tools take them "
                          "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or an instance role for S3)")
    if not parts.netloc and kind != "hdfs":
        raise ConfigError(f"{what} {given!r} names no bucket or container: write it as "
                          f"{scheme}://<bucket>/<path>")
    key = urllib.parse.unquote(parts.path).strip("/")
    if kind == "hdfs":
        return Location(given, kind, "/" + key, parts.netloc)
    if kind == "azure":
        container = parts.netloc.partition("@")[0]
        return Location(given, kind, "/".join(p for p in (container, key) if p), parts.netloc)
    return Location(given, kind, "/".join(p for p in (parts.netloc, key) if p), parts.netloc)


def check_reachable(loc: Location, what: str = "state dir") -> None:
    """One look at a remote location before anything is written there: its filesystem opens and its bucket or
    container exists (a typo or missing credentials is one error here, not a failed batch later)."""
    if loc.local:
        return
    import pyarrow.fs as pafs

    fs = loc.filesystem()
    top = loc.path if loc.kind == "hdfs" else loc.path.split("/")[0]
    try:
        kind = fs.get_file_info(top).type
    except Exception as e:
        raise StateError(f"cannot reach the {what} {loc.given!r}: {type(e).__name__}: {e}") from e
    if kind != pafs.FileType.Directory and loc.kind != "hdfs":
        raise StateError(f"the {what} {loc.given!r} names the bucket or container {top!r}, which does not exist "
                         "(or these credentials may not see it): create it first")


def read_text(location: str, *parts: str) -> str | None:
    """The text of a file under ``location`` (``None`` if there is none)."""
    loc = parse_location(location, "checkpoint")
    path = os.path.join(loc.path, *parts) if loc.local else loc.join(*parts)
    try:
        if loc.local:
            with open(path, encoding="utf-8") as f:
                return f.read()
        with loc.filesystem().open_input_stream(path) as f:
            return bytes(f.read()).decode("utf-8")
    except FileNotFoundError:
        return None


def list_names(location: str, *parts: str) -> list[str]:
    """The names in a folder under ``location`` (none if it is not there)."""
    loc = parse_location(location, "checkpoint")
    if loc.local:
        path = os.path.join(loc.path, *parts)
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    import pyarrow.fs as pafs

    infos = loc.filesystem().get_file_info(pafs.FileSelector(loc.join(*parts), allow_not_found=True))
    return sorted(i.base_name for i in infos)

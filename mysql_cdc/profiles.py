"""Connection profiles: where a capture connects, as whoever runs Spark set it up.

A profile is a ``mysql://user:password@host:port[?...]`` URL, a mapping, or a :class:`ConnectionProfile`; it
may name where its password is read instead of holding it (``password-env``, ``password-file``). Profiles
come from registration, from ``$MYSQL_CDC_PROFILE_<NAME>`` or from the file named by
``$MYSQL_CDC_PROFILES_FILE``; a query only names one (option ``source``), and its password goes only to the
host the profile names (docs/DESIGN.md §8)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mysql_cdc.errors import ConfigError
from mysql_cdc.options import CdcOptions

# TLS to the server, as MySQL's clients name it: disabled, preferred (TLS when the server offers it, the
# drivers' default), required (TLS, certificate not checked), verify_ca (the certificate is signed by ssl_ca, or
# by the system's CAs), verify_identity (verify_ca, and the certificate names the host)
SSL_MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")


@dataclass(frozen=True)
class ConnectionProfile:
    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    connect_timeout: float = 10.0
    ssl_mode: str = "preferred"
    ssl_ca: str | None = None  # a CA certificate file (PEM) for verify_ca / verify_identity
    # a running capture's connections (:func:`running`): seconds of failed tries before it stops (0: no second
    # try) and of silence from the server before a read fails (0: none)
    reconnect_timeout: float = 0.0
    read_timeout: float = 0.0
    # where the password is read again before each new connection (a rotated secret), in the process that
    # connects: ("file", path), ("env", variable), ("profiles", path, name) or ("named", name) (the environment's
    # $MYSQL_CDC_PROFILE_<NAME>); ``None``: the password as given
    password_from: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    # (Spark file name, profile name): a copy of the password in a private file that ``register`` gave the Spark
    # session, which Spark's file server hands to every process of the session that connects
    session_secret: tuple[str, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ssl_mode not in SSL_MODES:
            raise ConfigError(f"bad ssl_mode {self.ssl_mode!r}; expected one of {', '.join(SSL_MODES)}")

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Pickled without its password (Spark pickles readers, partitions and functions, and may log or spill
        them): the copy that lands reads it where :attr:`password_from` or :attr:`session_secret` says. A
        password with neither is refused here rather than written into a pickle."""
        if self.password and self.password_from is None and self.session_secret is None:
            raise ConfigError(f"the profile for {self.user}@{self.host}:{self.port} holds its password and would "
                              "travel inside a pickled object: register it (mysql_cdc.register(spark, "
                              "profiles=...)), which gives the session the password as a private file, or name "
                              "the password with password-env / password-file")
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "password"}
        return (_unpickled, (fields,))

    def login_password(self) -> str:
        """The password to log in with now, read again where the profile names it (so that a rotated secret is
        used from the next connection on), else from the session's copy; the one held when neither can be read
        now. A copy unpickled in another process holds none: there, one that cannot be read is an error that
        says how executors get it."""
        why: list[str] = []
        if self.password_from:
            try:
                return read_password_source(self.password_from, self)
            except (ConfigError, OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                why.append(f"{self.password_from[0]}: {type(e).__name__}")
        if self.session_secret:
            try:
                return _read_session_secret(*self.session_secret)
            except (ConfigError, OSError, ValueError, KeyError, TypeError, AttributeError, ImportError) as e:
                why.append(f"session file: {type(e).__name__}")
        if self.password or not why:
            return self.password
        import socket

        name = (self.session_secret or self.password_from or ("?",))[-1]
        raise ConfigError(
            f"profile {name!r}: its password cannot be read in this process on host {socket.gethostname()!r} "
            f"({'; '.join(why)}). A process that connects reads it where the profile names it, or from the copy "
            "that registering the profile gives the session: register it (mysql_cdc.register(spark, "
            "profiles=...); the CLI and mysql_cdc.sync register the profile they use), or give every node the "
            f"profile (spark.executorEnv.{PROFILE_ENV_PREFIX}<NAME> with spark.executorEnv.{PASSWORD_ENV_PREFIX}"
            f"<NAME>, or ${PROFILES_FILE_ENV} on each node)")

    def __repr__(self) -> str:  # never show the password
        tls = "" if self.ssl_mode == "preferred" else f", ssl_mode={self.ssl_mode!r}"
        return f"ConnectionProfile(host={self.host!r}, port={self.port!r}, user={self.user!r}{tls})"

    __str__ = __repr__


def _unpickled(fields: dict[str, Any]) -> ConnectionProfile:
    """A profile as pickled: without its password (:meth:`ConnectionProfile.__reduce__`)."""
    return ConnectionProfile(**fields)


def read_password_source(src: tuple[str, ...], owner: ConnectionProfile | None = None) -> str:
    """The password where a profile names it (:attr:`ConnectionProfile.password_from`), read now. A source that
    is a whole profile (the profiles file's entry, the environment's) gives its password only if it is still the
    ``owner``'s connection (host, port, user): a password goes only to its own server."""
    kind = src[0]
    if kind == "file":
        return read_secret("file", src[1], "?")
    if kind == "env":
        return read_secret("env", src[1], "?")
    if kind == "profiles":
        with open(src[1], encoding="utf-8") as f:
            entry = json.load(f)[src[2]]
        found: ConnectionProfile | None = profile_from_mapping(entry, src[2])
    elif kind == "named":
        found = _env_profile(src[1])
    else:
        raise ValueError(f"unknown password source {kind!r}")
    if found is None:
        raise KeyError(src[-1])
    if owner is not None and (found.host, found.port, found.user) != (owner.host, owner.port, owner.user):
        raise ValueError(f"profile {src[-1]!r} here names another connection")
    return found.password


def _read_session_secret(file_name: str, name: str) -> str:
    """A registered profile's password from the session's private file (``register``), through Spark's files."""
    from pyspark import SparkFiles

    path = SparkFiles.get(file_name)
    if not os.path.exists(path):  # a classic stream's planner looks in a folder of its job (``streaming_job``)
        # under the session's files, which Spark's ``addFile`` keeps one level up
        path = os.path.join(os.path.dirname(os.path.dirname(path)), file_name)
    with open(path, encoding="utf-8") as f:
        return str(json.load(f)[name])


def session_files_scoped(file_name: str) -> bool:
    """Whether the session's file ``file_name`` is one of a Spark Connect session's own files: kept in a folder
    named by the session's id (a UUID) under Spark's ``userFiles-*``, which Spark 4.x streaming tasks do not
    see. A classic session's files are Spark's own (its streams' planners see them under ``streaming_job``)."""
    from pyspark import SparkFiles

    folder = os.path.basename(os.path.dirname(SparkFiles.get(file_name)))
    return re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", folder) is not None


def _env_profile(name: str) -> ConnectionProfile | None:
    """The profile ``$MYSQL_CDC_PROFILE_<NAME>`` of this process, its password from
    ``$MYSQL_CDC_PASSWORD_<NAME>`` when that is set."""
    suffix = re.sub(r"[^A-Za-z0-9]", "_", name).upper()
    env = os.environ.get(PROFILE_ENV_PREFIX + suffix)
    if not env:
        return None
    prof = profile_from_url(env, name)
    # a password in a variable of its own: Spark redacts settings named like *PASSWORD* (event log, UI), so
    # spark.executorEnv.MYSQL_CDC_PASSWORD_<NAME> keeps it out of them, unlike the URL's
    password = os.environ.get(PASSWORD_ENV_PREFIX + suffix)
    if password is not None:
        prof = dataclasses.replace(prof, password=password)
    return dataclasses.replace(prof, password_from=("named", name))


PROFILE_ENV_PREFIX = "MYSQL_CDC_PROFILE_"


PROFILES_FILE_ENV = "MYSQL_CDC_PROFILES_FILE"


PASSWORD_ENV_PREFIX = "MYSQL_CDC_PASSWORD_"


def read_secret(kind: str, ref: str, name: str) -> str:
    """A profile's password read from where it names (``kind`` ``env``: an environment variable; ``file``: a
    file's first line), in the process that connects. Only profiles name secrets: a profile is set up by whoever
    runs Spark, and its password goes only to its own host.

    >>> os.environ["MYSQL_CDC_DOCTEST_PW"] = "s3cret"
    >>> read_secret("env", "MYSQL_CDC_DOCTEST_PW", "shop")
    's3cret'
    """
    if kind == "env":
        if ref not in os.environ:
            raise ConfigError(f"profile {name!r} reads its password from the environment variable {ref!r}, which is "
                              "not set where the query runs (the Spark driver and executors, or the Spark Connect "
                              "server)")
        return os.environ[ref]
    try:
        with open(ref, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n")
    except OSError as e:
        raise ConfigError(f"profile {name!r} reads its password from the file {ref!r}, which cannot be read where "
                          f"the query runs ({type(e).__name__})") from None


def _password(given: str, env: str | None, file: str | None, name: str) -> str:
    """A profile's password: as given, or read by :func:`read_secret` (one source only)."""
    if sum(x is not None and x != "" for x in (given or None, env, file)) > 1:
        raise ConfigError(f"profile {name!r}: give one of password, password-env and password-file")
    if env:
        return read_secret("env", env, name)
    if file:
        return read_secret("file", file, name)
    return given


def _source(env: str | None, file: str | None) -> tuple[str, ...] | None:
    """Where a profile's password is read again (``password_from``): its password file or variable."""
    return ("file", file) if file else ("env", env) if env else None


_URL_PARAMS = {"ssl_mode", "ssl_ca", "connect_timeout", "password_env", "password_file"}


def _url_parts(url: str, name: str) -> tuple[str, re.Match[str], dict[str, str]]:
    """A profile URL's user info, host[:port] match and parameters (see :func:`profile_from_url`)."""
    bad = f"profile {name!r}: expected a URL like mysql://user:password@host:3306[?ssl-mode=...&ssl-ca=...]"
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("mysql", "mariadb"):
        raise ConfigError(bad + " (the scheme must be mysql:// or mariadb://)")
    # the user info ends at the first '@' after which a host[:port] and known parameters follow: a password may
    # hold '@', '#', '/' or '?', and an '@' in a parameter (a CA file's name) does not move the host
    for i in [-1] + [k for k, ch in enumerate(rest) if ch == "@"]:
        hostport, _, query = rest[i + 1:].partition("?")
        m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^:/\[\]@?#]+)(?::(\d{1,5}))?/?", hostport)
        if m is None:
            continue
        params: dict[str, str] = {}
        for part in filter(None, query.split("&")):
            key, _, value = part.partition("=")
            params[urllib.parse.unquote(key).replace("-", "_").lower()] = urllib.parse.unquote(value)
        if set(params) <= _URL_PARAMS:
            return (rest[:i] if i >= 0 else "", m, params)
    raise ConfigError(bad + " (no host[:port] with known parameters (ssl-mode, ssl-ca, connect-timeout, "
                      "password-env, password-file) follows an '@')")


def url_holds_password(url: str) -> bool:
    """Whether a profile URL has a password in it (not one it names with password-env / password-file).

    >>> url_holds_password("mysql://cdc:pw@db:3306"), url_holds_password("mysql://cdc@db?password-env=PW")
    (True, False)
    """
    try:
        userinfo, _, _ = _url_parts(url, "?")
    except ConfigError:
        return False
    return userinfo.partition(":")[2] != ""


def profile_from_url(url: str, name: str = "?") -> ConnectionProfile:
    """``mysql://user:password@host:port[?ssl-mode=verify_ca&ssl-ca=/path/ca.pem]``; instead of a password in the
    URL, ``password-env=VAR`` or ``password-file=/path`` name where it is read (:func:`read_secret`).

    Parsed strictly, and never echoed (it holds the password). The user info ends at the first ``@`` that a
    host[:port] and known parameters follow, so a password with ``@``, ``#``, ``/`` or ``?`` may be written as
    it is; percent-encoded sequences (``%40``) are decoded, so a literal ``%`` is written ``%25``.

    >>> p = profile_from_url("mysql://cdc:p@ss#w/rd?x@db.example:3307?ssl-mode=required")
    >>> (p.user, p.password, p.host, p.port, p.ssl_mode)
    ('cdc', 'p@ss#w/rd?x', 'db.example', 3307, 'required')
    >>> q = profile_from_url("mysql://u:p@db:3306?ssl-mode=verify_identity&ssl-ca=/certs/ca@prod.pem")
    >>> (q.host, q.ssl_mode, q.ssl_ca)
    ('db', 'verify_identity', '/certs/ca@prod.pem')
    """
    userinfo, m, params = _url_parts(url, name)
    user, _, password = userinfo.partition(":")
    secret = _password(urllib.parse.unquote(password), params.get("password_env"), params.get("password_file"), name)
    try:
        return ConnectionProfile(host=m.group(1).strip("[]"), port=int(m.group(2) or 3306),
                                 user=urllib.parse.unquote(user) or "root", password=secret,
                                 connect_timeout=float(params.get("connect_timeout", 10.0)),
                                 ssl_mode=params.get("ssl_mode", "preferred").lower(), ssl_ca=params.get("ssl_ca"),
                                 password_from=_source(params.get("password_env"), params.get("password_file")))
    except ValueError:
        raise ConfigError(f"profile {name!r}: connect-timeout must be a number") from None


def profile_from_mapping(d: Mapping[str, Any], name: str = "?") -> ConnectionProfile:
    unknown = set(d) - {"host", "port", "user", "password", "password_env", "password_file", "connect_timeout",
                        "ssl_mode", "ssl_ca"}
    if unknown or "host" not in d:
        raise ConfigError(f"profile {name!r}: needs 'host' and may have port, user, password (or password_env, "
                          f"password_file), connect_timeout, ssl_mode, ssl_ca; unknown keys {sorted(unknown)!r}")
    env, file = d.get("password_env"), d.get("password_file")
    secret = _password(str(d.get("password", "")), None if env is None else str(env),
                       None if file is None else str(file), name)
    try:
        return ConnectionProfile(host=str(d["host"]), port=int(d.get("port", 3306)), user=str(d.get("user", "root")),
                                 password=secret,
                                 connect_timeout=float(d.get("connect_timeout", 10.0)),
                                 ssl_mode=str(d.get("ssl_mode", "preferred")).lower(),
                                 ssl_ca=None if d.get("ssl_ca") is None else str(d["ssl_ca"]),
                                 password_from=_source(None if env is None else str(env),
                                                       None if file is None else str(file)))
    except (TypeError, ValueError):
        raise ConfigError(f"profile {name!r}: port and connect_timeout must be numbers") from None


def resolve_profile(opts: CdcOptions, registered: Mapping[str, ConnectionProfile] | None = None
                    ) -> ConnectionProfile:
    """The connection to use: the named profile (registered with ``register(spark, profiles=...)``, else
    ``$MYSQL_CDC_PROFILE_<NAME>`` as a URL, else the JSON file named by ``$MYSQL_CDC_PROFILES_FILE``), or the
    data source options host, port, user (a login without a password: a query never carries one)."""
    timeout = opts.connect_timeout
    if opts.host:
        if opts.source:
            raise ConfigError(f"give either source={opts.source!r} or host={opts.host!r}, not both")
        return ConnectionProfile(opts.host, opts.port, opts.user or "root", "", timeout,
                                 (opts.ssl_mode or "preferred").lower(), opts.ssl_ca)
    if not opts.source:
        raise ConfigError("no connection: set source => '<profile>', a connection profile (see Connection profiles)")
    name = opts.source
    prof: ConnectionProfile | None = (registered or {}).get(name)
    if prof is None:
        prof = _env_profile(name)
    if prof is None and os.environ.get(PROFILES_FILE_ENV):
        path = os.environ[PROFILES_FILE_ENV]
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ConfigError(f"cannot read profiles file {path!r} (from ${PROFILES_FILE_ENV}): "
                              f"{type(e).__name__}") from None
        if name in data:
            prof = profile_from_mapping(data[name], name)
            if prof.password_from is None:  # the file's own password: read there again on a reconnect
                prof = dataclasses.replace(prof, password_from=("profiles", path, name))
    if prof is None:
        raise ConfigError(
            f"unknown connection profile {name!r}; register it with mysql_cdc.register(spark, "
            f"profiles={{{name!r}: ...}}), or set ${PROFILE_ENV_PREFIX}{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}"
            f"=mysql://user:password@host:port, or add it to the JSON file named by ${PROFILES_FILE_ENV}")
    if timeout != prof.connect_timeout and opts.connect_timeout != 10.0:
        prof = dataclasses.replace(prof, connect_timeout=timeout)
    return prof


def running(prof: ConnectionProfile, opts: CdcOptions) -> ConnectionProfile:
    """The profile a running capture connects with: lost connections tried again for ``reconnect_timeout``
    seconds (:mod:`mysql_cdc.retry`), reads that hear nothing for ``read_timeout`` seconds failed (a frozen
    server or a stalled network), the password read again where the profile names it."""
    return dataclasses.replace(prof, reconnect_timeout=opts.reconnect_timeout, read_timeout=opts.read_timeout)

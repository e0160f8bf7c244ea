#!/usr/bin/env bash
# The image's entry point: pyspark's Spark Connect server (run by sbin/spark-daemon.sh) in the foreground, in
# local mode, with this package installed in the Python its workers run (streaming queries need it there:
# Spark 4.3 streaming queries do not see the code a client ships as session artifacts).
#
# Environment:
#   MYSQL_CDC_CONNECT_BIND   address the gRPC port listens on; default 0.0.0.0 (see below)
#   MYSQL_CDC_CONNECT_PORT   the gRPC port; default 15002 (Spark Connect's usual port)
#   MYSQL_CDC_CORES          N in --master local[N]; default: the CPUs this process may use
#   MYSQL_CDC_MASTER         a cluster's master instead of local mode (spark://host:7077, yarn, k8s://...)
#   MYSQL_CDC_DRIVER_HOST    with MYSQL_CDC_MASTER: the address of this server the cluster's executors reach
#                            (spark.driver.host; the stream's chunk reports come back to it too)
#   MYSQL_CDC_UI             true or false: the Spark UI; default false in local mode, true with a cluster
#   MYSQL_CDC_PROFILES_FILE  a mounted JSON file {"name": {"host": .., "port": .., "user": .., "password": ..}}
#   MYSQL_CDC_PROFILE_<NAME> mysql://user:password@host:port      (profiles are never part of the image)
#   SPARK_CONNECT_AUTHENTICATE_TOKEN_FILE  optional file holding a pre-shared token clients must present
#   SPARK_DRIVER_MEMORY      the server JVM's heap (spark-submit's default is 1g)
#   MYSQL_CDC_WORK_DIR       working directory (spark-warehouse, logs); default /var/lib/mysql-cdc, the volume
# Arguments go to spark-submit (e.g. --conf spark.sql.shuffle.partitions=8).
#
# Why 0.0.0.0 by default: a container has its own network namespace, and `docker run -p` forwards a published
# port to the container's own interface, never to the container's loopback; a server bound to 127.0.0.1 inside
# a container cannot be reached from outside it at all. Which host addresses the port appears on is decided by
# `-p` (`-p 127.0.0.1:15002:15002` keeps it on the host's loopback). Outside a container (a chroot, a plain
# host, the tests) the process shares the host's network, and 0.0.0.0 would open the server on every interface
# of the machine: set MYSQL_CDC_CONNECT_BIND=127.0.0.1 there. Spark Connect does not authenticate clients unless
# a token is set, and a client can run any code as this server's user with every profile it can read.
set -euo pipefail

home=/opt/mysql-cdc
bind="${MYSQL_CDC_CONNECT_BIND:-0.0.0.0}"
port="${MYSQL_CDC_CONNECT_PORT:-15002}"
cores="${MYSQL_CDC_CORES:-$(nproc)}"
work="${MYSQL_CDC_WORK_DIR:-/var/lib/mysql-cdc}"
master="${MYSQL_CDC_MASTER:-}"
driver_host="${MYSQL_CDC_DRIVER_HOST:-}"

die() { echo "start-connect.sh: $*" >&2; exit 64; }
[ "$(id -u)" != 0 ] || die "refusing to run as root: run as the image's user 'spark' (uid $(id -u spark 2>/dev/null || echo 185))"
[[ "$port" =~ ^[0-9]+$ ]] || die "MYSQL_CDC_CONNECT_PORT must be a number, got '$port'"
[[ "$cores" =~ ^[1-9][0-9]*$ ]] || die "MYSQL_CDC_CORES must be a positive number, got '$cores'"
if [ -n "$master" ]; then
  [[ "$master" != local* ]] || die "MYSQL_CDC_MASTER=$master is local mode: leave it unset and set MYSQL_CDC_CORES"
  [ -n "$driver_host" ] || die "MYSQL_CDC_MASTER=$master needs MYSQL_CDC_DRIVER_HOST: the address of this server that the cluster's executors reach (a container's own address, or the host's with --network host)"
  ui="${MYSQL_CDC_UI:-true}"
else
  [ -z "$driver_host" ] || die "MYSQL_CDC_DRIVER_HOST is for a cluster (MYSQL_CDC_MASTER): in local mode the executors are in this process"
  ui="${MYSQL_CDC_UI:-false}"
fi
[[ "$ui" =~ ^(true|false)$ ]] || die "MYSQL_CDC_UI must be true or false, got '$ui'"
if [ -n "${MYSQL_CDC_PROFILES_FILE:-}" ] && [ ! -r "$MYSQL_CDC_PROFILES_FILE" ]; then
  die "MYSQL_CDC_PROFILES_FILE=$MYSQL_CDC_PROFILES_FILE is not readable by $(id -un) (uid $(id -u)): mount it and give that uid read access"
fi
if [ -n "${SPARK_CONNECT_AUTHENTICATE_TOKEN_FILE:-}" ]; then
  [ -r "$SPARK_CONNECT_AUTHENTICATE_TOKEN_FILE" ] || die "cannot read SPARK_CONNECT_AUTHENTICATE_TOKEN_FILE"
  # the server reads the token from its environment: it never appears in the process listing
  SPARK_CONNECT_AUTHENTICATE_TOKEN="$(tr -d '\r\n' <"$SPARK_CONNECT_AUTHENTICATE_TOKEN_FILE")"
  export SPARK_CONNECT_AUTHENTICATE_TOKEN
fi

export SPARK_HOME="$home/spark"
export PYSPARK_PYTHON="$home/venv/bin/python"  # the workers run the image's Python, where the package is
export PATH="$home/venv/bin:$PATH"
export SPARK_NO_DAEMONIZE=1                     # foreground: the server logs to stdout
# the driver's own address, and no lookup of the machine's hostname (which a container or chroot may not resolve)
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}" SPARK_LOCAL_HOSTNAME="${SPARK_LOCAL_HOSTNAME:-localhost}"
export SPARK_LOG_DIR="${SPARK_LOG_DIR:-$work/logs}" SPARK_PID_DIR="${SPARK_PID_DIR:-$work}"
mkdir -p "$SPARK_LOG_DIR"
cd "$work"

# local mode: the driver's own RPC and block manager stay on the loopback (no executor connects from
# elsewhere); the UI is off unless asked (it opens another port on every interface). With a cluster: the driver
# listens on every interface and tells executors MYSQL_CDC_DRIVER_HOST; the UI is on unless asked.
if [ -n "$master" ]; then
  placement=(--master "$master" --conf spark.driver.bindAddress=0.0.0.0 --conf "spark.driver.host=$driver_host")
else
  placement=(--master "local[$cores]" --conf spark.driver.bindAddress=127.0.0.1 --conf spark.driver.host=127.0.0.1)
fi
# what sbin/start-connect-server.sh does (pyspark 4.3 has that script; 4.0 to 4.2 only spark-daemon.sh and the jar)
export SPARK_CONNECT_MODE=0
"$SPARK_HOME/sbin/spark-daemon.sh" submit org.apache.spark.sql.connect.service.SparkConnectServer 1 \
  --name "Spark Connect server" "${placement[@]}" \
  --conf "spark.connect.grpc.binding.address=$bind" \
  --conf "spark.connect.grpc.binding.port=$port" \
  --conf "spark.ui.enabled=$ui" \
  "$@" &
server=$!
# spark-daemon.sh keeps a shell between us and the JVM even in the foreground. A stop signal goes to the
# JVM only, so its shutdown hooks run (stopping streaming queries and the SparkContext) while that shell waits
# for it; signalling the whole group would end the shell first, and with it the container, under the JVM.
stopping=0
stop() { stopping=1; pkill -TERM -P "$server" 2>/dev/null || kill -TERM "$server" 2>/dev/null || true; }
trap stop TERM INT
rc=0
while kill -0 "$server" 2>/dev/null; do
  wait "$server" && rc=0 || rc=$?  # a trapped signal interrupts wait; the loop waits again for the JVM's end
done
# the JVM exits with 143 after the SIGTERM it was asked to stop with: that is a clean stop
if [ "$stopping" = 1 ] && [ "$rc" = 143 ]; then rc=0; fi
exit "$rc"

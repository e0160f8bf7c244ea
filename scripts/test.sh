#!/usr/bin/env bash
# The project's test command: installs what it needs, then lint, type check and the whole test suite
# (unit, property and integration tests on real MySQL 9.7 and MariaDB 10.11, classic Spark and Spark Connect).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k mariadb`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
.venv/bin/ruff check .
.venv/bin/mypy
# MYSQL_CDC_LONG=1: the long profile, every case on both servers (tests/conftest.py) and the long versions run
guard=4200
[ -z "${MYSQL_CDC_LONG:-}" ] || { export MYSQL_CDC_LONG_VERSIONS=1; guard=9000; }
guard="${MYSQL_CDC_TEST_TIMEOUT:-$guard}"
# what differs between Spark versions, under each other supported version (scripts/setup_spark_versions.sh);
# the sync into a catalog (Spark's Delta and a Hive metastore: 2.5 minutes) on 4.2 with MYSQL_CDC_LONG_VERSIONS=1;
# the sync's kill test (Spark's Delta writer, 5 minutes; its verify and key range with MYSQL_CDC_LONG_VERSIONS=1) on
# 4.2; the sync into Iceberg with a kill (3 minutes) on
# 4.1, the newest Spark Iceberg ships a runtime for, whose stream restarts as 4.0's does (no admission control);
# the sync killed eight times (tests/test_sync.py's scenario) into Spark's Delta on 4.2 and into Iceberg on 4.1, both
# servers, with MYSQL_CDC_LONG_VERSIONS=1 only (a server: 8-9 minutes into Delta, 3.5 into Iceberg)
# versions_run [claims folder [pattern]]: runs each version of the versions run; exit status 0 when all passed, else
# a cut's (124, 137) before any other failure's. With a folder, a version another lane claimed there first is left
# to it and each version's status is written there (claims/<version>/rc); with a pattern (e.g. "4.[01].*") only the
# versions it matches are taken
versions_run() {
  local claims="${1:-}" only="${2:-*}" vrc=0 pair server client narrow one long limit v
  for pair in $VERSIONS; do
    server="${pair%%:*}" client="${pair##*:}"
    # shellcheck disable=SC2053  # a pattern
    [[ $server == $only ]] || continue
    if [ -n "$claims" ]; then
      [ -d "$claims" ] || { echo "== the claims folder $claims is gone"; return 1; }
      mkdir "$claims/$server" 2>/dev/null || continue  # another lane's
    fi
    narrow=()
    # CI time: on 4.0, 4.1 and 4.2 one server (the main suite runs both on 4.3, and what differs between Spark
    # versions does not differ between servers); the sync into a Delta catalog on 4.2 only with
    # MYSQL_CDC_LONG_VERSIONS=1
    one="not mariadb" long="not eight_kills" limit=1200
    [ -z "${MYSQL_CDC_LONG_VERSIONS:-}" ] || { one="not nothing_left_out"; long="not nothing_left_out"; limit=2400; }
    case "$server" in
      4.2.1) if [ -n "${MYSQL_CDC_LONG_VERSIONS:-}" ]; then narrow=(-k "not iceberg"); else
               narrow=(-k "not iceberg and not catalog_namespace and $one and $long"); fi ;;
      # its stream restarts as 4.0's; the eight kills into Iceberg here, into Delta on 4.2
      4.1.4) narrow=(-k "not catalog_namespace and not killed and not (eight_kills and delta) and $one and $long") ;;
      *) narrow=(-k "not catalog_namespace and not iceberg and not killed and not eight_kills and $one") ;;
    esac
    echo "== pyspark $server (thin client pyspark-client $client)"
    # SIGINT: pytest stops its servers on the way out (the other lane runs on beside it)
    MYSQL_CDC_SPARK_VERSION="$server" PYSPARK_PYTHON="$PWD/.venv-spark-$server/bin/python" \
      MYSQL_CDC_CLIENT_PYTHON="$PWD/.venv-client-$client/bin/python" \
      timeout -s INT -k 60 "$limit" ".venv-spark-$server/bin/python" -m pytest -p no:cacheprovider --durations=5 \
      -m versions tests/test_spark_versions.py "${narrow[@]}"
    v=$?
    if [ $v -eq 124 ] || [ $v -eq 137 ]; then echo "== pyspark $server: cut after $limit s"; fi
    [ -z "$claims" ] || echo $v > "$claims/$server/rc"
    worse $v "$vrc"
    vrc=$WORSE
  done
  return $vrc
}
# worse <status> <status>: sets WORSE to the one the run reports: a cut (124, 137) first, then any other failure
worse() {
  local a="${1:-1}" b="${2:-1}"
  [[ $a =~ ^[0-9]+$ ]] || a=1
  [[ $b =~ ^[0-9]+$ ]] || b=1
  if [ "$a" -eq 124 ] || [ "$a" -eq 137 ]; then WORSE=$a
  elif [ "$b" -eq 124 ] || [ "$b" -eq 137 ]; then WORSE=$b
  elif [ "$a" -ne 0 ]; then WORSE=$a
  else WORSE=$b; fi
}
VERSIONS="${MYSQL_CDC_SPARK_VERSIONS-4.1.4:4.1.3 4.0.5:4.0.4 4.2.1:4.2.0}"
set +e
# a hung run fails here instead of eating CI's whole budget (on this 2-core machine every case on both servers took
# about 80 minutes, which cut the run at 70 and is now MYSQL_CDC_LONG=1; the default run's main suite, see README)
main_suite() {  # main_suite <durations file> <pytest arguments...>
  local durations="$1"
  shift
  MYSQL_CDC_DURATIONS="$durations" timeout -s INT -k 60 "$guard" .venv/bin/python -m pytest \
    -p no:cacheprovider --durations=15 -m "not versions" "$@"
  local rc=$?
  # cut by the guard (SIGINT: pytest stops its servers on the way out; they ran on beside the versions run before)
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then  # pytest printed no durations: say where time went
    echo "== the main suite was cut after $guard s; its slowest test phases:"
    sort -rn "$durations" | head -25
  fi
  return $rc
}
# each test phase's seconds (tests/conftest.py); MYSQL_CDC_DURATIONS_DIR=<folder> keeps them after the run
mine="${MYSQL_CDC_DURATIONS_DIR:-$(mktemp -d)}" || exit 1
mkdir -p -m 700 "$mine" || exit 1
rm -rf "$mine/durations" "$mine/durations-other" "$mine/durations-mysql" "$mine/other.log" "$mine/other.rc" \
  "$mine/versions.log" "$mine/claims"
if [ $# -gt 0 ] || [ -n "${MYSQL_CDC_SERIAL:-}" ]; then
  main_suite "$mine/durations" "$@"
  rc=$?
  if [ $# -eq 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ]; then  # arguments: the main version only; a cut: no more
    versions_run
    worse $? $rc
    rc=$WORSE
  fi
else
  # The default run: two lanes side by side, each pytest process with its own servers, Spark sessions and temporary
  # folders: the MySQL cases, and the MariaDB cases with everything on neither server (unit, property), after which
  # that lane (it ends first, even with tests/conftest.py's by_default_on("mariadb") cases) runs the versions 4.1 and
  # then 4.2 of the versions run (one after the other: they fetch Iceberg's and Delta's jars into one Ivy cache,
  # never both at once), and the MySQL lane, when its cases end, 4.0 (the shortest: 3 minutes, beside 4.2's end;
  # its thin client's server fetches Delta's jars into an Ivy folder of its own, tests/conftest.py delta_connect).
  # 4.2 ran after both lanes, alone, until 2026-12-02 (beside the whole MySQL lane its Delta kill test had taken 9
  # minutes instead of 6): the run took 54.5 minutes, the MySQL lane ending 1 minute before the MariaDB lane's 4.0.
  # A version a lane did not take (its lane cut by its guard) runs after both, unless the run was cut.
  # One process left a quarter of the 2 cores idle (waits on servers, on Spark's scheduling, on subprocesses); side
  # by side, with C1 JVMs (tests/conftest.py), the main suite took 50 minutes instead of 68 (README). A third lane
  # (the versions run beside both from the start) was slower on 2026-12-01: every test slowed, the MySQL lane ran
  # past 51 minutes instead of 42 and 4.2 took 14.7 instead of 6.1 (load average 4 on the 2 cores).
  # MYSQL_CDC_SERIAL=1 runs one process, as arguments do.
  mkdir -m 700 "$mine/claims" || exit 1
  {
    main_suite "$mine/durations-other" -k "not (mysql and not mariadb)" > "$mine/other.log" 2>&1
    o=$?
    echo $o > "$mine/other.rc"
    if [ $o -ne 124 ] && [ $o -ne 137 ]; then versions_run "$mine/claims" "4.[12].*" > "$mine/versions.log" 2>&1; fi
  } &
  lane=$!
  main_suite "$mine/durations-mysql" -k "mysql and not mariadb"
  rc=$?
  if [ $rc -ne 124 ] && [ $rc -ne 137 ]; then
    echo "== the versions the MySQL lane took:"
    versions_run "$mine/claims" "4.0.*"
    worse $? $rc
    rc=$WORSE
  fi
  wait "$lane"
  echo "== the MariaDB cases and those on neither server (the process beside the MySQL cases):"
  cat "$mine/other.log"
  echo "== the versions the MariaDB lane took:"
  cat "$mine/versions.log" 2>/dev/null
  worse "$(cat "$mine/other.rc" 2>/dev/null)" $rc
  rc=$WORSE
  # what no lane took, after both; every version ran in one place or the other, unless a lane was cut (which the
  # run reports)
  if [ $rc -ne 124 ] && [ $rc -ne 137 ]; then
    versions_run "$mine/claims"
    worse $? $rc
    rc=$WORSE
    for pair in $VERSIONS; do
      got=$(cat "$mine/claims/${pair%%:*}/rc" 2>/dev/null)
      [ -n "$got" ] || echo "== pyspark ${pair%%:*} did not run"
      worse "${got:-1}" $rc
      rc=$WORSE
    done
  fi
  rm -rf "$mine/claims"
fi
[ -n "${MYSQL_CDC_DURATIONS_DIR:-}" ] || rm -rf "$mine"
set -e
exit $rc

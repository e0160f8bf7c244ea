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
set +e
# a hung run fails here instead of eating CI's whole budget (the suite takes about 20 minutes on 2 cores)
timeout -k 30 "${MYSQL_CDC_TEST_TIMEOUT:-2400}" .venv/bin/python -m pytest -p no:cacheprovider --durations=15 "$@"
rc=$?
set -e
exit $rc

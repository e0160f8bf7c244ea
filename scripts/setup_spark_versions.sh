#!/usr/bin/env bash
# The other supported Spark versions (idempotent): a virtual environment each with the project's dependencies
# and that pyspark (.venv-spark-<version>: tests/test_spark_versions.py runs again under it), and a thin
# client of each (.venv-client-<version>: pyspark-client of that version and the package's own dependencies).
# The main .venv (scripts/setup.sh) holds the newest, pyspark 4.3, under which the whole suite runs.
# MYSQL_CDC_SPARK_VERSIONS="4.0.5:4.0.4 ..." picks others (server:client); empty: none.
# And one pyspark the package does not support (.venv-spark-3.5.9, MYSQL_CDC_UNSUPPORTED_SPARK; empty: none),
# which register() must refuse with one clear error (tests/test_packaging.py).
set -euo pipefail
cd "$(dirname "$0")/.."
versions="${MYSQL_CDC_SPARK_VERSIONS-4.0.5:4.0.4 4.1.4:4.1.3 4.2.1:4.2.0}"
deps() {  # the project's dependencies for the extras given, with pyspark pinned to $1
  .venv/bin/python - "$@" <<'PY'
import sys, tomllib
spark, extras = sys.argv[1], sys.argv[2:]
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
x = p["optional-dependencies"]
reqs = p["dependencies"] + [d for k in extras for d in x[k]]
print("\n".join(f"pyspark[connect]=={spark}" if r.startswith("pyspark") else r for r in reqs))
PY
}
source scripts/venv.sh
for pair in $versions; do
  server="${pair%%:*}" client="${pair##*:}"
  mapfile -t reqs < <(deps "$server" spark fast test delta)
  make_venv ".venv-spark-$server" "$server" "${reqs[@]}"
  mapfile -t own < <(deps "$server")
  make_venv ".venv-client-$client" "$client" "pyspark-client==$client" "${own[@]}" "pandas>=2.2,<3"
done
unsupported="${MYSQL_CDC_UNSUPPORTED_SPARK-3.5.9}"
if [ -n "$unsupported" ]; then
  mapfile -t own < <(deps "$unsupported")
  make_venv ".venv-spark-$unsupported" "$unsupported" "pyspark==$unsupported" "${own[@]}"
fi

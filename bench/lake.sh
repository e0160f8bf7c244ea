#!/usr/bin/env bash
# The lakehouse sync benchmark (see bench/lake.py): the sync merged by Spark into Delta and Iceberg, beside a JDBC
# dump into the same format and the same stream read alone. Runs on pyspark 4.1, where both Delta's jars and
# Iceberg's runtime exist; installs what it needs (a venv of its own), then prints and writes a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
spark="${MYSQL_CDC_BENCH_SPARK:-4.1.4}"
mapfile -t reqs < <(.venv/bin/python - "$spark" <<'PY'
import sys, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
x = p["optional-dependencies"]
reqs = p["dependencies"] + [d for k in ("spark", "fast", "test", "delta", "bench") for d in x[k]]
print("\n".join(f"pyspark[connect]=={sys.argv[1]}" if r.startswith("pyspark") else r for r in reqs))
PY
)
source scripts/venv.sh
make_venv ".venv-bench-spark-$spark" "bench-$spark" "${reqs[@]}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec ".venv-bench-spark-$spark/bin/python" bench/lake.py "$@"

#!/usr/bin/env bash
# Install everything the project needs on a fresh Debian machine (idempotent):
# system packages (MariaDB 10.11, debootstrap, the C client library for mysqlclient), the Python venv with the
# project's dependencies, and the Oracle MySQL 9.7 chroot. The package itself is NOT installed into the venv:
# the code runs from the checkout (PYTHONPATH), so a Spark Connect server started from this venv does not
# have it and tests prove that register() ships it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/provision_mariadb.sh
need=()
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
dpkg -s libmariadb-dev >/dev/null 2>&1 || need+=(libmariadb-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
[ -f /usr/share/java/mariadb-java-client.jar ] || need+=(libmariadb-java)  # bench: Spark JDBC
if [ ${#need[@]} -gt 0 ]; then
  echo "installing system packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
source scripts/venv.sh
deps=$(python3 - <<'PY'
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
x = p["optional-dependencies"]
print("\n".join(p["dependencies"] + [d for k in ("spark", "fast", "test", "s3", "bench", "delta") for d in x[k]]))
PY
)
mapfile -t reqs <<<"$deps"
make_venv .venv main "${reqs[@]}"
bash scripts/provision_mysql.sh
bash scripts/setup_spark_versions.sh

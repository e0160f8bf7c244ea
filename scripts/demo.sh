#!/usr/bin/env bash
# The main job on a built-in default: a throwaway local MariaDB (or --server mysql), sample tables, local Spark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec .venv/bin/python scripts/demo.py "$@"

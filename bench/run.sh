#!/usr/bin/env bash
# The snapshot benchmark (see bench/run.py): installs what it needs, then prints and writes a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec .venv/bin/python bench/run.py "$@"

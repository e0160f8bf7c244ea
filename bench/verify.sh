#!/usr/bin/env bash
# The verify benchmark (see bench/verify.py): verify of a mirror of TPC-H orders against reading the table through
# Spark and against a full export and compare; installs what it needs, then prints and writes a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec .venv/bin/python bench/verify.py "$@"

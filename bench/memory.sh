#!/usr/bin/env bash
# The memory benchmark (see bench/memory.py): installs what it needs, then prints and writes a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec .venv/bin/python bench/memory.py "$@"

# Sourced by scripts/setup.sh and scripts/setup_spark_versions.sh: make_venv, a virtual environment with given
# requirements, built once per content and kept under the machine's cache.
#
# make_venv <folder> <tag> <requirement>...: <folder> holds the requirements when it returns. The venv is built
# under $MYSQL_CDC_CACHE/venvs/<folder>-<key> (key: the tag, pyproject.toml and the Python version) and
# <folder> links to it, so a clean checkout of the same pyproject.toml finds it built (installing pyspark's
# 400 MB into seven venvs took minutes of every CI run); anything else builds it there first. A folder that is
# a real venv (an older checkout's) is kept and brought up to date in place, as before.
cache="${MYSQL_CDC_CACHE:-$HOME/.cache/pyspark-mysql-cdc}/venvs"
py="${PYTHON:-python3}"
make_venv() {
  local venv="$1" tag="$2"; shift 2
  local key
  key=$(printf '%s %s %s' "$tag" "$(sha256sum pyproject.toml)" "$("$py" --version 2>&1)" | sha256sum | cut -c1-16)
  local stamp=".deps-$key"
  [ -f "$venv/$stamp" ] && return 0
  local target="$venv"
  if [ ! -d "$venv" ] || [ -L "$venv" ]; then  # none here, or a link to another build: use the cached one
    local base
    base="$(basename "$venv")"
    base="${base#.}"
    target="$cache/$base-$key"
    if [ ! -f "$target/$stamp" ]; then
      echo "installing $venv"
      rm -rf "$target"  # an interrupted build
      mkdir -p "$cache"
      "$py" -m venv "$target"
      "$target/bin/python" -m pip install -q --upgrade pip
      "$target/bin/python" -m pip install -q "$@"
      touch "$target/$stamp"
    fi
    rm -f "$venv"
    ln -s "$target" "$venv"
    # this build and the newest other build of this folder are kept (a checkout of the previous pyproject.toml
    # still finds its own); the name is matched whole: "venv" must not match "venv-spark-4.0.5"
    find "$cache" -maxdepth 1 -type d -name "$base-????????????????" ! -path "$target" -printf '%T@ %p\n' |
      sort -rn | tail -n +2 | cut -d' ' -f2- | while read -r old; do rm -rf "$old"; done
    return 0
  fi
  echo "installing $venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q "$@"
  touch "$venv/$stamp"
}

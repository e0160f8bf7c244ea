#!/usr/bin/env bash
# Every install step of the Spark Connect server image, in one script: the Dockerfile runs it, and
# scripts/image_chroot.sh runs the very same script in a debootstrap chroot (where no container engine runs),
# so what the tests start is what the image holds. Needs root on a Debian bookworm root filesystem (the
# python:3.11-slim-bookworm image or a plain Debian one) and the network (the Debian mirror and PyPI).
#
#   install.sh [--base | --package] [WHEEL_DIR]
#     --base      Java 17 (Debian's openjdk-17-jre-headless), tini, procps, Python 3 with venv when the base has
#                 none, the non-root user `spark`, and /opt/mysql-cdc/venv with pyspark[connect]==$PYSPARK_VERSION
#     --package   this project's wheel (the one pyspark_mysql_cdc-*.whl in WHEEL_DIR) with its dependencies into
#                 that venv, and the image's scripts (start-connect.sh, healthcheck.sh next to this script)
#     (neither)   both
#
# Layout: /opt/mysql-cdc (root-owned: venv, scripts, `spark` -> pyspark's SPARK_HOME), /var/lib/mysql-cdc (the
# server's home and working directory, owned by `spark`, 0750). No profile or password is written anywhere:
# they come at run time from a mounted JSON file ($MYSQL_CDC_PROFILES_FILE) or $MYSQL_CDC_PROFILE_<NAME>.
set -euo pipefail
umask 022

stage=all
case "${1:-}" in
  --base) stage=base; shift ;;
  --package) stage=package; shift ;;
  -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
esac
wheel_dir="${1:-/tmp/wheels}"

PREFIX=/opt/mysql-cdc
VENV="$PREFIX/venv"
WORK=/var/lib/mysql-cdc
PYSPARK_VERSION="${PYSPARK_VERSION:-4.3.0}"
SPARK_UID=185  # the uid of the official apache/spark images (the Dockerfile says USER 185)
here="$(cd "$(dirname "$0")" && pwd)"

if [ "$(id -u)" != 0 ]; then
  echo "install.sh: run as root (it installs Debian packages and creates the spark user)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

pip_install() {
  # the system trust store (Debian's CAs plus any in /usr/local/share/ca-certificates), not pip's bundled one;
  # an environment variable, so the isolated build of pyspark's sdist uses it too
  PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$VENV/bin/python" -m pip install -q "$@"
}

base() {
  local pkgs=(openjdk-17-jre-headless tini procps ca-certificates)
  local py
  py="$(command -v python3 || true)"
  if [ -z "$py" ] || ! "$py" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    pkgs+=(python3 python3-venv)  # a plain Debian base; python:3.11-slim has its own Python 3.11 with venv
  fi
  # slim images leave out /usr/share/man; the JRE's postinst registers its man pages there and fails without it
  mkdir -p /usr/share/man/man1
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  apt-get clean
  rm -rf /var/lib/apt/lists/*
  java -version 2>&1 | grep -q 'version "17' || { echo "install.sh: Java 17 missing" >&2; java -version >&2; exit 1; }

  py="$(command -v python3)"
  "$py" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' \
    || { echo "install.sh: pyspark 4.3 needs Python >= 3.10, the base has $("$py" -V)" >&2; exit 1; }

  if ! getent passwd spark >/dev/null; then
    groupadd --system --gid "$SPARK_UID" spark
    useradd --system --uid "$SPARK_UID" --gid spark --home-dir "$WORK" --no-create-home \
            --shell /usr/sbin/nologin spark
  fi
  install -d -m 0755 -o root -g root "$PREFIX"
  install -d -m 0750 -o spark -g spark "$WORK"

  rm -rf "$VENV"
  "$py" -m venv "$VENV"
  # pandas 3 makes pyspark 4.3 print a FutureWarning on import (the project pins the same range)
  # pyspark is an sdist: built as a wheel in an isolated environment, whatever pip version the base has
  pip_install --use-pep517 "pyspark[connect]==$PYSPARK_VERSION" "pandas>=2.2,<3"
  ln -sfn "$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" "$PREFIX/spark"
  [ -x "$PREFIX/spark/sbin/spark-daemon.sh" ] && compgen -G "$PREFIX/spark/jars/spark-connect_*.jar" >/dev/null \
    || { echo "install.sh: pyspark has no sbin/spark-daemon.sh or no Spark Connect server jar" >&2; exit 1; }
}

package() {
  [ -x "$VENV/bin/python" ] || { echo "install.sh: run --base first (no $VENV)" >&2; exit 1; }
  shopt -s nullglob
  local wheels=("$wheel_dir"/pyspark_mysql_cdc-*.whl)
  if [ ${#wheels[@]} -ne 1 ]; then
    echo "install.sh: expected exactly one pyspark_mysql_cdc-*.whl in $wheel_dir, found ${#wheels[@]}" \
         "(build it with: python -m pip wheel --no-deps -w dist .)" >&2
    exit 1
  fi
  # its runtime dependencies come from PyPI, with the Delta writer of the sync job (extra delta)
  pip_install "${wheels[0]}[delta]"
  for s in start-connect.sh healthcheck.sh; do
    install -m 0755 -o root -g root "$here/$s" "$PREFIX/$s"
  done
  "$VENV/bin/python" -c 'import deltalake, mysql_cdc, pyspark; assert callable(mysql_cdc.sync)'
  "$VENV/bin/mysql-cdc" --version
  # nothing the image installs may be writable by other users
  local loose
  loose="$(find "$PREFIX" "$WORK" -xdev ! -type l -perm -o+w -print -quit)"
  [ -z "$loose" ] || { echo "install.sh: world-writable: $loose" >&2; exit 1; }
}

case "$stage" in
  base) base ;;
  package) package ;;
  all) base; package ;;
esac

#!/usr/bin/env bash
# Provision Oracle MySQL 9.7 (Debian sid's mysql-server-core) in a minbase sid chroot.
# Idempotent: reuses the chroot in the cache directory when it already holds mysqld.
# Usage: scripts/provision_mysql.sh [CACHE_DIR]   (default: $MYSQL_CDC_CACHE or ~/.cache/pyspark-mysql-cdc)
set -euo pipefail
cache="${1:-${MYSQL_CDC_CACHE:-$HOME/.cache/pyspark-mysql-cdc}}"
root="$cache/mysql-sid-chroot"
mirror="${MYSQL_CDC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if [ -x "$root/usr/sbin/mysqld" ] && [ -f "$root/.provisioned" ]; then
  echo "mysql chroot ready: $root"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
mkdir -p "$cache"
rm -rf "$root.tmp"
debootstrap --variant=minbase sid "$root.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
  tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }
# Keep services from starting inside the chroot while packages install.
printf '#!/bin/sh\nexit 101\n' >"$root.tmp/usr/sbin/policy-rc.d"
chmod +x "$root.tmp/usr/sbin/policy-rc.d"
chroot "$root.tmp" /bin/sh -c '
  set -e
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o Acquire::Check-Valid-Until=false update -qq
  apt-get install -y -qq --no-install-recommends mysql-server-core tzdata >/dev/null
  getent passwd mysql >/dev/null || useradd --system --no-create-home --shell /usr/sbin/nologin mysql
  apt-get clean
' >"$cache/chroot-install.log" 2>&1 || { tail -n 30 "$cache/chroot-install.log" >&2; exit 1; }
"$root.tmp/usr/sbin/mysqld" --version >/dev/null 2>&1 || chroot "$root.tmp" /usr/sbin/mysqld --version
touch "$root.tmp/.provisioned"
rm -rf "$root"
mv "$root.tmp" "$root"
echo "mysql chroot ready: $root ($(chroot "$root" /usr/sbin/mysqld --version))"

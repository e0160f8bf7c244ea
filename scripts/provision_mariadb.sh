#!/usr/bin/env bash
# Provision MariaDB 10.11 on the host (Debian bookworm packages) for tests, which start private instances with
# their own data dirs and ports (tests/servers.py). Idempotent: does nothing when mariadbd is installed.
# The packaged mariadb service is never started or enabled (policy-rc.d during the install) and must not be used.
set -euo pipefail
if command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; then
  echo "mariadb ready: $(/usr/sbin/mariadbd --version 2>/dev/null || mariadbd --version)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "provision_mariadb.sh: mariadbd is missing and installing it needs root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Keep invoke-rc.d from starting the packaged service; restore whatever policy was there before.
policy=/usr/sbin/policy-rc.d
backup=""
if [ -e "$policy" ]; then
  backup=$(mktemp)
  cp -p "$policy" "$backup"
fi
restore() {
  if [ -n "$backup" ]; then mv -f "$backup" "$policy"; else rm -f "$policy"; fi
}
trap restore EXIT
printf '#!/bin/sh\nexit 101\n' >"$policy"
chmod +x "$policy"
apt-get update -qq
apt-get install -y -qq --no-install-recommends mariadb-server mariadb-client >/dev/null
# Belt and braces on systemd hosts: the unit must not run (nor start at boot) beside the private instances.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now mariadb >/dev/null 2>&1 || true
fi
echo "mariadb ready: $(/usr/sbin/mariadbd --version)"

#!/usr/bin/env bash
# The Spark Connect server image's root filesystem, built without a container engine: a debootstrap bookworm
# minbase chroot in which the Dockerfile's own install script (docker/install.sh) runs, in the Dockerfile's two
# steps. Idempotent and cached (the same layering as the Dockerfile's):
#   $cache/image-base    debootstrap + `install.sh --base` (Java 17, Debian's Python 3.11, pyspark)
#                        rebuilt when docker/install.sh (or PYSPARK_VERSION) changes
#   $cache/image-chroot  a copy of image-base + `install.sh --package` with the wheel and the image's scripts
#                        rebuilt when image-base, docker/*.sh or the wheel's contents change
# cache = $2, else $MYSQL_CDC_CACHE, else ~/.cache/pyspark-mysql-cdc. Logs: $cache/image-*.log (tail on failure).
# The host's extra CA certificates (/usr/local/share/ca-certificates) are added to the chroot's trust store
# before pip runs, so a TLS-intercepting egress proxy trusted by the host is trusted inside too.
# Holds an exclusive lock ($cache/image-chroot.lock) while it checks or builds; users of the chroot hold a
# shared lock on the same file while they run from it, so it is never rebuilt under a running server.
# Usage: scripts/image_chroot.sh WHEEL [CACHE_DIR]   prints "image chroot ready: DIR KEY" last
set -euo pipefail
umask 022
repo="$(cd "$(dirname "$0")/.." && pwd)"
wheel="${1:?usage: scripts/image_chroot.sh WHEEL [CACHE_DIR]}"
cache="${2:-${MYSQL_CDC_CACHE:-$HOME/.cache/pyspark-mysql-cdc}}"
mirror="${MYSQL_CDC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
pyspark_version="${PYSPARK_VERSION:-4.3.0}"
base="$cache/image-base"
final="$cache/image-chroot"
py="${PYTHON:-python3}"
[ -f "$wheel" ] || { echo "image_chroot.sh: no wheel at $wheel" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "image_chroot.sh: needs root (debootstrap, chroot, mount)" >&2; exit 1; }

mkdir -p "$cache"
exec 9>"$cache/image-chroot.lock"
flock -w 1800 9 || { echo "image_chroot.sh: $cache/image-chroot.lock held for 30 minutes" >&2; exit 1; }

# Mounts under a directory, deepest first (a failed build can leave /proc mounted in it).
mounts_under() {
  awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}
unmount_under() {
  local m
  for m in $(mounts_under "$1"); do umount -l "$m" 2>/dev/null || true; done
  if [ -n "$(mounts_under "$1")" ]; then
    echo "image_chroot.sh: cannot unmount under $1: $(mounts_under "$1" | tr "\n" " ")" >&2
    exit 1
  fi
}
# never follow a mount out of the tree (a leftover bind of /dev or /proc would be emptied otherwise)
remove_tree() { [ -e "$1" ] || return 0; unmount_under "$1"; rm -rf --one-file-system "$1"; }

# Run a command in a chroot with /proc mounted, unmounting it whatever happens; output to a log, tail on failure.
in_chroot() {
  local root="$1" log="$2"; shift 2
  mount -t proc proc "$root/proc"
  local rc=0
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      PYSPARK_VERSION="$pyspark_version" chroot "$root" "$@" >>"$log" 2>&1 || rc=$?
  unmount_under "$root/proc"
  if [ "$rc" != 0 ]; then
    echo "image_chroot.sh: '$*' failed in $root ($rc); last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit "$rc"
  fi
}

# what goes into /tmp/mysql-cdc-build, as the Dockerfile's COPY steps do
stage_build_dir() {
  local root="$1"
  rm -rf "$root/tmp/mysql-cdc-build"
  install -d -m 0700 "$root/tmp/mysql-cdc-build" "$root/tmp/mysql-cdc-build/wheels"
  install -m 0755 "$repo/docker/install.sh" "$repo/docker/start-connect.sh" "$repo/docker/healthcheck.sh" \
    "$root/tmp/mysql-cdc-build/"
}

sha() { sha256sum | cut -c1-16; }
base_key="$( { cat "$repo/docker/install.sh"; echo "bookworm $mirror pyspark==$pyspark_version"; } | sha)"
# the wheel's contents (names and bytes), not its zip bytes: a rebuild of the same code gives the same key
wheel_digest="$("$py" - "$wheel" <<'PY'
import hashlib, sys, zipfile
h = hashlib.sha256()
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in sorted(z.namelist()):
        h.update(name.encode() + b"\0" + hashlib.sha256(z.read(name)).digest())
print(h.hexdigest())
PY
)"
final_key="$( { echo "$base_key $wheel_digest"; cat "$repo/docker/start-connect.sh" "$repo/docker/healthcheck.sh"; } | sha)"

if [ "$(cat "$final/.image-key" 2>/dev/null)" = "$final_key" ]; then
  echo "image chroot ready: $final $final_key"
  exit 0
fi

# ---- the base layer: debootstrap + install.sh --base
if [ "$(cat "$base/.image-key" 2>/dev/null)" != "$base_key" ]; then
  command -v debootstrap >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  log="$cache/image-base.log"
  : >"$log"
  remove_tree "$base.tmp"
  echo "image_chroot.sh: debootstrap bookworm minbase into $base.tmp (log: $log)" >&2
  debootstrap --variant=minbase bookworm "$base.tmp" "$mirror" >>"$log" 2>&1 || {
    echo "image_chroot.sh: debootstrap failed; last lines of $log:" >&2; tail -n 30 "$log" >&2; exit 1; }
  # as in a container build: no service starts while packages install
  printf '#!/bin/sh\nexit 101\n' >"$base.tmp/usr/sbin/policy-rc.d"
  chmod 0755 "$base.tmp/usr/sbin/policy-rc.d"
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    install -d -m 0755 "$base.tmp/usr/local/share/ca-certificates"
    install -m 0644 /usr/local/share/ca-certificates/*.crt "$base.tmp/usr/local/share/ca-certificates/"
  fi
  stage_build_dir "$base.tmp"
  echo "image_chroot.sh: install.sh --base (Java 17, Python, pyspark $pyspark_version)" >&2
  in_chroot "$base.tmp" "$log" bash /tmp/mysql-cdc-build/install.sh --base
  rm -rf "$base.tmp/tmp/mysql-cdc-build"
  echo "$base_key" >"$base.tmp/.image-key"
  remove_tree "$base"
  mv "$base.tmp" "$base"
fi

# ---- the package layer: a copy of the base + install.sh --package
log="$cache/image-chroot.log"
: >"$log"
remove_tree "$final.tmp"
cp -a "$base" "$final.tmp"
stage_build_dir "$final.tmp"
install -m 0644 "$wheel" "$final.tmp/tmp/mysql-cdc-build/wheels/"
echo "image_chroot.sh: install.sh --package $(basename "$wheel") (log: $log)" >&2
in_chroot "$final.tmp" "$log" bash /tmp/mysql-cdc-build/install.sh --package /tmp/mysql-cdc-build/wheels
rm -rf "$final.tmp/tmp/mysql-cdc-build"
# the client's Python and the workers' Python must have the same minor version
inner="$(chroot "$final.tmp" /opt/mysql-cdc/venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
outer="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ "$inner" = "$outer" ] || echo "image_chroot.sh: warning: the image's Python is $inner, $py is $outer" >&2
echo "$final_key" >"$final.tmp/.image-key"
remove_tree "$final"
mv "$final.tmp" "$final"
echo "image chroot ready: $final $final_key"

#!/usr/bin/env bash
# The image's HEALTHCHECK: healthy when the Spark Connect gRPC port accepts a TCP connection (it opens once the
# server can take sessions, 10-20 s after the start). Exit 0 healthy, 1 not.
set -u
host="${MYSQL_CDC_CONNECT_BIND:-0.0.0.0}"
case "$host" in 0.0.0.0|::|"[::]"|"") host=127.0.0.1 ;; esac
port="${MYSQL_CDC_CONNECT_PORT:-15002}"
if timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null; then exit 0; fi
exit 1

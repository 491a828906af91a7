#!/usr/bin/env bash
# Redis for the Redis backend's tests (tests/redis; issue 21): Debian's redis-server (which brings
# redis-cli), installed only if missing (apt-get update first, then install; needs root or sudo,
# as the dev machines and CI run). Only the binaries are used: the tests start their own servers
# on 127.0.0.1 (tests/helpers/redis_servers.py), so the package's own service is not needed.
# Exits 0 when redis-server and redis-cli are there afterwards, 1 otherwise (the tests then skip,
# saying why).
set -u

have() { command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; }

if have; then
    exit 0
fi
if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "setup_redis: redis-server/redis-cli missing and not root: cannot install them" >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" != 0 ] && SUDO="sudo"
echo "setup_redis: installing redis-server (apt-get)"
export DEBIAN_FRONTEND=noninteractive
# The package may start its own service on port 6379; the tests never use it (their servers take
# free random ports).
$SUDO apt-get update -qq &&
    $SUDO apt-get install -y -qq redis-server >/dev/null
if have; then
    redis-server --version 2>/dev/null | head -1
    exit 0
fi
echo "setup_redis: redis-server/redis-cli still missing after apt-get" >&2
exit 1

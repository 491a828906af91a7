#!/usr/bin/env bash
# Headless Chromium for the reader's browser tests: Debian's chromium and chromium-driver,
# installed only if missing (apt-get update first, then install; needs root, as the dev machines
# and CI run). Exits 0 when both are there afterwards, 1 otherwise (the tests then skip, saying
# why).
set -u

have() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }

if have; then
    exit 0
fi
if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "setup_browser: chromium/chromedriver missing and not root: cannot install them" >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" != 0 ] && SUDO="sudo"
echo "setup_browser: installing chromium and chromium-driver (apt-get)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq &&
    $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
if have; then
    chromium --version 2>/dev/null | head -1
    exit 0
fi
echo "setup_browser: chromium/chromedriver still missing after apt-get" >&2
exit 1

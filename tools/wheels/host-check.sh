#!/usr/bin/env bash
# `make wheel-check`'s second half: the newest wheel of TARGET in dist/ (built by
# tools/wheels/build.sh just before) installed with pip --no-index into a new virtualenv of
# this machine's Python that holds nothing else, then tests/wheel/check_installed.py run from
# /tmp with nothing of the source tree or of .venv on its paths: an undeclared run-time
# dependency, or a module the wheel forgot, fails here.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/wheels/common.sh
target=${1:?usage: host-check.sh TARGET (the Rust target triple of this machine)}
venv=target/wheel-venv
wheel=$(ls -t dist/$(wheel_pattern "$target") 2>/dev/null | sed -n 1p || true)
[ -n "$wheel" ] || { echo "wheel-check: no wheel for $target in dist/" >&2; exit 1; }
echo "wheel-check: $(basename "$wheel") on $("${PYTHON:-python3}" -V)"
rm -rf "$venv"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --no-index --disable-pip-version-check "$wheel"
here=$PWD
cd /tmp
env -u VIRTUAL_ENV -u PYTHONPATH PATH="$here/$venv/bin:/usr/bin:/bin" \
    "$here/$venv/bin/python" -I "$here/tests/wheel/check_installed.py" "$here/README.md"

#!/usr/bin/env bash
# The engine and the binding compiled for aarch64- and x86_64-apple-darwin on this Linux machine,
# so that a change which breaks the macOS build fails here and not at release time. Nothing is
# linked, so no macOS SDK is needed; the build scripts compile SQLite's C with zig
# (tools/wheels/zig-cc).
#
#   check-macos.sh check    cargo check of the libraries (`make lint` runs this: about a minute
#                           a target cold, seconds warm)
#   check-macos.sh          cargo clippy -D warnings, tests included (`make lint-macos`)
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/wheels/common.sh
mode=${1:-clippy}
case "$mode" in
    check) cargo_args=(check --quiet -p diskcache-oxide-engine -p diskcache-oxide-binding) ;;
    clippy) cargo_args=(clippy --quiet -p diskcache-oxide-engine -p diskcache-oxide-binding
        --all-targets) ;;
    *) echo "check-macos.sh: unknown mode $mode (check or clippy)" >&2; exit 1 ;;
esac
wheel_tools
rust_targets aarch64-apple-darwin x86_64-apple-darwin
# A folder of its own: `make lint` runs this while .ci/run may be building wheels in
# target/cross, and cargo would make one wait for the other's lock.
export CARGO_TARGET_DIR=target/macos
for pair in aarch64-apple-darwin:aarch64-macos x86_64-apple-darwin:x86_64-macos; do
    target=${pair%%:*}
    cc_var=CC_${target//-/_}
    if [ "$mode" = clippy ]; then
        env ZIG_CC_TARGET="${pair##*:}" "$cc_var=$PWD/tools/wheels/zig-cc" \
            nice -n 10 cargo "${cargo_args[@]}" --target "$target" -- -D warnings
    else
        env ZIG_CC_TARGET="${pair##*:}" "$cc_var=$PWD/tools/wheels/zig-cc" \
            nice -n 10 cargo "${cargo_args[@]}" --target "$target"
    fi
    echo "macOS: $target compiles (cargo $mode)"
done

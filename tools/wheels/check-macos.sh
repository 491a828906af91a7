#!/usr/bin/env bash
# `make lint-macos`: cargo clippy (a type check plus the lints, -D warnings) of the engine and
# the binding, tests included, for aarch64- and x86_64-apple-darwin. Nothing is linked, so no
# macOS SDK is needed; the build scripts compile SQLite's C with zig (tools/wheels/zig-cc).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/wheels/common.sh
wheel_tools
rust_targets aarch64-apple-darwin x86_64-apple-darwin
export CARGO_TARGET_DIR=target/cross
for pair in aarch64-apple-darwin:aarch64-macos x86_64-apple-darwin:x86_64-macos; do
    target=${pair%%:*}
    cc_var=CC_${target//-/_}
    env ZIG_CC_TARGET="${pair##*:}" "$cc_var=$PWD/tools/wheels/zig-cc" \
        nice -n 10 cargo clippy --quiet -p diskcache-oxide-engine -p diskcache-oxide-binding \
        --all-targets --target "$target" -- -D warnings
    echo "lint-macos: $target builds (cargo clippy, -D warnings)"
done

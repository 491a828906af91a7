#!/usr/bin/env bash
# `make wheels`: the wheels users install, and the sdist, into dist/ (D-066).
#
#   manylinux2014 (glibc 2.17) and musllinux_1_2, each for x86_64 and aarch64;
#   macOS 11+ for arm64 and x86_64; the sdist.
#
# Every wheel is built on this Linux machine with maturin's --zig: zig is the C compiler (for
# SQLite) and the linker, and brings glibc 2.17's symbol lists, musl and macOS's libSystem
# stubs, so no other toolchain or SDK is needed. Then tools/wheels/inspect_wheels.py checks each
# Linux wheel's .so against its tag (newest GLIBC_ symbol, auditwheel show) and each macOS
# wheel's CPU; a wheel that needs more than its tag promises fails the build.
#
# The tools (maturin, ziglang, auditwheel; tools/wheels/requirements.txt) go into
# target/wheel-tools, apart from .venv; the Rust standard libraries of the targets come from
# `rustup target add`. The cargo build goes to target/cross, so it never touches the
# target/release build that `make build` puts into the source tree.
#
# WHEEL_TARGETS="x86_64-unknown-linux-gnu ..." builds only those (the sdist is built when
# WHEEL_TARGETS includes "sdist" or is unset). DIST=dir writes elsewhere than dist/.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/wheels/common.sh

ALL_TARGETS="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl
aarch64-unknown-linux-musl aarch64-apple-darwin x86_64-apple-darwin sdist"
targets=${WHEEL_TARGETS:-$ALL_TARGETS}
DIST=${DIST:-dist}

# The Makefile exports .venv's interpreter for `make build`; the wheels do not need .venv (it
# may not exist on a clean clone), and maturin sets PYO3_PYTHON to its own.
unset PYO3_PYTHON VIRTUAL_ENV
wheel_tools
rust_targets $targets

# The oldest macOS the wheels are for. Rust's own minimum is 11.0 on arm64 and 10.12 on x86_64;
# 11.0 (Big Sur, 2020) for both keeps one tag and is what pydantic-core and orjson ask for.
export MACOSX_DEPLOYMENT_TARGET=11.0
export CARGO_TARGET_DIR=target/cross

mkdir -p "$DIST"
built=()
for target in $targets; do
    started=$(date +%s)
    # Remove this target's older wheels, so the check below reads what was just built.
    case "$target" in
        sdist)
            rm -f "$DIST"/diskcache_oxide-*.tar.gz
            "$TOOLS/bin/maturin" sdist --out "$DIST" >/dev/null
            built+=("$(ls -t "$DIST"/diskcache_oxide-*.tar.gz | sed -n 1p)")
            ;;
        *)
            compatibility=()
            case "$target" in
                *-linux-gnu) compatibility=(--compatibility manylinux2014) ;;
                *-linux-musl) compatibility=(--compatibility musllinux_1_2) ;;
            esac
            pattern=$(wheel_pattern "$target")
            rm -f "$DIST"/$pattern
            nice -n 10 "$TOOLS/bin/maturin" build --release --quiet --zig --target "$target" \
                "${compatibility[@]}" --out "$DIST"
            built+=("$(ls -t "$DIST"/$pattern | sed -n 1p)")
            ;;
    esac
    echo "make wheels: $target built in $(($(date +%s) - started)) s"
done

echo "make wheels: into $DIST/ (tag, size, what the compiled core needs):"
"$TOOLS/bin/python" tools/wheels/inspect_wheels.py "${built[@]}"

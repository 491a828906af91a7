# Shared by tools/wheels/build.sh, check.sh and check-macos.sh; sourced from the repository root.

TOOLS=target/wheel-tools

# The wheel tools (tools/wheels/requirements.txt) in a virtualenv of their own, installed again
# when that file changes. The interpreter is the one `make test` uses (PYTHON, else python3).
wheel_tools() {
    local stamp="$TOOLS/.requirements"
    # First on PATH: maturin --zig looks for `python3 -m ziglang` there.
    export PATH="$PWD/$TOOLS/bin:$PATH"
    mkdir -p target
    # One installer at a time (.ci/run builds wheels in the background while `make lint` checks
    # the macOS build); the second finds the stamp and goes on.
    (
        flock 9
        if [ -x "$TOOLS/bin/python" ] && cmp -s tools/wheels/requirements.txt "$stamp"; then
            exit 0
        fi
        echo "wheels: installing maturin, ziglang and auditwheel into $TOOLS"
        rm -rf "$TOOLS"
        "${PYTHON:-python3}" -m venv "$TOOLS"
        "$TOOLS/bin/python" -m pip install --quiet -r tools/wheels/requirements.txt
        cp tools/wheels/requirements.txt "$stamp"
    ) 9>target/.wheel-tools.lock
}

# The Rust standard library of each target named (sdist is skipped), added with rustup when
# missing: that needs rustup's registry, and says so if it cannot be reached.
rust_targets() {
    local installed missing=()
    installed=$(rustup target list --installed)
    for target in "$@"; do
        [ "$target" = sdist ] && continue
        grep -qx "$target" <<<"$installed" || missing+=("$target")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "wheels: rustup target add ${missing[*]}"
        flock target/.wheel-tools.lock rustup target add "${missing[@]}" || {
            echo "wheels: could not add the Rust targets ${missing[*]} (rustup needs its" \
                "registry). Install them with 'rustup target add', or build only the others" \
                "with WHEEL_TARGETS=..." >&2
            exit 1
        }
    fi
}

# The file-name pattern of a target's wheel in dist/.
wheel_pattern() {
    case "$1" in
        x86_64-unknown-linux-gnu) echo "diskcache_oxide-*-manylinux*_x86_64.whl" ;;
        aarch64-unknown-linux-gnu) echo "diskcache_oxide-*-manylinux*_aarch64.whl" ;;
        x86_64-unknown-linux-musl) echo "diskcache_oxide-*-musllinux*_x86_64.whl" ;;
        aarch64-unknown-linux-musl) echo "diskcache_oxide-*-musllinux*_aarch64.whl" ;;
        aarch64-apple-darwin) echo "diskcache_oxide-*-macosx_*_arm64.whl" ;;
        x86_64-apple-darwin) echo "diskcache_oxide-*-macosx_*_x86_64.whl" ;;
        *) echo "wheels: unknown target $1" >&2; return 1 ;;
    esac
}

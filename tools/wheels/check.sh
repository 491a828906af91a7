#!/usr/bin/env bash
# `make wheels-check`: each Linux wheel of dist/ installed on a real interpreter of its platform,
# with pip --no-index into a new, empty virtualenv, then tests/wheel/check_installed.py (every
# module imports, the README's examples run) and tests/wheel/exchange.py (two processes share a
# value, a queue item and a leased job). Three runs (D-066):
#
#   glibc    manylinux2014 x86_64 in a Debian 11 (bullseye, glibc 2.31) root, on CPython 3.11
#            built there from Debian's python3.11 source (bullseye's own python3.9 is older
#            than the wheel's cp310 abi3);
#   aarch64  manylinux2014 aarch64 in a Debian 12 arm64 root under qemu-aarch64-static
#            (binfmt_misc), on Debian's own arm64 python3.11 (its packages unpacked, their
#            maintainer scripts not run);
#   musl     musllinux_1_2 x86_64 on CPython 3.11 built with musl-gcc (Debian's musl-tools),
#            with zlib (built the same way) and without _sqlite3, _ctypes or _ssl: the package
#            must import without them.
#
# `tools/wheels/check.sh glibc musl` runs only those; `--prepare` makes only the roots and
# interpreters, `--debs` installs only the Debian packages. Roots and interpreters are built once and kept under target/wheel-roots/
# (delete a folder there to rebuild it). Debian packages the
# runs need (debootstrap, qemu-user-static, binfmt-support, musl-tools) are installed with
# apt-get when missing. A run whose tool cannot be had is reported as SKIPPED with the reason,
# and the script then exits 2 (not 0: a skip is not a pass); a failed run exits 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/wheels/common.sh

ROOTS=$PWD/target/wheel-roots
DIST=${DIST:-dist}
# CPython's version in Debian 12 (bookworm), whose source package the glibc and musl runs build.
CPYTHON_SOURCE_PACKAGE=python3.11
CPYTHON_PREFIX=/opt/python3.11

declare -A RESULT TIME
mounted=()

cleanup() {
    local m
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        m=${mounted[$i]}
        umount -l "$m" 2>/dev/null || true
    done
}
trap cleanup EXIT

say() { echo "wheels-check: $*"; }

skip() { # run, reason
    RESULT[$1]="SKIPPED: $2"
    say "$1: SKIPPED: $2"
}

# The wheel of a target in dist/, or a message saying to build it.
wheel_of() {
    local pattern found
    pattern=$(wheel_pattern "$1")
    found=$(ls -t "$DIST"/$pattern 2>/dev/null | sed -n 1p || true)
    if [ -z "$found" ]; then
        say "no $pattern in $DIST/: run 'make wheels' first" >&2
        return 1
    fi
    echo "$found"
}

# Debian packages, installed with apt-get when a command they provide is missing.
need_debs() { # command package...
    local command=$1
    shift
    command -v "$command" >/dev/null 2>&1 && return 0
    say "installing ${*} (apt-get) for $command"
    if [ "$(id -u)" != 0 ]; then
        say "$command is missing and installing ${*} needs root" >&2
        return 1
    fi
    # Waits up to 5 min for apt's lock, should another install be running.
    local wait=(-o DPkg::Lock::Timeout=300)
    { apt-get "${wait[@]}" install -y -q "$@" >/dev/null 2>&1 ||
        { apt-get "${wait[@]}" update -q >/dev/null 2>&1 &&
            apt-get "${wait[@]}" install -y -q "$@" >/dev/null 2>&1; }; } ||
        return 1
    command -v "$command" >/dev/null 2>&1
}

# Debian's mirror, read from this machine's apt configuration (its bookworm main index).
debian_mirror() {
    apt-cache policy 2>/dev/null |
        sed -nE 's|^ *[0-9]+ (https?://[^ ]+) bookworm/main .*|\1|p' | sed -n 1p
}

# Debian 12's source package of CPython (the upstream tarball Debian ships, checked against the
# signed Sources index), downloaded once into target/wheel-roots/src with a private apt state
# that adds a deb-src line for the mirror above, leaving the machine's apt configuration alone.
cpython_source() {
    local src=$ROOTS/src mirror tarball
    tarball=$(ls "$src"/${CPYTHON_SOURCE_PACKAGE}_*.orig.tar.* 2>/dev/null | sed -n 1p || true)
    if [ -z "$tarball" ]; then
        mirror=$(debian_mirror)
        [ -n "$mirror" ] || { say "no Debian bookworm mirror in apt's configuration" >&2; return 1; }
        mkdir -p "$src/apt/lists/partial" "$src/apt/cache/archives/partial"
        echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main" \
            >"$src/apt/sources.list"
        local apt_options=(-o "Dir::Etc::SourceList=$src/apt/sources.list"
            -o "Dir::Etc::SourceParts=/nonexistent" -o "Dir::State::Lists=$src/apt/lists"
            -o "Dir::Cache=$src/apt/cache" -o "Debug::NoLocking=1")
        apt-get "${apt_options[@]}" update -q >/dev/null
        (cd "$src" && apt-get "${apt_options[@]}" source --download-only -q \
            "$CPYTHON_SOURCE_PACKAGE" >/dev/null)
        tarball=$(ls "$src"/${CPYTHON_SOURCE_PACKAGE}_*.orig.tar.* | sed -n 1p)
    fi
    echo "$tarball"
}

# Mount what the checks need inside a root (processes, /dev/shm for SQLite's and Python's
# shared memory, the wheel and the check scripts), undone when the script exits.
enter_root() { # root
    local root=$1 m
    for m in proc dev; do
        # rslave: unmounting the copy later must not unmount the host's /dev/pts or /dev/shm.
        mountpoint -q "$root/$m" ||
            { mount --rbind "/$m" "$root/$m" && mount --make-rslave "$root/$m" &&
                mounted+=("$root/$m"); }
    done
    rm -rf "$root/wheel-check"
    mkdir -p "$root/wheel-check"
    cp tests/wheel/check_installed.py tests/wheel/exchange.py README.md "$root/wheel-check/"
}

# The checks, as one shell script run inside a root (or on the host for musl): a new virtualenv,
# the wheel installed with --no-index, then the two scripts from a directory outside any
# source tree. $1 python, $2 wheel, $3 folder holding the scripts, $4 the virtualenv.
check_script() {
    cat <<EOF
set -eu
rm -rf "$4"
"$1" -m venv "$4"
"$4/bin/python" -m pip install --quiet --no-index --disable-pip-version-check "$2"
cd /tmp
"$4/bin/python" -c 'import importlib.util as u, platform, sys, sysconfig; print("wheels-check: CPython", sys.version.split()[0], platform.machine(), sysconfig.get_config_var("MULTIARCH") or "", platform.libc_ver(), "without", [m for m in ("sqlite3", "zlib", "ctypes", "ssl") if u.find_spec(m) is None or m == "sqlite3" and u.find_spec("_sqlite3") is None or m == "ctypes" and u.find_spec("_ctypes") is None or m == "ssl" and u.find_spec("_ssl") is None])'
"$4/bin/python" -I "$3/check_installed.py" "$3/README.md"
"$4/bin/python" -I "$3/exchange.py"
EOF
}

run_glibc() {
    local root=$ROOTS/bullseye-amd64 wheel mirror tarball
    need_debs debootstrap debootstrap || { skip glibc "debootstrap cannot be installed"; return; }
    if [ ! -f "$root/.ready" ]; then
        mirror=$(debian_mirror)
        [ -n "$mirror" ] || { skip glibc "no Debian mirror in apt's configuration"; return; }
        say "glibc: debootstrap of Debian 11 (bullseye, amd64) into $root, from $mirror"
        rm -rf "$root"
        # CPython's build needs a compiler and the headers of the modules the checks use.
        debootstrap --variant=minbase \
            --include=build-essential,zlib1g-dev,libffi-dev,libssl-dev,libsqlite3-dev,libbz2-dev,liblzma-dev \
            bullseye "$root" "$mirror" >"$ROOTS/bullseye-amd64.log" 2>&1 ||
            { skip glibc "debootstrap of bullseye failed (see $ROOTS/bullseye-amd64.log)"; return; }
        touch "$root/.ready"
    fi
    if [ ! -f "$root/.python-ready" ]; then
        tarball=$(cpython_source) || { skip glibc "Debian's $CPYTHON_SOURCE_PACKAGE source cannot be downloaded"; return; }
        say "glibc: building CPython from $(basename "$tarball") in the bullseye root"
        rm -rf "$root/build"
        mkdir -p "$root/build"
        tar -xf "$tarball" -C "$root/build" --strip-components=1
        enter_root "$root"
        chroot "$root" /bin/sh -c "cd /build && ./configure --prefix=$CPYTHON_PREFIX \
            --disable-test-modules && make -j$(nproc) && make install" \
            >"$ROOTS/bullseye-cpython.log" 2>&1 ||
            { RESULT[glibc]="FAILED: CPython did not build (see $ROOTS/bullseye-cpython.log)"; return; }
        rm -rf "$root/build"
        touch "$root/.python-ready"
    fi
    [ "$PREPARE_ONLY" = 1 ] && { RESULT[glibc]="prepared"; return; }
    wheel=$(wheel_of x86_64-unknown-linux-gnu) || { RESULT[glibc]="FAILED: no wheel"; return; }
    enter_root "$root"
    cp "$wheel" "$root/wheel-check/"
    check_script "$CPYTHON_PREFIX/bin/python3.11" "/wheel-check/$(basename "$wheel")" \
        /wheel-check /tmp/wheel-venv >"$root/wheel-check/run.sh"
    if chroot "$root" /bin/sh /wheel-check/run.sh; then
        RESULT[glibc]="passed: $(basename "$wheel") on glibc $(chroot "$root" ldd --version | awk 'NR == 1 {print $NF}')"
    else
        RESULT[glibc]="FAILED: $(basename "$wheel") in the bullseye root"
    fi
}

# qemu-aarch64-static registered with binfmt_misc, so that arm64 programs run in the root.
binfmt_aarch64() {
    need_debs qemu-aarch64-static qemu-user-static binfmt-support || return 1
    need_debs update-binfmts binfmt-support || return 1
    if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || return 1
    fi
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 >/dev/null 2>&1
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]
}

run_aarch64() {
    local root=$ROOTS/bookworm-arm64 wheel mirror
    need_debs debootstrap debootstrap || { skip aarch64 "debootstrap cannot be installed"; return; }
    binfmt_aarch64 || { skip aarch64 "qemu-aarch64 cannot be registered with binfmt_misc here (needs qemu-user-static, binfmt-support and a mountable /proc/sys/fs/binfmt_misc)"; return; }
    if [ ! -f "$root/.ready" ]; then
        mirror=$(debian_mirror)
        [ -n "$mirror" ] || { skip aarch64 "no Debian mirror in apt's configuration"; return; }
        say "aarch64: Debian 12 (bookworm, arm64) unpacked into $root, from $mirror"
        rm -rf "$root"
        # --foreign: debootstrap downloads every package and unpacks the essential ones on
        # this machine; its second stage would run the arm64 dpkg and every maintainer script
        # under qemu, five minutes for nothing the checks use (byte-compiling, alternatives,
        # ldconfig's cache: Debian's loader searches the multiarch folders without it). So the
        # rest are unpacked here too, as debootstrap unpacks the first ones (the usr-merged
        # /bin, /lib links kept): 25 s instead of 6 min.
        # python3-distutils: python3.11-venv depends on python3.11-distutils, which only it
        # provides, and debootstrap's resolver does not follow provides.
        (
            debootstrap --arch=arm64 --foreign --variant=minbase \
                --include=python3.11-venv,python3-distutils bookworm "$root" "$mirror" &&
                for deb in "$root"/var/cache/apt/archives/*.deb; do
                    dpkg-deb --fsys-tarfile "$deb" |
                        tar -xf - -C "$root" --keep-directory-symlink || exit 1
                done
        ) >"$ROOTS/bookworm-arm64.log" 2>&1 ||
            { skip aarch64 "debootstrap of bookworm arm64 failed (see $ROOTS/bookworm-arm64.log)"; return; }
        touch "$root/.ready"
    fi
    [ "$PREPARE_ONLY" = 1 ] && { RESULT[aarch64]="prepared"; return; }
    wheel=$(wheel_of aarch64-unknown-linux-gnu) || { RESULT[aarch64]="FAILED: no wheel"; return; }
    enter_root "$root"
    cp "$wheel" "$root/wheel-check/"
    check_script /usr/bin/python3.11 "/wheel-check/$(basename "$wheel")" /wheel-check \
        /tmp/wheel-venv >"$root/wheel-check/run.sh"
    if chroot "$root" /bin/sh /wheel-check/run.sh; then
        RESULT[aarch64]="passed: $(basename "$wheel") under qemu-aarch64, Debian 12's python3.11"
    else
        RESULT[aarch64]="FAILED: $(basename "$wheel") in the bookworm arm64 root"
    fi
}

# A source package's upstream tarball for the musl build (zlib), fetched like CPython's.
debian_source() { # package
    local src=$ROOTS/src
    ls "$src"/${1}_*.orig.tar.* 2>/dev/null | sed -n 1p && return 0
    cpython_source >/dev/null || return 1
    (cd "$src" && apt-get -o "Dir::Etc::SourceList=$src/apt/sources.list" \
        -o "Dir::Etc::SourceParts=/nonexistent" -o "Dir::State::Lists=$src/apt/lists" \
        -o "Dir::Cache=$src/apt/cache" -o "Debug::NoLocking=1" \
        source --download-only -q "$1" >/dev/null) || return 1
    ls "$src"/${1}_*.orig.tar.* | sed -n 1p
}

run_musl() {
    local home=$ROOTS/musl-x86_64 wheel tarball zlib
    local prefix=$home/python
    need_debs musl-gcc musl-tools || { skip musl "musl-tools (musl-gcc) cannot be installed"; return; }
    # .ready, not the interpreter: a failed `make install` leaves a python3.11 behind.
    if [ ! -f "$home/.ready" ]; then
        tarball=$(cpython_source) || { skip musl "Debian's $CPYTHON_SOURCE_PACKAGE source cannot be downloaded"; return; }
        zlib=$(debian_source zlib) || { skip musl "Debian's zlib source cannot be downloaded"; return; }
        say "musl: building zlib and CPython from $(basename "$tarball") with musl-gcc into $prefix"
        rm -rf "$home"
        mkdir -p "$home/zlib-src" "$home/cpython-src"
        tar -xf "$zlib" -C "$home/zlib-src" --strip-components=1
        tar -xf "$tarball" -C "$home/cpython-src" --strip-components=1
        # CPython's configure (--print-multiarch) and setup.py (-print-multiarch) ask the
        # compiler for its multiarch name: musl-gcc is Debian's gcc, which answers
        # x86_64-linux-gnu, so configure stops (the triplet it derives from the C library is
        # x86_64-linux-musl) and setup.py adds glibc's headers. The wrapper answers for musl.
        # It also adds the Linux kernel's own headers (linux/, asm/), which do not depend on
        # the C library but which musl-gcc does not search: _socket and others include them
        # (in the wrapper, because setup.py does not pass every CPPFLAGS option on).
        printf '#!/bin/sh\ncase "$1" in -print-multiarch|--print-multiarch) echo x86_64-linux-musl; exit 0;; esac\nexec musl-gcc "$@" -idirafter %s\n' \
            "$home/kernel-headers" >"$home/musl-cc"
        chmod +x "$home/musl-cc"
        mkdir -p "$home/kernel-headers"
        ln -sfn /usr/include/linux "$home/kernel-headers/linux"
        ln -sfn /usr/include/asm-generic "$home/kernel-headers/asm-generic"
        ln -sfn "/usr/include/$(gcc -print-multiarch)/asm" "$home/kernel-headers/asm"
        # zlib: pip's own wheel inside ensurepip is a deflated zip, so the venv needs it.
        # -fPIC: it is linked into CPython's shared zlib module.
        {
            (cd "$home/zlib-src" && CC=musl-gcc CFLAGS="-O2 -fPIC" ./configure --static \
                --prefix="$home/deps" && make -j"$(nproc)" && make install) &&
                (cd "$home/cpython-src" && CC="$home/musl-cc" \
                    CPPFLAGS="-I$home/deps/include" \
                    LDFLAGS="-L$home/deps/lib" ./configure --prefix="$prefix" \
                    --disable-test-modules && make -j"$(nproc)" && make install)
        } >"$ROOTS/musl-cpython.log" 2>&1 ||
            { RESULT[musl]="FAILED: CPython did not build with musl-gcc (see $ROOTS/musl-cpython.log)"; return; }
        rm -rf "$home/zlib-src" "$home/cpython-src"
        touch "$home/.ready"
    fi
    [ "$PREPARE_ONLY" = 1 ] && { RESULT[musl]="prepared"; return; }
    wheel=$(wheel_of x86_64-unknown-linux-musl) || { RESULT[musl]="FAILED: no wheel"; return; }
    mkdir -p "$home/wheel-check"
    cp tests/wheel/check_installed.py tests/wheel/exchange.py README.md "$home/wheel-check/"
    check_script "$prefix/bin/python3.11" "$PWD/$wheel" "$home/wheel-check" "$home/venv" \
        >"$home/run.sh"
    # Nothing from the host's Python environment: an empty environment apart from PATH.
    if env -i PATH=/usr/bin:/bin HOME=/tmp /bin/sh "$home/run.sh"; then
        # musl's loader prints its version and exits 1 when run with no program.
        RESULT[musl]="passed: $(basename "$wheel") on musl $( (/lib/ld-musl-x86_64.so.1 2>&1 || true) | sed -n 's/^Version //p')"
    else
        RESULT[musl]="FAILED: $(basename "$wheel") on the musl CPython"
    fi
}

# The manylinux2014 x86_64 wheel on every CPython 3.10 to 3.13 this machine has (pyenv's
# versions, /usr/bin, /usr/local/bin), host glibc: the abi3 wheel's promise that one file serves them
# all. Not in the default runs: which versions exist depends on the machine.
run_versions() {
    local wheel python version found=() home=$ROOTS/versions failed=0
    wheel=$(wheel_of x86_64-unknown-linux-gnu) || { RESULT[versions]="FAILED: no wheel"; return; }
    for version in 3.10 3.11 3.12 3.13; do
        # pyenv's own builds first (its shims on PATH fail for a version not selected), then
        # the system's; the first that runs.
        python=
        for candidate in $(ls -d "$HOME"/.pyenv/versions/$version.*/bin/python$version \
            "/usr/bin/python$version" "/usr/local/bin/python$version" 2>/dev/null); do
            if "$candidate" -c '' 2>/dev/null; then python=$candidate; break; fi
        done
        [ -n "$python" ] || { say "versions: no python$version here"; continue; }
        mkdir -p "$home/$version/wheel-check"
        cp tests/wheel/check_installed.py tests/wheel/exchange.py README.md "$home/$version/wheel-check/"
        check_script "$python" "$PWD/$wheel" "$home/$version/wheel-check" "$home/$version/venv" \
            >"$home/$version/run.sh"
        if env -i PATH=/usr/bin:/bin HOME=/tmp /bin/sh "$home/$version/run.sh"; then
            found+=("$version")
        else
            failed=1
            found+=("$version FAILED")
        fi
    done
    if [ ${#found[@]} = 0 ]; then
        skip versions "no CPython 3.10 to 3.13 on PATH or in pyenv"
    elif [ $failed = 1 ]; then
        RESULT[versions]="FAILED: ${found[*]}"
    else
        RESULT[versions]="passed: $(basename "$wheel") on CPython ${found[*]}"
    fi
}

# --prepare: the roots and interpreters only, no wheel needed (.ci/run makes them in the
# background while `make test` runs, and checks the wheels after).
# --debs: only the Debian packages the runs need (.ci/run installs them in the foreground, so
# that the background job never holds apt's lock when `make test`'s own setup asks for it).
PREPARE_ONLY=0
case "${1:-}" in
    --prepare) PREPARE_ONLY=1; shift ;;
    --debs)
        need_debs debootstrap debootstrap && need_debs qemu-aarch64-static qemu-user-static &&
            need_debs update-binfmts binfmt-support && need_debs musl-gcc musl-tools
        exit ;;
esac
runs=${*:-glibc aarch64 musl}
[ "$(id -u)" = 0 ] || say "not root: chroot, mount and apt-get need root; runs that need them will fail"
mkdir -p "$ROOTS"
for run in $runs; do
    started=$(date +%s)
    case "$run" in
        glibc) run_glibc ;;
        aarch64) run_aarch64 ;;
        musl) run_musl ;;
        versions) run_versions ;;
        *) say "unknown run $run (glibc, aarch64, musl, versions)"; exit 1 ;;
    esac
    TIME[$run]=$(($(date +%s) - started))
    cleanup
    mounted=()
done

status=0
say "summary:"
for run in $runs; do
    echo "  $run (${TIME[$run]} s): ${RESULT[$run]:-FAILED: no result}"
    case "${RESULT[$run]:-}" in
        passed* | prepared) ;;
        SKIPPED*) [ $status = 1 ] || status=2 ;;
        *) status=1 ;;
    esac
done
exit $status

"""Check that each built wheel's compiled core runs where the wheel's tag says it does.

Run by tools/wheels/build.sh (`make wheels`) with the Python of target/wheel-tools, which has
pyelftools (auditwheel's dependency) and auditwheel. For every wheel named on the command line:

- manylinux: the newest GLIBC_x.y symbol version the `.so` needs (read from its version-needs
  section) must not be newer than the glibc of the tag (manylinux2014 is glibc 2.17,
  manylinux_2_X is 2.X); then `auditwheel show` must agree that the wheel is consistent with
  its tag. maturin checks this too when it builds; this check is independent of the build tool
  and runs on the file that will be uploaded.
- musllinux: the `.so` must need musl's libc (libc.musl-ARCH.so.1) and no GLIBC symbol
  (`auditwheel show` cannot read a musllinux wheel on a glibc machine, so it is not asked).
- macOS: the `.so` must be a Mach-O file for the tag's CPU (it cannot be run here).

Prints each wheel's tag and size, and exits non-zero naming every wheel that fails.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

ELF_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
MACHO_CPU = {"x86_64": 0x01000007, "arm64": 0x0100000C}


def core_so(wheel: zipfile.ZipFile) -> bytes:
    names = [n for n in wheel.namelist() if re.search(r"/_core[^/]*\.so$", n)]
    if len(names) != 1:
        raise SystemExit(f"expected one compiled core in the wheel, found {names}")
    return wheel.read(names[0])


def glibc_needs(elf: ELFFile) -> list[tuple[int, ...]]:
    versions = []
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for _, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    match = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", aux.name)
                    if match:
                        versions.append(tuple(int(p) for p in match.group(1).split(".")))
    return versions


def needed_libraries(elf: ELFFile) -> list[str]:
    dynamic = elf.get_section_by_name(".dynamic")
    return [tag.needed for tag in dynamic.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]


def auditwheel_tag(path: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    text = " ".join((out.stdout + out.stderr).split())
    match = re.search(r'consistent with the following platform tag: "([^"]+)"', text)
    if out.returncode != 0 or not match:
        raise ValueError(f"auditwheel show could not place it: {text[:400]}")
    return match.group(1)


def check_linux(path: Path, platform: str, so: bytes) -> str:
    elf = ELFFile(BytesIO(so))
    arch = "aarch64" if platform.endswith("aarch64") else "x86_64"
    if elf["e_machine"] != ELF_MACHINE[arch]:
        raise ValueError(f"the .so is for {elf['e_machine']}, not {arch}")
    glibc = glibc_needs(elf)
    newest = ".".join(map(str, max(glibc))) if glibc else "none"
    libraries = needed_libraries(elf)
    if "musllinux" in platform:
        if glibc:
            raise ValueError(f"a musllinux wheel whose .so needs GLIBC_{newest} symbols")
        loader = f"libc.musl-{arch}.so.1"
        if loader not in libraries and "libc.so" not in libraries:
            raise ValueError(f"the .so does not need musl's libc ({loader}): {libraries}")
        # Not `auditwheel show`: on a glibc machine it resolves libc.musl-ARCH.so.1 against
        # this machine's libraries and fails reading one (auditwheel 6.8.2). musl versions no
        # symbols, so the loader named above and the absence of glibc's are what can be read.
        return f"needs {', '.join(libraries)}; no glibc symbols"
    # manylinux2014 is glibc 2.17; manylinux_2_X_arch is glibc 2.X. A file name may carry
    # several tags (manylinux_2_17_x86_64.manylinux2014_x86_64): the oldest glibc it names is
    # the promise.
    promised = []
    for tag in platform.split("."):
        if tag.startswith("manylinux2014"):
            promised.append((2, 17))
        elif match := re.match(r"manylinux_(\d+)_(\d+)_", tag):
            promised.append((int(match.group(1)), int(match.group(2))))
    if not promised:
        raise ValueError(f"no glibc version in the tag {platform}")
    limit = min(promised)
    if glibc and max(glibc) > limit:
        raise ValueError(
            f"the .so needs GLIBC_{newest}, newer than the glibc "
            f"{'.'.join(map(str, limit))} its tag promises"
        )
    tag = auditwheel_tag(path)
    match = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    if not match or (int(match.group(1)), int(match.group(2))) > limit:
        raise ValueError(f"auditwheel places it at {tag}, above its tag {platform}")
    return f"newest glibc symbol GLIBC_{newest}; auditwheel: {tag}"


def check_macos(platform: str, so: bytes) -> str:
    arch = "arm64" if platform.endswith("arm64") else "x86_64"
    magic, cpu = struct.unpack("<II", so[:8])
    if magic != 0xFEEDFACF:
        raise ValueError(f"the .so is not a 64-bit Mach-O file (magic {magic:#x})")
    if cpu != MACHO_CPU[arch]:
        raise ValueError(f"the .so is for CPU type {cpu:#x}, not {arch}")
    return f"Mach-O {arch} (not run here)"


def main() -> None:
    failed = []
    for name in sys.argv[1:]:
        path = Path(name)
        size = f"{path.stat().st_size / 1e6:.1f} MB"
        if path.name.endswith(".tar.gz"):
            print(f"  {path.name}  {size}  sdist")
            continue
        # name-version-python-abi-platform.whl
        python, abi, platform = path.name[: -len(".whl")].split("-")[2:5]
        try:
            with zipfile.ZipFile(path) as wheel:
                so = core_so(wheel)
            if platform.startswith("macosx"):
                note = check_macos(platform, so)
            else:
                note = check_linux(path, platform, so)
            print(f"  {python}-{abi}-{platform}  {size}  {note}")
        except (ValueError, SystemExit) as error:
            print(f"  {python}-{abi}-{platform}  {size}  FAILED: {error}")
            failed.append(path.name)
    if failed:
        sys.exit(
            "make wheels: these wheels need more than their tags promise, so pip would install "
            "them where they cannot load: " + ", ".join(failed) + ". Build them with zig "
            "(maturin --zig), which links against the tag's glibc, or raise the tag."
        )


if __name__ == "__main__":
    main()

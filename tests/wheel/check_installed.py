"""Run the README's examples against an installed diskcache_oxide wheel.

`make wheel-check` builds the wheel, installs it with `pip --no-index` into a new virtualenv
that has nothing else (so an undeclared run-time dependency fails the import), and runs this
script there from outside the source tree. It checks that the package comes from that
virtualenv's site-packages, with its compiled core and its type information, and that the
README's quickstart and work-queue blocks run and print what the README says.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import sys
import sysconfig
from pathlib import Path


def block(readme: str, heading: str) -> str:
    match = re.search(rf"## {heading}.*?```python\n(.*?)```", readme, re.S)
    if not match:
        sys.exit(f"README.md has no python block under '## {heading}'")
    return match.group(1)


def run(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    return out.getvalue()


def main() -> None:
    readme = Path(sys.argv[1]).read_text(encoding="utf-8")
    import diskcache_oxide

    package = Path(diskcache_oxide.__file__).resolve().parent
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    if site not in package.parents:
        sys.exit(f"diskcache_oxide was imported from {package}, not from this venv's {site}")
    for needed in ("py.typed", "_core.pyi"):
        if not (package / needed).is_file():
            sys.exit(f"the wheel lacks {needed}")
    # Every module of the package imports from the wheel (subpackages included).
    import pkgutil

    # A module of an extra (its dependencies are not in this venv) may refuse to import, but
    # only with an ImportError that names the extra to install.
    # The Redis faces generated from the API table (D-059) are the remote package's too.
    extras = {
        "diskcache_oxide.remote": "redis",
        "diskcache_oxide.remote._face": "redis",
        "diskcache_oxide.remote._face_aio": "redis",
    }
    for module in pkgutil.walk_packages(
        diskcache_oxide.__path__, "diskcache_oxide.", onerror=lambda name: None
    ):
        try:
            importlib.import_module(module.name)
        except ImportError as error:
            extra = next(
                (
                    x
                    for p, x in extras.items()
                    if module.name == p or module.name.startswith(p + ".")
                ),
                None,
            )
            if extra is None or f"diskcache_oxide[{extra}]" not in str(error):
                raise

    out = run(block(readme, "Quickstart"))
    for expected in ("('python', 'rust')", "[1, 2, None]"):
        if expected not in out:
            sys.exit(f"the quickstart printed {out!r}, without {expected!r}")
    out = run(block(readme, "Work queue"))
    if "{'episode': 511}" not in out:
        sys.exit(f"the work-queue example printed {out!r}")
    print(f"wheel check: diskcache_oxide {diskcache_oxide.__version__} from {package}: README ran")


if __name__ == "__main__":
    main()

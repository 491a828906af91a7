"""``python -m diskcache_oxide``: the ``diskcache-oxide`` command (see :mod:`.cli`)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":  # importing this module runs nothing
    main(prog_name="python -m diskcache_oxide")

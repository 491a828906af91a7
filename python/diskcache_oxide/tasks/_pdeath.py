"""A process-pool child that dies with its supervisor (issue 29, D-063).

On Linux the child asks the kernel for ``PR_SET_PDEATHSIG`` = SIGKILL: the kernel kills it
the moment its parent goes, whatever the child is doing. A watcher thread cannot promise
that: a task that holds the GIL (a tight Python loop under a long switch interval, a long C
call such as a regex that backtracks or ``sum(range(10**12))``) keeps the watcher from ever
running, and the child would run on after its supervisor's SIGKILL, its job coming back
after the lease and running twice at once.

The signal is sent when the *thread* that forked the child exits, not the process; the pool
therefore forks its children from a thread that lives as long as the pool
(:class:`~._pools.ProcessPool`). Where ``prctl`` is missing (macOS, the BSDs) the child
falls back to the portable watcher thread.

ctypes is imported here, in the child, and only when this runs: importing the package must
not import it.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["die_with_parent"]

#: prctl's option that sets the signal sent to this process when its parent dies.
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> bool:
    """Ask the kernel to SIGKILL this process when its parent (``parent``, its pid) dies.

    Returns True when the kernel will; False where it cannot (not Linux, no ``prctl``), so
    that the caller starts a watcher instead. If the parent died before the request took
    effect (this process was already adopted by another), this exits at once: the kernel
    would never send the signal."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the parent died between our fork and prctl
        os._exit(1)
    return True

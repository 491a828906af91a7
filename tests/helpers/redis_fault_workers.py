"""Bodies of the processes tests/redis/test_redis_faults.py spawns (imported by name, so spawn finds
them): a user's worker that drains a queue while the server restarts under it.

One function per kind of drain, each with the same arguments (``url, namespace, worker, out,
ready, stop, settings``) and the same report on ``out``:
``(worker, taken, errors)``, the values it took in order and the errors it survived. The cache's
queue is the first kind; a JobQueue drain on Redis goes beside it with the same signature.
"""

from __future__ import annotations

import time
from typing import Any


def cache_queue_drain(
    url: str,
    namespace: str,
    worker: int,
    out: Any,
    ready: Any,
    stop: Any,
    settings: dict[str, Any],
) -> None:
    """Pull from the int queue with ``pull(timeout=...)`` until ``stop`` is set and a pull
    finds nothing, as a user's worker would: a connection error or a timeout is logged and the
    loop goes on (the server comes back). ``settings`` are more RedisCache settings."""
    import redis
    from diskcache_oxide.remote import RedisCache

    cache = RedisCache(url, namespace=namespace, **{"timeout": 5.0, **settings})
    cache.peek()  # the scripts are loaded and the connection made before the race starts
    ready.release()
    taken: list[Any] = []
    errors: list[str] = []
    while True:
        try:
            key, value = cache.pull(timeout=0.2)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
            time.sleep(0.05)
            continue
        if key is None:
            if stop.is_set():
                break
            continue
        taken.append(value)
    cache.close()
    out.put((worker, taken, errors))


#: The lease of the job drain: longer than the test's outage (2 s and the AOF's reload), so a job
#: a worker holds across the restart is not taken again while its finish is repeated.
JOB_LEASE = 5.0


def job_queue_drain(
    url: str,
    namespace: str,
    worker: int,
    out: Any,
    ready: Any,
    stop: Any,
    settings: dict[str, Any],
) -> None:
    """Take and finish jobs of the queue ``drain`` (``JobQueue`` on Redis, leased for
    :data:`JOB_LEASE`, no limit on attempts) until ``stop`` is set and no job is left in any
    state, as a user's worker would: a connection error or a timeout is logged and the loop goes
    on. Reports the values of the jobs it ran, a job run twice once per run."""
    import redis
    from diskcache_oxide import JobQueue
    from diskcache_oxide.remote import RedisCache

    cache = RedisCache(url, namespace=namespace, **{"timeout": 5.0, **settings})
    jobs = JobQueue(cache, "drain", lease=JOB_LEASE, max_attempts=0)
    jobs.take()  # the scripts are loaded and the connection made before the race starts
    ready.release()
    ran: list[Any] = []
    errors: list[str] = []
    while True:
        try:
            job = jobs.take(timeout=0.2)
            if job is None:
                if stop.is_set() and len(jobs) == 0:
                    break
                continue
            ran.append(job.value)
            job.finish()  # False if the lease was lost: the job runs again, by the rules
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
            time.sleep(0.05)
    cache.close()
    out.put((worker, ran, errors))

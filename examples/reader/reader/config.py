"""Settings, read from environment variables so that the tests (and you) can make races visible
with short delays and leases."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from .feed import ARTICLES


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = float(raw)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {raw!r}")
    return value


#: Settings of earlier versions, refused rather than silently ignored.
RENAMED = {"READER_CLAIM_TTL": "READER_CLAIM_LEASE", "READER_LEASE": "READER_JOB_LEASE"}


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the app and the worker read from the environment.

    - ``READER_DELAY``: seconds the paid step sleeps before it extracts, standing in for a
      slow paid API (default 2)
    - ``READER_CLAIM_LEASE``: seconds a claim on an article lasts without renewal. The
      library's heartbeat renews it while a paid turn runs, so it need not outlast the slowest
      turn: it only bounds how long a crashed holder blocks the article (default 10)
    - ``READER_WAIT``: seconds a reader's request waits for another lane's result before it
      gives up (the ``timeout`` of compute-once; default: unset, as long as it takes, which
      ends with the value or, if the holder died, with this request paying)
    - ``READER_JOB_LEASE``: seconds a worker's lease on a job lasts (default 60)
    - ``READER_MAX_ATTEMPTS``: takes of a job before it goes to the dead-letter list (default 3)
    - ``READER_POLL``: seconds the tests wait for the worker to take a job (default 1;
      ``diskcache-oxide worker`` itself looks for work and for a stop every second)
    - ``READER_LLM_URL``: base URL of an OpenAI-compatible API (``.../v1``); when set, each
      paid turn also asks it for a summary (default: unset, no summary)
    - ``READER_LLM_MODEL`` (default ``gpt-4o-mini``), ``READER_LLM_KEY`` (sent as a bearer
      token if set), ``READER_LLM_TIMEOUT`` (seconds, default 60)
    - ``READER_ARTICLES``: the feed's directory, a ``feed.json`` and the pages it names
      (default: the shipped ``articles/``)
    - ``READER_HOSTS``: more names for the web app to answer in the Host header, comma
      separated, besides those of the address it is bound to (default: none)
    """

    delay: float = 2.0
    claim_lease: float = 10.0
    wait_timeout: float | None = None
    job_lease: float = 60.0
    max_attempts: int = 3
    poll: float = 1.0
    llm_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_key: str | None = None
    llm_timeout: float = 60.0
    articles: Path = ARTICLES
    hosts: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        for old, new in RENAMED.items():
            if env.get(old):
                raise ValueError(f"{old} is now {new} (the claim's and the job's leases)")
        claim_lease = _seconds(env, "READER_CLAIM_LEASE", 10.0)
        if claim_lease <= 0:
            raise ValueError("READER_CLAIM_LEASE must be > 0")
        job_lease = _seconds(env, "READER_JOB_LEASE", 60.0)
        if job_lease <= 0:
            raise ValueError("READER_JOB_LEASE must be > 0")
        wait = env.get("READER_WAIT")
        return cls(
            delay=_seconds(env, "READER_DELAY", 2.0),
            claim_lease=claim_lease,
            wait_timeout=_seconds(env, "READER_WAIT", 0.0) if wait else None,
            job_lease=job_lease,
            max_attempts=int(env.get("READER_MAX_ATTEMPTS") or 3),
            poll=_seconds(env, "READER_POLL", 1.0),
            llm_url=env.get("READER_LLM_URL") or None,
            llm_model=env.get("READER_LLM_MODEL") or "gpt-4o-mini",
            llm_key=env.get("READER_LLM_KEY") or None,
            llm_timeout=_seconds(env, "READER_LLM_TIMEOUT", 60.0),
            articles=Path(env.get("READER_ARTICLES") or ARTICLES),
            hosts=tuple(h.strip() for h in (env.get("READER_HOSTS") or "").split(",") if h.strip()),
        )

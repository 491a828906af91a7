"""Settings, read from environment variables so that the tests (and you) can make races visible
with short delays, TTLs and leases."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = float(raw)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {raw!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the app and the worker read from the environment.

    - ``READER_DELAY``: seconds the paid step sleeps before it extracts, standing in for a
      slow paid API (default 2)
    - ``READER_CLAIM_TTL``: seconds a claim on an article lasts; longer than a paid turn ever
      takes, short enough that a crashed holder blocks the article only briefly (default 30)
    - ``READER_WAIT``: seconds a caller waits for another lane's result (default: twice the
      claim TTL plus the delay)
    - ``READER_LEASE``: seconds a worker's lease on a job lasts (default 60)
    - ``READER_MAX_ATTEMPTS``: takes of a job before it goes to the dead-letter list (default 3)
    - ``READER_POLL``: seconds the worker blocks waiting for a job before it checks whether it
      was asked to stop (default 1)
    - ``READER_LLM_URL``: base URL of an OpenAI-compatible API (``.../v1``); when set, each
      paid turn also asks it for a summary (default: unset, no summary)
    - ``READER_LLM_MODEL`` (default ``gpt-4o-mini``), ``READER_LLM_KEY`` (sent as a bearer
      token if set), ``READER_LLM_TIMEOUT`` (seconds, default 60)
    """

    delay: float = 2.0
    claim_ttl: float = 30.0
    wait: float = 62.0
    lease: float = 60.0
    max_attempts: int = 3
    poll: float = 1.0
    llm_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_key: str | None = None
    llm_timeout: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        delay = _seconds(env, "READER_DELAY", 2.0)
        ttl = _seconds(env, "READER_CLAIM_TTL", 30.0)
        if ttl <= 0:
            raise ValueError("READER_CLAIM_TTL must be > 0")
        return cls(
            delay=delay,
            claim_ttl=ttl,
            wait=_seconds(env, "READER_WAIT", 2 * ttl + delay),
            lease=_seconds(env, "READER_LEASE", 60.0),
            max_attempts=int(env.get("READER_MAX_ATTEMPTS") or 3),
            poll=_seconds(env, "READER_POLL", 1.0),
            llm_url=env.get("READER_LLM_URL") or None,
            llm_model=env.get("READER_LLM_MODEL") or "gpt-4o-mini",
            llm_key=env.get("READER_LLM_KEY") or None,
            llm_timeout=_seconds(env, "READER_LLM_TIMEOUT", 60.0),
        )

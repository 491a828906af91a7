"""The reader: a feed of articles whose paid clean-up runs once, whichever lane asks first.

- ``reader.app``: the web app (Starlette, server-rendered pages, a little JavaScript): the
  feed, Queue taps, the direct lane (Open), the cost meter, the ledger page.
- ``reader.worker``: the worker lane, as a task that ``diskcache-oxide worker`` runs in its own
  process: tapped articles, oldest first.
- ``reader.pay``: every pay-once call of the app (claims and compute-once of diskcache_oxide).
- ``reader.paid``: the paid step itself (extraction with trafilatura, an optional LLM summary).
- ``reader.store``: the app's directory (cache, job queue, ledger, journal) and the meter.
- ``reader.feed``: the articles shipped in ``articles/``.
- ``python -m reader DIR``: app and worker together, as ``make reader`` runs them.
"""

"""The directory backend's side of the seam (issue 31): what a cache directory supplies to the
features through :mod:`diskcache_oxide._store`. The cache itself is
:class:`diskcache_oxide.Cache` (``core.py``), a subclass of the binding's ``CacheCore``, so
that ``get`` and ``set`` go straight to Rust."""

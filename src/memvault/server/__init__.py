"""``memvault serve``: the memory-stores API, self-hosted, over encrypted git-versioned stores.

``root`` (a server root: the catalog store of memory stores and API keys, one memvault store per
memory store, keys derived from the catalog's), ``catalog`` (the registry's records),
``apikeys`` (secrets, digests, rights), ``app`` (the application object: the route table, its
middleware and the objects every view shares), ``views/`` (one module per kind of endpoint over
``views/base``, which owns authentication, errors, headers and bodies), ``ops`` (access log,
metrics, rate limits), ``run`` (serving with uvicorn: workers, signals, the ready line).
"""

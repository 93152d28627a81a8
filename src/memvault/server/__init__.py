"""``memvault serve``: the memory-stores API over a server root (a catalog store and one store
per memory store): root, catalog, errors, ops (logs, metrics, limits), views/, app, run."""

"""The API's views, one module per kind of endpoint over :mod:`.base`: ``stores`` (memory stores),
``memories``, ``versions`` (memory versions and redaction), ``tool`` (the memory tool's commands,
a memvault extension), ``health`` (liveness, readiness, metrics)."""

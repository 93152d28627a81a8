"""A store kept in object storage: the objects' names and the log record format (layout), which
pack holds which object (packmap), and the replica that syncs a host's cache (replica).

The host's high-water mark of the log lives in the host state (:mod:`memvault.hoststate`).
"""

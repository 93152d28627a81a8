"""A store kept in object storage: the objects' names and the log record format (layout), the
host's authenticated high-water mark (mark), and the replica that syncs a host's cache (replica).
"""

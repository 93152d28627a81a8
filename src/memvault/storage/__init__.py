"""The object-storage seam: create-if-absent, get, list, delete and compare-and-swap of named
objects, with a local-directory and an S3 implementation, and the URL that picks one.
"""

from .base import ObjectInfo, ObjectStore
from .url import is_remote, open_backend, parse_url

__all__ = ["ObjectInfo", "ObjectStore", "is_remote", "open_backend", "parse_url"]

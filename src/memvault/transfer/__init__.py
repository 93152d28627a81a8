"""Moving memories in and out of a store: import a plain directory (``importer``), export a tree or
the whole history as plaintext (``exporter``), copy a store between backends (``copier``).
"""

from .copier import CopyResult, copy_store
from .exporter import ExportResult, export_plaintext_git, export_tree
from .importer import IMAGE_SUFFIXES, ImportRefusedError, ImportResult, Scrubber, SkippedEntry, import_dir

__all__ = [
    "Scrubber",
    "SkippedEntry",
    "ImportResult",
    "ExportResult",
    "ImportRefusedError",
    "import_dir",
    "export_tree",
    "export_plaintext_git",
    "IMAGE_SUFFIXES",
    "CopyResult",
    "copy_store",
]

"""The git layer: the only importer of ``dulwich``, and it sees ciphertext only.

Object formats (``objects``, ``pack``), the pack reader and directory, the branch, the repository.
"""

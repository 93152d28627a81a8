"""The git layer, the only importer of ``dulwich``; it sees ciphertext only: object and pack
formats, the pack reader and directory, the branch, the repository.
"""

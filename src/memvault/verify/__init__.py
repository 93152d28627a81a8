"""Verify a whole store offline: every object, commit, shard, file version, the freshness mark,
the keyring and the key slots (``checker``), reported as typed problems (``report``).
"""

from .checker import verify
from .report import Problem, Severity, VerifyReport

__all__ = ["Problem", "Severity", "VerifyReport", "verify"]

"""The sensitive-data scrubber: finds credentials and personal data in text before it is stored.
Owns the validators, the detector rules, the engine that scans and masks, and the guard on writes."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memvault.scrub.engine import (
        CREDENTIAL_KINDS,
        KINDS,
        PII_KINDS,
        Finding,
        Scrubber,
        ScrubResult,
        mask_marker,
        redaction_marker,
    )
    from memvault.scrub.validators import entropy_at_least as entropy_at_least
    from memvault.scrub.validators import github_checksum_valid as github_checksum_valid
    from memvault.scrub.validators import iban_valid as iban_valid
    from memvault.scrub.validators import is_placeholder as is_placeholder
    from memvault.scrub.validators import jwt_valid as jwt_valid
    from memvault.scrub.validators import luhn_valid as luhn_valid
    from memvault.scrub.validators import shannon_entropy as shannon_entropy

__all__ = [
    "Scrubber",
    "Finding",
    "ScrubResult",
    "KINDS",
    "CREDENTIAL_KINDS",
    "PII_KINDS",
    "mask_marker",
    "redaction_marker",
]

#: The module of each name importable from here (``__all__`` and the validators, importable from
#: ``memvault.scrub`` before it became a package). Loaded on first use: :mod:`memvault.scrub.guard`
#: is imported by every write path, and a store whose scrubber is disabled never compiles the rules.
_HOMES: dict[str, str] = {
    **dict.fromkeys(__all__, "engine"),
    **dict.fromkeys(
        (
            "entropy_at_least",
            "github_checksum_valid",
            "iban_valid",
            "is_placeholder",
            "jwt_valid",
            "luhn_valid",
            "shannon_entropy",
        ),
        "validators",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'memvault.scrub' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"memvault.scrub.{home}"), name)
    globals()[name] = value
    return value

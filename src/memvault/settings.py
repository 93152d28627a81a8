"""Every tunable of a store in one validated model.

A store keeps its :class:`StoreSettings` (authenticated, in ``memvault.json``); the limits here
are what the memory tool enforces before anything is written.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["StoreSettings", "KdfParams", "DEFAULT_KDF", "MIN_KDF", "MAX_KDF_MEMORY_KIB", "MAX_KDF_ITERATIONS"]

#: Argon2id floor accepted in a key slot (OWASP: m >= 19 MiB with t >= 2).
MIN_KDF_MEMORY_KIB = 19 * 1024
MIN_KDF_ITERATIONS = 2
#: Upper bounds checked *before* the KDF runs, so a hostile key slot cannot exhaust the host.
MAX_KDF_MEMORY_KIB = 4 * 1024 * 1024
MAX_KDF_ITERATIONS = 10
MAX_KDF_LANES = 16


class KdfParams(BaseModel):
    """Argon2id parameters of a passphrase key slot (RFC 9106 second option by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_kib: int = Field(default=64 * 1024, ge=8, le=MAX_KDF_MEMORY_KIB)
    iterations: int = Field(default=3, ge=1, le=MAX_KDF_ITERATIONS)
    lanes: int = Field(default=4, ge=1, le=MAX_KDF_LANES)

    @model_validator(mode="after")
    def _argon2_memory_covers_lanes(self) -> KdfParams:
        if self.memory_kib < 8 * self.lanes:  # an Argon2 requirement (RFC 9106 3.1)
            raise ValueError("memory_kib must be at least 8 * lanes")
        return self


#: Production default: m=64 MiB, t=3, p=4 (about 0.2 s on the reference machine).
DEFAULT_KDF = KdfParams()
#: The OWASP floor, documented as the weakest setting worth choosing. memvault never picks
#: less on its own (the CLI always uses DEFAULT_KDF); a caller passing ``kdf=`` explicitly
#: (the test suite does, to stay fast) gets exactly what it asked for.
MIN_KDF = KdfParams(memory_kib=MIN_KDF_MEMORY_KIB, iterations=MIN_KDF_ITERATIONS, lanes=1)


class StoreSettings(BaseModel):
    """Behaviour and limits of a store. Defaults follow Anthropic's managed memory stores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``create`` on an existing file: refuse (reference behaviour) or overwrite.
    overwrite_on_create: bool = False
    #: Largest file, in UTF-8 bytes (100 KiB like Anthropic's managed memory stores).
    max_file_bytes: int = Field(default=100 * 1024, ge=1, le=64 * 1024 * 1024)
    #: Longest path, in UTF-8 bytes, including the ``/memories`` prefix.
    max_path_bytes: int = Field(default=1024, ge=16, le=4096)
    #: Longest single path segment, in UTF-8 bytes (the common filesystem limit).
    max_segment_bytes: int = Field(default=255, ge=1, le=1024)
    #: Deepest nesting below ``/memories``.
    max_depth: int = Field(default=16, ge=1, le=64)
    #: Most files (not directories) a store holds.
    max_files: int = Field(default=100_000, ge=1)
    #: A file view without ``view_range`` shows at most this many characters of content.
    view_max_chars: int = Field(default=16_000, ge=100)
    #: ``full``: objects, keyring and ref are fsynced before a command returns.
    #: ``none``: nothing is fsynced (fast; a power loss may lose recent commands).
    durability: Literal["full", "none"] = "full"

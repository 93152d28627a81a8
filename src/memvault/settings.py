"""Every tunable of a store in one validated model.

A store keeps its :class:`StoreSettings` (authenticated, in ``memvault.json``); the limits here
are what the memory tool enforces before anything is written.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

__all__ = [
    "StoreSettings",
    "KdfParams",
    "DEFAULT_KDF",
    "MIN_KDF",
    "MAX_KDF_MEMORY_KIB",
    "MAX_KDF_ITERATIONS",
    "ScrubSettings",
    "CustomRule",
    "ScrubPolicy",
    "SCRUB_CREDENTIAL_KINDS",
    "SCRUB_PII_KINDS",
    "SCRUB_KINDS",
    "MAX_CUSTOM_PATTERN_CHARS",
]

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


# -- scrubber ------------------------------------------------------------------------------------

#: Kinds of credential the scrubber knows (:mod:`memvault.scrub` re-exports these tuples).
SCRUB_CREDENTIAL_KINDS: tuple[str, ...] = (
    "anthropic_api_key",
    "openai_api_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "google_api_key",
    "azure_connection_string",
    "github_token",
    "gitlab_token",
    "slack_token",
    "slack_webhook",
    "stripe_key",
    "twilio_account_sid",
    "twilio_auth_token",
    "sendgrid_api_key",
    "npm_token",
    "pypi_token",
    "jwt",
    "private_key",
    "basic_auth",
    "password_assignment",
    "bearer_token",
    "generic_secret",
)
#: Kinds of personal data (``ip`` is its own kind so it can be set to ``allow`` alone).
SCRUB_PII_KINDS: tuple[str, ...] = ("email", "phone", "credit_card", "ssn", "iban", "ip", "dob")
SCRUB_KINDS: tuple[str, ...] = SCRUB_CREDENTIAL_KINDS + SCRUB_PII_KINDS

#: What happens to a finding: replaced by ``[REDACTED:<kind>]``, the whole write refused, or kept.
ScrubPolicy = Literal["redact", "reject", "allow"]

#: Longest custom rule pattern accepted. Python's ``re`` has no timeout: a pattern with nested
#: quantifiers (``(a+)+``) can backtrack exponentially, so custom patterns are bounded in size and
#: the obvious nested-quantifier shapes are refused; the rest is the operator's responsibility.
MAX_CUSTOM_PATTERN_CHARS = 1000
_KIND_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")
#: A group that ends in a quantifier and is itself quantified: ``(x+)+``, ``(x*)*``, ``(x+){2,}``.
_NESTED_QUANTIFIER_RE = re.compile(r"[+*}]\)[+*{]")


class CustomRule(BaseModel):
    """An operator-defined scrub rule: a regex, optionally checked by a validator.

    The finding is the named group ``value`` if the pattern has one, else group 1 if it has
    groups, else the whole match.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(min_length=1, max_length=40)
    pattern: str = Field(min_length=1, max_length=MAX_CUSTOM_PATTERN_CHARS)
    validator: Literal["luhn", "iban", "entropy"] | None = None

    @field_validator("kind")
    @classmethod
    def _safe_kind(cls, value: str) -> str:
        if not _KIND_RE.fullmatch(value):
            raise ValueError("kind must be a lower-case identifier ([a-z][a-z0-9_]*, at most 40 characters)")
        return value

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern does not compile: {exc.msg}") from None
        if compiled.search("") is not None:
            raise ValueError("pattern matches the empty string")
        if _NESTED_QUANTIFIER_RE.search(value):
            raise ValueError("pattern has a quantified group ending in a quantifier (catastrophic backtracking risk)")
        return value


def _default_policy() -> dict[str, ScrubPolicy]:
    return dict.fromkeys(SCRUB_KINDS, "redact")


def _empty_list() -> list[Any]:
    # Not ``default_factory=list``: pydantic inspects the factory's signature, and for a builtin
    # that compiles the tokenize module's regular expressions (about 20 ms of every import).
    return []


class ScrubSettings(BaseModel):
    """Policy of the sensitive-data scrubber that runs before every write."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``False`` turns the scrubber off entirely (nothing is scanned, nothing redacted).
    enabled: bool = True
    #: Per kind: ``redact`` (default for every kind), ``reject`` or ``allow`` (the rule is off).
    #: Kinds not listed are ``redact``; after validation every known and custom kind is listed.
    policy: dict[str, ScrubPolicy] = Field(default_factory=_default_policy)
    #: Exact values that are never reported (for example a public test key).
    allowlist: list[str] = Field(default_factory=_empty_list, max_length=10_000)
    #: Extra rules; their kinds may be new names or built-in kinds.
    custom_rules: list[CustomRule] = Field(default_factory=_empty_list, max_length=200)

    @model_validator(mode="after")
    def _complete_policy(self) -> ScrubSettings:
        known = set(SCRUB_KINDS) | {rule.kind for rule in self.custom_rules}
        unknown = sorted(set(self.policy) - known)
        if unknown:
            raise ValueError(f"policy names unknown kinds: {', '.join(unknown)}")
        full: dict[str, ScrubPolicy] = {kind: "redact" for kind in SCRUB_KINDS}
        full.update({rule.kind: "redact" for rule in self.custom_rules})
        full.update(self.policy)
        object.__setattr__(self, "policy", full)
        return self


_DEFAULT_SCRUB = ScrubSettings()


#: Default of :attr:`StoreSettings.max_total_bytes`: 1 GiB of content.
DEFAULT_MAX_TOTAL_BYTES = 1024 * 1024 * 1024
#: Default of :attr:`StoreSettings.max_stored_bytes`: 16 GiB of packed history.
DEFAULT_MAX_STORED_BYTES = 16 * 1024 * 1024 * 1024


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
    #: Most bytes of content (plaintext, all files of the head together) a store holds.
    max_total_bytes: int = Field(default=DEFAULT_MAX_TOTAL_BYTES, ge=1)
    #: Most bytes the store's history may take on disk (its packs): a commit that writes content
    #: past it is refused. History only grows (every version stays); see SECURITY.md "Limits".
    max_stored_bytes: int = Field(default=DEFAULT_MAX_STORED_BYTES, ge=1)
    #: A file view without ``view_range`` shows at most this many characters of content.
    view_max_chars: int = Field(default=16_000, ge=100)
    #: ``full``: objects and the keyring record are durable (fsync or syncfs) before a command
    #: returns, and with them the commit (the branch move is synced then or by the next commit).
    #: ``none``: nothing is fsynced (fast; a power loss may lose recent commands).
    durability: Literal["full", "none"] = "full"
    #: Sensitive-data scrubber applied to every write (see :mod:`memvault.scrub`).
    scrub: ScrubSettings = Field(default_factory=lambda: ScrubSettings())
    #: Days a superseded or deleted version stays readable; older ones are crypto-shredded by
    #: ``memvault expire --history`` and ``memvault gc`` (:mod:`memvault.erasure.retention`). None: keep
    #: every version; 0: nothing readable beyond the head.
    retain_history_days: int | None = Field(default=None, ge=0, le=1_000_000)
    #: Which path grammar the store's paths follow (:mod:`memvault.paths`): ``memvault`` (portable
    #: to every filesystem, case-insensitively unique siblings) or ``api`` (the memory-stores API's:
    #: case-sensitive, any name that is NFC text without control or format characters). Chosen
    #: when the store is made (``memvault server`` makes ``api`` stores); ``config set`` refuses a change.
    path_grammar: Literal["memvault", "api"] = "memvault"

    @model_serializer(mode="wrap")
    def _omit_default_scrub(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        # Stores created before the scrubber authenticate their settings as dumped then; a
        # default scrub section is left out so their configuration stays byte-identical.
        data = handler(self)
        if isinstance(data, dict):
            # Likewise for settings added later, when they have their default.
            if self.scrub == _DEFAULT_SCRUB:
                data.pop("scrub", None)
            if self.max_total_bytes == DEFAULT_MAX_TOTAL_BYTES:
                data.pop("max_total_bytes", None)
            if self.max_stored_bytes == DEFAULT_MAX_STORED_BYTES:
                data.pop("max_stored_bytes", None)
            if self.retain_history_days is None:
                data.pop("retain_history_days", None)
            if self.path_grammar == "memvault":
                data.pop("path_grammar", None)
        return data

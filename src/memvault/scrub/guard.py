"""A store's scrub policy applied to a write: texts masked or refused, paths checked.

Every write path calls these (:mod:`memvault.protocol.commands` for the memory tool, :mod:`memvault.transfer`
for imports), so a store accepts the same whichever way a write arrives. They fail closed: if the
scrubber raises, the write is refused with :class:`~memvault.errors.InternalError`. A store whose
scrubber is disabled stores texts as given, and its scrubber is never built (the rules are compiled
when :mod:`memvault.scrub.engine` is first imported, here on first use).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from memvault.errors import InternalError, SensitiveDataError
from memvault.paths import MemoryPath, parse_path

if TYPE_CHECKING:
    from memvault.scrub.engine import Scrubber
    from memvault.store import AnyBranch

__all__ = ["scrubber_for", "scrub_text", "scrub_edit", "check_path", "hook"]

_FAILED = "The sensitive-data scrubber failed; nothing was written."

#: The scrubber of each store object and the settings it was built from, built on first use
#: (dropped with the store).
_SCRUBBERS: weakref.WeakKeyDictionary[AnyBranch, tuple[object, Scrubber]] = weakref.WeakKeyDictionary()


def scrubber_for(store: AnyBranch) -> Scrubber:
    """The scrubber configured by ``store.settings.scrub``, built once per store object and
    built again when those settings change (``memvault config set``).

    Two threads asking at once may each build one; either serves (they are equal). Raises
    whatever building it raises (a custom rule's regex, for one)."""
    wanted = store.settings.scrub
    cached = _SCRUBBERS.get(store)
    if cached is not None and (cached[0] is wanted or cached[0] == wanted):
        return cached[1]
    from memvault.scrub.engine import Scrubber

    scrubber = Scrubber(wanted)
    _SCRUBBERS[store] = (wanted, scrubber)
    return scrubber


def scrub_text(store: AnyBranch, text: str, findings: dict[str, int]) -> str:
    """``text`` as ``store`` may keep it: every finding masked, and counted per kind in ``findings``.

    Raises:
        SensitiveDataError: a finding is of a kind whose policy is ``reject`` (nothing is counted).
        InternalError: the scrubber failed.
    """
    if not store.settings.scrub.enabled:
        return text
    try:
        result = scrubber_for(store).apply(text)
    except Exception:
        raise InternalError(_FAILED) from None
    return _outcome(result.text, result.counts, result.rejected, findings)


def scrub_edit(store: AnyBranch, text: str, start: int, end: int, findings: dict[str, int]) -> str:
    """:func:`scrub_text` for an edit that wrote ``text[start:end]`` into a file the store already
    scrubbed: only the text around the edit is scanned
    (:meth:`~memvault.scrub.engine.Scrubber.apply_window`: the edited lines and 256 characters each
    side for every rule, 16 KiB for key blocks), wide enough for a secret split across the edit, and
    every other occurrence of a credential found there is masked too. Findings are counted in ``findings``.

    Raises:
        SensitiveDataError: a finding is of a kind whose policy is ``reject`` (nothing is counted).
        InternalError: the scrubber failed.
    """
    if not store.settings.scrub.enabled:
        return text
    try:
        result = scrubber_for(store).apply_window(text, start, end)
    except Exception:
        raise InternalError(_FAILED) from None
    return _outcome(result.text, result.counts, result.rejected, findings)


def _outcome(text: str, counts: dict[str, int], rejected: list[str], findings: dict[str, int]) -> str:
    if rejected:
        kinds = ", ".join(sorted(set(rejected)))
        raise SensitiveDataError(
            f"Error: The text contains sensitive data ({kinds}) that must not be stored in memory. "
            "Nothing was written; remove it and try again."
        )
    for kind, n in counts.items():
        findings[kind] = findings.get(kind, 0) + n
    return text


def check_path(store: AnyBranch, path: MemoryPath) -> None:
    """Refuse a path holding sensitive data: a path is never masked (the name would change).

    Raises:
        SensitiveDataError: ``path`` holds a finding of a kind whose policy is not ``allow``.
        InternalError: the scrubber failed.
    """
    if not store.settings.scrub.enabled:
        return
    try:
        scrubber = scrubber_for(store)
        kinds = sorted({f.kind for f in scrubber.scan(path.text) if scrubber.policy(f.kind) != "allow"})
    except Exception:
        raise InternalError(_FAILED) from None
    if kinds:
        raise SensitiveDataError(
            f"Error: The path contains sensitive data ({', '.join(kinds)}); memory file names must not "
            "hold it. Choose another name. Nothing was written."
        )


def hook(store: AnyBranch, findings: dict[str, int]) -> Callable[[str, str], str]:
    """The scrubber as a ``hook(field, value) -> value`` for other write paths (imports).

    A ``"path"`` value is parsed and checked (:func:`check_path`) and returned as given; any other
    value is a text, returned masked (:func:`scrub_text`, counts added to ``findings``). The hook
    raises what those raise, and :class:`~memvault.errors.InvalidPathError` for a bad path.
    """

    def apply(field: str, value: str) -> str:
        if field == "path":
            check_path(store, parse_path(value, store.settings))
            return value
        return scrub_text(store, value, findings)

    return apply

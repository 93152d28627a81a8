"""Run a consolidation pass ("dream") with the Anthropic API on a side branch of a store.

:func:`run_dream` forks a branch ``dream/<id>`` from ``main``'s head, tells the model what the
audit of the memory found (and, if given, what recent session transcripts said, scrubbed), and lets
it work through the memory tool on the branch, turn by turn, until it is done, a quota stops it or
it has used its turns. ``main`` is never written: a person reviews the branch and merges or
discards it (:mod:`memvault.dream.review`). The only dream module that imports ``anthropic``.

Quotas (:class:`DreamQuotas`) bound what one pass may change, measured against the fork point: a
command that would go over one is refused with a protocol-style error the model reads (nothing
written), and the pass stops after the model's next turn.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anthropic

from ..admin.audit import audit
from ..agent.tool import MemoryTool
from ..errors import InternalError, InvalidInputError, LimitExceededError, ServiceError
from ..paths import ROOT, parse_path
from ..scrub.guard import scrubber_for
from ..store import Transaction
from .prompt import build_request, dream_model, read_transcripts

if TYPE_CHECKING:
    from ..store import BranchStore, MemoryStore

__all__ = [
    "DreamQuotas",
    "DreamResult",
    "SERVICE",
    "file_digests",
    "changes_since",
    "quota_files_message",
    "quota_bytes_message",
    "transcript_scrubber",
    "run_dream",
]

#: How errors of the Messages API name the service.
SERVICE: Final = "The Anthropic API"
#: ``DreamResult.stopped``: the model finished, a quota stopped it, or it used its turns.
STOP_DONE: Final = "done"
STOP_QUOTA: Final = "quota"
STOP_TURNS: Final = "turns"
#: Stop reasons after which the model's turn goes on (the runner sends another request).
_GOES_ON: Final = frozenset({"tool_use", "pause_turn", "compaction"})
_TOKEN: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_AUTH_HEADERS: Final = frozenset({"authorization", "x-api-key"})
_NO_CREDENTIALS: Final = (
    "No usable Anthropic API credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, or an Anthropic profile)."
)


@dataclass(frozen=True)
class DreamQuotas:
    """What one consolidation pass may change, measured against the fork point.

    Attributes:
        max_changed_files: files whose content differs from the fork point: added, changed,
            deleted, or renamed away (a rename counts its old and its new path).
        max_deleted_bytes: bytes of fork-point files no longer at their path on the branch
            (deleted or renamed away).
    """

    max_changed_files: int = 50
    max_deleted_bytes: int = 65536


@dataclass(frozen=True)
class DreamResult:
    """What :func:`run_dream` did.

    Attributes:
        dream_id: the pass's id, 16 hex digits.
        branch: the side branch it wrote (``dream/<dream_id>``).
        fork_point: the commit of ``main`` the branch was forked from (hex).
        model: the model that ran it.
        commits: commits the model made on the branch (the fork commit not counted).
        changed_files: the files whose content differs from the fork point, sorted.
        deleted_bytes: bytes of fork-point files no longer at their path.
        stopped: ``"done"`` (the model finished), ``"quota"`` (a quota refused a change; the pass
            stopped after the model's next turn) or ``"turns"`` (``max_turns`` used up).
        summary: the text of the model's last turn (may be empty).
        refused: tool calls answered with an error (a bad path, a quota, a failed edit).
    """

    dream_id: str
    branch: str
    fork_point: str
    model: str
    commits: int
    changed_files: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    stopped: str = STOP_DONE
    summary: str = ""
    refused: int = 0

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON values (every attribute, under its own name)."""
        return {
            "dream_id": self.dream_id,
            "branch": self.branch,
            "fork_point": self.fork_point,
            "model": self.model,
            "commits": self.commits,
            "changed_files": list(self.changed_files),
            "deleted_bytes": self.deleted_bytes,
            "stopped": self.stopped,
            "summary": self.summary,
            "refused": self.refused,
        }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def quota_files_message(limit: int) -> str:
    """The tool error of a command refused by ``max_changed_files`` (``limit``)."""
    return (
        f"Error: This consolidation pass may change at most {_plural(limit, 'file')} (quota); the change was not "
        "made. Stop changing files and finish with your summary."
    )


def quota_bytes_message(limit: int) -> str:
    """The tool error of a command refused by ``max_deleted_bytes`` (``limit``)."""
    return (
        f"Error: This consolidation pass may delete at most {_plural(limit, 'byte')} of the memory it started "
        "from (quota); the change was not made. Stop changing files and finish with your summary."
    )


def file_digests(view: Transaction) -> dict[str, tuple[bytes, int]]:
    """``path -> (sha256, size)`` of every file under ``/memories`` in ``view``."""
    out: dict[str, tuple[bytes, int]] = {}
    for path in view.descendants(parse_path(ROOT, view.settings)):
        node = view.get(path)
        if node is not None and not node.is_dir:
            out[path.text] = (node.sha256, node.size)
    return out


def changes_since(fork: Mapping[str, tuple[bytes, int]], now: Mapping[str, tuple[bytes, int]]) -> tuple[list[str], int]:
    """What changed between two :func:`file_digests`.

    Returns:
        ``(changed, deleted_bytes)``: the paths whose content differs (added, changed or gone),
        sorted, and the bytes of ``fork``'s files that are gone: a whole file whose path ``now``
        has no file at, and for a file that shrank, what it lost (emptying a file is deleting it).
    """
    changed = sorted(p for p in fork.keys() | now.keys() if (fork.get(p) or (None,))[0] != (now.get(p) or (None,))[0])
    deleted = sum(size - min(size, now[path][1] if path in now else 0) for path, (_digest, size) in fork.items())
    return changed, deleted


class _QuotaGuard:
    """The branch's guard: refuses a transaction that would take the branch over a quota."""

    def __init__(self, fork: dict[str, tuple[bytes, int]], quotas: DreamQuotas) -> None:
        self.fork = fork
        self.quotas = quotas
        self.hit = False

    def __call__(self, txn: Transaction) -> None:
        changed, deleted = changes_since(self.fork, file_digests(txn))
        if len(changed) > self.quotas.max_changed_files:
            self.hit = True
            raise LimitExceededError(quota_files_message(self.quotas.max_changed_files))
        if deleted > self.quotas.max_deleted_bytes:
            self.hit = True
            raise LimitExceededError(quota_bytes_message(self.quotas.max_deleted_bytes))


def transcript_scrubber(store: MemoryStore) -> Callable[[str], str]:
    """The store's scrubber as a masking function for transcripts: every finding masked (the kinds
    the policy rejects in writes too, since a transcript is not stored). A store whose scrubber is
    disabled passes texts as they are.

    Returns:
        ``scrub(text) -> masked text``, which raises :class:`InternalError` if the scrubber fails.
    """

    def scrub(text: str) -> str:
        if not store.settings.scrub.enabled:
            return text
        try:
            return scrubber_for(store).apply(text).text
        except Exception:
            raise InternalError("The sensitive-data scrubber failed on a transcript; nothing was sent.") from None

    return scrub


def _check(quotas: DreamQuotas, max_turns: int, max_tokens: int, actor: str) -> None:
    numbers = {
        "max_changed_files": (quotas.max_changed_files, 0),
        "max_deleted_bytes": (quotas.max_deleted_bytes, 0),
        "max_turns": (max_turns, 1),
        "max_tokens": (max_tokens, 1),
    }
    for name, (value, least) in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidInputError(f"{name} must be a whole number of at least {least}.")
    if not actor or not actor.strip():
        raise InvalidInputError("The actor of a dream must not be empty.")


def _default_client() -> anthropic.Anthropic:
    """``anthropic.Anthropic()`` from the environment, checked for credentials."""
    try:
        client = anthropic.Anthropic()
    except anthropic.CredentialsError:  # a profile named or configured but not usable
        raise InvalidInputError(_NO_CREDENTIALS) from None
    except anthropic.AnthropicError as err:
        raise ServiceError(SERVICE, "set up its client", type(err).__name__) from None
    headers = {name.lower() for name in client.default_headers}
    if not client.auth_headers and client.credentials is None and not headers & _AUTH_HEADERS:
        raise InvalidInputError(_NO_CREDENTIALS)
    return client


def _api_error(err: anthropic.AnthropicError, branch: str) -> ServiceError:
    """``err`` as a :class:`ServiceError` naming the API and the status, never the request or the
    API's own message (which may quote the request)."""
    action = f"answer the consolidation pass on {branch}"
    if isinstance(err, anthropic.APIStatusError):
        reason = f"HTTP {err.status_code}"
        body = err.body
        kind = body.get("error") if isinstance(body, dict) else None
        kind = kind.get("type") if isinstance(kind, dict) else None
        if isinstance(kind, str) and _TOKEN.fullmatch(kind):
            reason += f" ({kind})"
    elif isinstance(err, anthropic.APITimeoutError):
        reason = "the request timed out"
    elif isinstance(err, anthropic.APIConnectionError):
        reason = "it could not be reached"
    else:
        reason = type(err).__name__
    return ServiceError(SERVICE, action, reason)


def _text_of(message: Any) -> str:
    """The text blocks of a reply, joined."""
    return "".join(getattr(block, "text", "") for block in message.content if getattr(block, "type", "") == "text")


def _errors_in(response: Mapping[str, Any] | None) -> int:
    """The ``tool_result`` blocks of ``response`` flagged ``is_error``."""
    content = response.get("content") if response is not None else None
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result" and b.get("is_error"))


def run_dream(
    store: MemoryStore,
    *,
    client: anthropic.Anthropic | None = None,
    model: str | None = None,
    instructions: str | None = None,
    transcripts: Path | None = None,
    quotas: DreamQuotas = DreamQuotas(),  # noqa: B008 (frozen)
    max_turns: int = 40,
    max_tokens: int = 4096,
    actor: str = "dream",
) -> DreamResult:
    """Run one consolidation pass of ``store``'s memory on a new side branch.

    Everything that can be checked before the branch exists is (arguments, the transcripts,
    the client's credentials, the request); then the branch ``dream/<id>`` is forked from
    ``main``'s head (its fork commit records the model and the quotas; the request holds the
    audit of the memory at the fork point), and the model works on the branch through
    :class:`~memvault.agent.tool.MemoryTool` (each change one commit by ``actor``, session ``<id>``),
    one turn per request, until it finishes, until the turn after a quota refused a change, or
    until ``max_turns`` turns (a last turn's tool calls are then not run). A turn cut short by
    ``max_tokens`` ends the pass like a finished one. ``main`` is never written. If the pass fails
    after the fork, the branch is kept as it is, for review or discard.

    Args:
        store: an open local store.
        client: the Messages API client (default: ``anthropic.Anthropic()``, which reads
            ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``).
        model: the model (default: :func:`~memvault.dream.prompt.dream_model`).
        instructions: the operator's extra instructions for the model.
        transcripts: a directory of session transcripts (``*.txt``, ``*.md``, ``*.json``,
            ``*.jsonl``), masked by the store's scrubber before they are sent.
        quotas: what the pass may change.
        max_turns: the model's turns (requests) at most.
        max_tokens: ``max_tokens`` of each request.
        actor: the actor of the branch's commits.

    Returns:
        What the pass did (:class:`DreamResult`).

    Raises:
        InvalidInputError: a bad argument (instructions too long too), a transcripts path that
            is no directory, or no credentials for the default client.
        ServiceError: the Messages API failed (the message names its HTTP status, never the
            request); the branch stays.
        StorageError: the transcripts could not be read.
        InternalError: the scrubber failed on a transcript.
        IntegrityError, ...: as any read or write of the store.
    """
    _check(quotas, max_turns, max_tokens, actor)
    model = dream_model(model)
    texts = read_transcripts(transcripts, transcript_scrubber(store)) if transcripts is not None else []
    if client is None:
        client = _default_client()
    dream_id = secrets.token_hex(8)
    branch = store.branch(f"dream/{dream_id}")
    head = store.head[0]
    system, user = build_request(audit(store), instructions=instructions, transcripts=texts)
    extra = {
        "model": model,
        "max_changed_files": str(quotas.max_changed_files),
        "max_deleted_bytes": str(quotas.max_deleted_bytes),
    }
    branch.create(actor=actor, session=dream_id, extra=extra)
    fork_point = branch.fork_point
    if fork_point != head:  # main moved between the audit and the fork: audit what the branch starts from
        system, user = build_request(audit(branch), instructions=instructions, transcripts=texts)
    fork = file_digests(Transaction(branch, branch.state_at(fork_point)))
    guard = _QuotaGuard(fork, quotas)
    branch.guard = guard
    try:
        summary, stopped, refused = _converse(
            client, branch, guard, model=model, system=system, user=user, max_turns=max_turns,
            max_tokens=max_tokens, actor=actor, session=dream_id,
        )  # fmt: skip
    finally:
        branch.guard = None
    changed, deleted = changes_since(fork, file_digests(branch.snapshot()))
    return DreamResult(
        dream_id=dream_id,
        branch=branch.name,
        fork_point=fork_point.decode("ascii"),
        model=model,
        commits=len(branch.branch_commits()) - 1,
        changed_files=changed,
        deleted_bytes=deleted,
        stopped=stopped,
        summary=summary,
        refused=refused,
    )


def _converse(
    client: anthropic.Anthropic,
    branch: BranchStore,
    guard: _QuotaGuard,
    *,
    model: str,
    system: str,
    user: str,
    max_turns: int,
    max_tokens: int,
    actor: str,
    session: str,
) -> tuple[str, str, int]:
    """The model's turns on ``branch``: ``(summary, stopped, refused)``."""
    summary, stopped, refused = "", STOP_DONE, 0
    try:
        runner = client.beta.messages.tool_runner(
            model=model,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": user}],
            tools=[MemoryTool(branch, actor=actor, session=session)],
            max_iterations=max_turns,
        )
        try:
            for turns, message in enumerate(runner, 1):
                summary = _text_of(message)
                if message.stop_reason not in _GOES_ON:
                    continue  # the model finished: the runner stops by itself
                if guard.hit:
                    break  # the turn after a refusal by quota was the last
                if turns >= max_turns:
                    stopped = STOP_TURNS
                    break
                if message.stop_reason == "tool_use":
                    # Runs the turn's tool calls now; the runner sends these very results.
                    refused += _errors_in(runner.generate_tool_call_response())
        finally:
            runner.close()
    except anthropic.AnthropicError as err:
        raise _api_error(err, branch.name) from None
    return summary, STOP_QUOTA if guard.hit else stopped, refused

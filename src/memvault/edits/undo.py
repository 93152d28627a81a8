"""Undo without destroying history: revert a commit, restore a path, roll the tree back.

Undo (each is one new commit attributed to the operator; nothing is rewritten, so every old
revision stays readable):

- :func:`revert` undoes one commit: what it created is deleted, what it deleted is re-created
  with the old content, what it modified gets the content it had before, what it renamed is
  renamed back. A path the commit touched that changed again afterwards is a conflict
  (:class:`~memvault.errors.ConflictError` naming the paths), even when it changed back to its
  state from before the commit (renamed away, deleted again): the revert then refuses rather
  than guess. When every path is already as before the commit (reverted already), the result
  is a no-op (no commit).
  A directory the commit created is removed only when it is empty after the revert (it may
  hold files created later, which the revert does not own).
- :func:`restore` puts one file or directory subtree back to its state at a revision
  (including a path deleted since).
- :func:`rollback` makes the whole tree equal to the tree at a revision.

What is put back passes the store's scrubber as a write does, under the policy in force now
(:mod:`memvault.scrub.guard`): every path the command creates or writes a file at is checked as
the memory tool's ``create`` and ``rename`` check theirs (the path grammar and limits, then the
path scrubber: a path is never masked), and every text content put back is scrubbed as
``create`` scrubs its text. A finding of a ``redact`` kind is masked (``[REDACTED:<kind>]``),
counted in the result's and the commit's ``findings`` and named in the result's ``note``; a
finding of a ``reject`` kind, or a path holding any finding that is not ``allow``, refuses the
whole command (:class:`~memvault.errors.SensitiveDataError` naming the kinds, never a value;
nothing is written). Binary files (images) are put back as they were: the scrubber reads text
only. So what the policy rejects now never comes back to the head, whatever history holds.

Contents put back are re-encrypted as new versions (fresh data keys). A file put back
continues the lineage of the file now at that path, else of the file moved away from it in
the same command (a rename back), else of the old version itself unless that lineage is still
live elsewhere (then it starts a new lineage). Nothing that would change nothing is committed:
the result then has ``commit_id=None`` and a ``note`` saying why.

:func:`revert` and :func:`restore` also preview (``dry_run=True``: the changes they would make
now, nothing written); a run given that preview as ``expect`` writes nothing unless its changes
are still exactly those, so what an operator confirmed is what happens.

The library never prints; results are frozen dataclasses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import crypto
from ..errors import (
    ConflictError,
    InvalidInputError,
    PathNotFoundError,
    RedactedError,
    SensitiveDataError,
)
from ..format.records import Node
from ..history import Change, resolve
from ..paths import ROOT, MemoryPath, parse_path
from ..scrub.guard import check_path, scrub_text
from ..store import MemoryStore, Transaction

__all__ = [
    "UndoCommand",
    "UndoResult",
    "revert",
    "restore",
    "rollback",
]

UndoCommand = Literal["revert", "restore", "rollback"]
#: Re-plans when another writer commits between planning and taking the lock.
_ATTEMPTS = 8
_ROOT_PATH = MemoryPath(())


@dataclass(frozen=True)
class UndoResult:
    """What a revert, restore or rollback did.

    ``target`` is the commit reverted (revert) or the revision restored from / rolled back to,
    as a full hex id with its sequence number ``target_seq``. ``commit_id``/``seq`` name the new
    commit, or are ``None`` when nothing had to change (``note`` then says why). ``findings``
    counts, per kind, what the scrubber masked in the contents put back (also recorded in the
    commit); ``note`` then says so.
    """

    command: UndoCommand
    target: str
    target_seq: int
    commit_id: str | None
    seq: int | None
    changes: tuple[Change, ...]
    note: str = ""
    findings: dict[str, int] = field(default_factory=dict)
    #: A preview (``dry_run=True``): ``changes`` and ``findings`` are what the command would
    #: make and mask now; nothing was written.
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return self.commit_id is not None

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path created, modified, deleted or renamed (both names of a rename), sorted."""
        out = {c.path for c in self.changes} | {c.old_path for c in self.changes if c.old_path is not None}
        return tuple(sorted(out))

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "target": self.target,
            "target_seq": self.target_seq,
            "commit": self.commit_id,
            "seq": self.seq,
            "changes": [c.to_json() for c in self.changes],
            "findings": dict(sorted(self.findings.items())),
            "note": self.note,
        } | ({"dry_run": True} if self.dry_run else {})


class _HeadMoved(Exception):
    """Another writer committed after planning; plan again (never escapes this module)."""


# -- helpers ----------------------------------------------------------------------------------------


def _short(commit_id: str | bytes) -> str:
    text = commit_id.decode() if isinstance(commit_id, bytes) else commit_id
    return text[:10]


def _vpath(path: str) -> MemoryPath:
    """A canonical path read back from an authenticated state (already valid)."""
    if path == ROOT:
        return _ROOT_PATH
    return MemoryPath(tuple(path[len(ROOT) + 1 :].split("/")))


def _under(path: str, root: str) -> bool:
    return root == ROOT or path == root or path.startswith(root + "/")


def _depth(path: str) -> int:
    return path.count("/")


def _same(a: Node | None, b: Node | None) -> bool:
    """Same state: both absent, both directories, or files with the same content and kind."""
    if a is None or b is None:
        return a is None and b is None
    if a.kind != b.kind:
        return False
    return a.is_dir or (a.sha256 == b.sha256 and a.binary == b.binary)


def _identity(node: Node | None) -> tuple[str, bytes, int, bytes] | None:
    return None if node is None else (node.kind, node.file_id, node.version, node.dek_id)


def _roots(paths: Iterable[str]) -> tuple[str, ...]:
    """The paths with no ancestor among them, sorted (what a commit's metadata names)."""
    out: list[str] = []
    for p in sorted(set(paths)):
        if not any(_under(p, r) for r in out):
            out.append(p)
    return tuple(out)


def _subtree(txn: Transaction, root: MemoryPath) -> list[str]:
    """``root`` (unless it is ``/memories``) and everything below it, as the transaction sees it."""
    if root.is_root:
        return [p.text for p in txn.descendants(root)]
    node = txn.get(root)
    if node is None:
        return []
    below = [p.text for p in txn.descendants(root)] if node.is_dir else []
    return [root.text, *below]


# -- the scrubber on the way back ---------------------------------------------------------------------

#: The kinds a :class:`SensitiveDataError` of :mod:`memvault.scrub.guard` names, in parentheses.
_KINDS = re.compile(r"\(([a-z0-9_]+(?:, [a-z0-9_]+)*)\)")


def _kinds(err: SensitiveDataError) -> str:
    found = _KINDS.search(str(err))
    return found.group(1) if found is not None else "see the store's scrubber policy"


class _Guard:
    """The store's scrub policy applied to what one undo command puts back.

    Each path is checked and each content scrubbed once per command, however often the
    command plans (a plan on a view, then the same plan under the writer lock).
    """

    def __init__(self, store: MemoryStore, refused: str) -> None:
        self.store = store
        self.refused = refused  # "Cannot revert commit 0123456789 (#4)": what a refusal says first
        self.paths: set[str] = set()
        self.contents: dict[tuple[bytes, bool], tuple[bytes, dict[str, int]]] = {}

    def check(self, path: str) -> None:
        """Refuse ``path`` as the memory tool's ``create``/``rename`` would refuse a new name:
        a path holding sensitive data (the message never names it), or one the current path
        grammar and limits reject."""
        if path in self.paths:
            return
        try:
            check_path(self.store, _vpath(path))
        except SensitiveDataError as err:
            raise SensitiveDataError(
                f"Error: {self.refused}: a path it would put back holds sensitive data ({_kinds(err)}), which the "
                "store's scrubber policy does not allow in a file name. Nothing was written."
            ) from None
        parse_path(path, self.store.settings)
        self.paths.add(path)

    def content(self, node: Node) -> tuple[bytes, dict[str, int]]:
        """``(bytes to write, findings masked)`` for the old file ``node``: a text scrubbed, a
        binary file as it was. Raises :class:`SensitiveDataError` for a ``reject`` finding."""
        key = (node.sha256, node.binary)
        known = self.contents.get(key)
        if known is not None:
            return known
        data = self.store.read_node(node)
        findings: dict[str, int] = {}
        if not node.binary:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInputError(
                    f"Error: {self.refused}: {node.path} is marked as text but is not UTF-8. Nothing was written."
                ) from None
            try:
                data = scrub_text(self.store, text, findings).encode("utf-8")
            except SensitiveDataError as err:
                raise SensitiveDataError(
                    f"Error: {self.refused}: the content it would put back at {node.path} holds sensitive data "
                    f"({_kinds(err)}) that the store's scrubber policy rejects. Nothing was written; the old "
                    "version stays readable in the history."
                ) from None
        self.contents[key] = (data, findings)
        return data, findings


def _masked_note(findings: dict[str, int]) -> str:
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(findings.items()))
    return (
        f"Sensitive data was masked in what was put back ({parts}), as the store's scrubber policy "
        "masks it in every write; the files show [REDACTED:<kind>] in its place. Do not try to restore it."
    )


# -- applying a desired state -------------------------------------------------------------------------


def _apply(
    txn: Transaction, desired: dict[str, Node | None], guard: _Guard, findings: dict[str, int]
) -> tuple[Change, ...]:
    """Make each path of ``desired`` absent (None) or like the given node; return the changes.

    Removals run deepest first, then creations shallowest first. A directory to remove that
    still has children not named in ``desired`` is kept (revert: files created later), unless
    a file must take its place, which is a conflict. Every path created or written passes
    ``guard`` first, then every content written; what the scrubber masked is added to ``findings``.
    """
    before = {p: txn.get(p) for p in desired}
    removed: dict[bytes, Node] = {}  # file_id -> file removed here (a rename back reuses its lineage)
    for p in sorted(desired, key=lambda q: (-_depth(q), q)):
        current, want = txn.get(p), desired[p]
        if current is None or (want is not None and want.kind == current.kind):
            continue
        vp = _vpath(p)
        if current.is_dir and txn.child_names(vp):
            if want is None:
                continue
            raise ConflictError(f"Error: Cannot put a file at {p}: it is now a directory with other files in it.")
        if not current.is_dir:
            removed[current.file_id] = current
        txn.delete(vp)
    live: set[bytes] | None = None
    renamed_from: dict[str, str] = {}
    for p in sorted(desired, key=lambda q: (_depth(q), q)):
        want = desired[p]
        if want is None:
            continue
        current = txn.get(p)
        vp = _vpath(p)
        if want.is_dir:
            if current is None:
                guard.check(p)
                txn.make_dirs(vp)
            continue
        if current is not None and _same(current, want):
            continue
        guard.check(p)
        data, masked = guard.content(want)
        if current is not None and current.sha256 == crypto.sha256(data) and current.binary == want.binary:
            continue  # already as it would be put back (masked alike)
        lineage: Node | None
        if current is not None:
            lineage = current
        elif want.file_id in removed:
            lineage = removed.pop(want.file_id)
            renamed_from[p] = lineage.path
        else:
            if live is None:
                live = {n.file_id for q in txn.descendants(_ROOT_PATH) if (n := txn.get(q)) is not None}
            lineage = None if want.file_id in live else want
        txn.write_file(vp, data, binary=want.binary, lineage=lineage)
        for kind, count in masked.items():
            findings[kind] = findings.get(kind, 0) + count
        written = txn.get(p)
        if live is not None and written is not None:
            live.add(written.file_id)
    out: list[Change] = []
    moved = set(renamed_from.values())
    for p in desired:
        old, new = before[p], txn.get(p)
        if _identity(old) == _identity(new):
            continue
        if new is None:
            assert old is not None
            if p not in moved:
                out.append(Change("deleted", p, old.kind))
        elif p in renamed_from:
            out.append(Change("renamed", p, new.kind, renamed_from[p]))
        elif old is None:
            out.append(Change("created", p, new.kind))
        elif old.kind != new.kind:
            out.append(Change("deleted", p, old.kind))
            out.append(Change("created", p, new.kind))
        else:
            out.append(Change("modified", p, new.kind))
    return tuple(sorted(out, key=lambda c: (c.path, c.op)))


def _run_undo(
    store: MemoryStore,
    command: UndoCommand,
    target: bytes,
    plan: Callable[[Transaction], dict[str, Node | None]],
    *,
    note: str,
    refused: str,
    actor: str,
    session: str,
    dry_run: bool = False,
    expect: UndoResult | None = None,
) -> UndoResult:
    """Plan on a view of the head, then apply the same plan in one transaction on that head.

    The plan fixes the paths the commit metadata names; if another writer committed in
    between, the transaction aborts (nothing written) and the plan is made again. ``refused``
    begins the message of a refusal by the scrubber. Scrubbing is done on the view, before the
    writer lock is taken; a refusal there writes nothing. A dry run stops after planning; with
    ``expect`` (a dry run's result), changes other than its own write nothing (ConflictError).
    """
    target_seq = store.commit_meta(target).seq
    guard = _Guard(store, refused)
    if expect is not None and (expect.command, expect.target) != (command, target.decode()):
        raise InvalidInputError(f"Error: The preview given is not of this {command}.")
    for _attempt in range(_ATTEMPTS):
        head = store.head[0]
        view = Transaction(store, store.state_at(head))  # writes to a view stay in its overlay
        seen: dict[str, int] = {}
        planned = _apply(view, plan(view), guard, seen)
        _check_expected(planned, expect)
        if not planned:
            return UndoResult(command, target.decode(), target_seq, None, None, (), note)
        if dry_run:
            return UndoResult(command, target.decode(), target_seq, None, None, planned,
                              _masked_note(seen) if seen else "", dict(seen), dry_run=True)  # fmt: skip
        paths = _roots([c.path for c in planned] + [c.old_path for c in planned if c.old_path is not None])
        findings: dict[str, int] = {}  # filled by apply, read by transact once apply returns

        def apply(txn: Transaction, head: bytes = head, findings: dict[str, int] = findings) -> tuple[Change, ...]:
            if txn.base_commit != head:
                raise _HeadMoved
            findings.clear()  # a command run again (object storage: a lost race) counts afresh
            return _check_expected(_apply(txn, plan(txn), guard, findings), expect)

        try:
            done = store.transact(apply, command=command, paths=paths, actor=actor, session=session, findings=findings)
        except _HeadMoved:
            continue
        masked = _masked_note(findings) if findings else ""
        return UndoResult(
            command, target.decode(), target_seq, done.commit_id.decode(), done.seq, done.value, masked, dict(findings)
        )
    raise ConflictError("Error: The memory store kept changing during the command; retry it.")


def _check_expected(changes: tuple[Change, ...], expect: UndoResult | None) -> tuple[Change, ...]:
    """``changes``, if they are those of the preview ``expect`` (or there is none)."""
    if expect is not None and changes != expect.changes:
        raise ConflictError(
            f"Error: The store changed since the {expect.command} was previewed ({len(expect.changes)} change(s), "
            f"now {len(changes)}); nothing was written. Preview it again."
        )
    return changes


def _resolve(store: MemoryStore, rev: str | bytes) -> bytes:
    return rev if isinstance(rev, bytes) else resolve(store, rev)


def _redacted(what: str, err: RedactedError) -> RedactedError:
    """``err`` (``This version was redacted by A at T; ...``) said of what the command could not do."""
    text = str(err)
    text = text[len("Error: ") :] if text.startswith("Error: ") else text
    return RedactedError(f"Error: {what}: {text[:1].lower()}{text[1:]}")


# -- undo ---------------------------------------------------------------------------------------------


def revert(
    store: MemoryStore, rev: str | bytes, *, actor: str = "operator", session: str = "", dry_run: bool = False,
    expect: UndoResult | None = None,
) -> UndoResult:  # fmt: skip
    """One new commit that undoes commit ``rev`` (see the module docstring).

    With ``dry_run``, nothing is written: the result lists the changes the revert would make
    now (``dry_run`` set). Given such a preview as ``expect``, the revert writes nothing unless
    its changes are still exactly those (ConflictError), so a confirmation stays true.

    Raises :class:`ConflictError` naming the paths the commit touched that changed after it,
    :class:`InvalidInputError` for the store's initial commit (it changed nothing), and
    :class:`SensitiveDataError` when what it would put back holds what the store's scrubber
    policy rejects (nothing is written; see the module docstring).
    """
    commit_id = _resolve(store, rev)
    meta, _tree, parent = store.commit(commit_id)
    if parent is None:
        raise InvalidInputError(
            f"Error: Commit {_short(commit_id)} (#{meta.seq}) is the store's initial commit; "
            "there is nothing to revert."
        )
    before, after = store.state_at(parent), store.state_at(commit_id)
    touched = sorted(
        p
        for p in set(before.nodes) | set(after.nodes)
        if _identity(before.nodes.get(p)) != _identity(after.nodes.get(p))
    )

    def plan(txn: Transaction) -> dict[str, Node | None]:
        desired: dict[str, Node | None] = {}
        conflicts: list[str] = []
        if all(_same(txn.get(p), before.nodes.get(p)) for p in touched):
            return desired  # already undone: nothing to do
        for p in touched:
            old, new, now = before.nodes.get(p), after.nodes.get(p), txn.get(p)
            if _same(now, new):
                desired[p] = old
            else:
                conflicts.append(p)
        if conflicts:
            shown = ", ".join(conflicts)
            raise ConflictError(
                f"Error: Cannot revert commit {_short(commit_id)} (#{meta.seq}): changed after it: {shown}. "
                "Revert the later commits first, or use restore."
            )
        return desired

    note = (
        f"Nothing to revert: every path commit {_short(commit_id)} (#{meta.seq}) changed "
        "is already as it was before it."
    )
    refused = f"Cannot revert commit {_short(commit_id)} (#{meta.seq})"
    return _run_undo(store, "revert", commit_id, plan, note=note, refused=refused, actor=actor, session=session,
                     dry_run=dry_run, expect=expect)  # fmt: skip


def restore(
    store: MemoryStore, path: str, rev: str | bytes, *, actor: str = "operator", session: str = "",
    dry_run: bool = False, expect: UndoResult | None = None,
) -> UndoResult:  # fmt: skip
    """Put the file or directory subtree at ``path`` back to its state at ``rev``, as one commit
    (``dry_run`` and ``expect``: as for :func:`revert`).

    Works for a path deleted since; below a directory, paths that did not exist at ``rev`` are
    deleted. A path absent at ``rev`` raises :class:`PathNotFoundError`; what the store's scrubber
    policy rejects raises :class:`SensitiveDataError` (nothing is written; see the module docstring).
    """
    vpath = parse_path(path, store.settings)
    commit_id = _resolve(store, rev)
    state = store.state_at(commit_id)
    seq = store.commit_meta(commit_id).seq
    what = f"Cannot restore {vpath.text} from {_short(commit_id)} (#{seq})"
    if not vpath.is_root and vpath.text not in state.nodes:
        # A redacted version lost its name with its key; its token, which the path determines, stays.
        token = store.token(vpath.text)
        gone = state.redacted(token)
        if gone is not None:
            try:
                store.read_node(gone)
            except RedactedError as err:
                raise _redacted(what, err) from None
        raise PathNotFoundError(f"Error: The path {vpath.text} did not exist at revision {_short(commit_id)} (#{seq}).")
    target = {p: n for p, n in state.nodes.items() if _under(p, vpath.text)}

    def plan(txn: Transaction) -> dict[str, Node | None]:
        return {p: target.get(p) for p in set(target) | set(_subtree(txn, vpath))}

    note = f"Nothing to restore: {vpath.text} is already as it was at {_short(commit_id)} (#{seq})."
    try:
        # A refusal by the scrubber does not repeat the path: it may be what the policy refuses.
        refused = f"Cannot restore from {_short(commit_id)} (#{seq})"
        return _run_undo(store, "restore", commit_id, plan, note=note, refused=refused, actor=actor,
                         session=session, dry_run=dry_run, expect=expect)  # fmt: skip
    except RedactedError as err:  # redacted since the state was read
        raise _redacted(what, err) from None


def rollback(store: MemoryStore, rev: str | bytes, *, actor: str = "operator", session: str = "") -> UndoResult:
    """Make the whole tree equal to the tree at ``rev`` as one new commit (history stays).

    What the store's scrubber policy masks is masked, what it rejects raises
    :class:`SensitiveDataError` (nothing is written; see the module docstring).
    """
    commit_id = _resolve(store, rev)
    state = store.state_at(commit_id)
    seq = store.commit_meta(commit_id).seq
    target = dict(state.nodes)

    def plan(txn: Transaction) -> dict[str, Node | None]:
        return {p: target.get(p) for p in set(target) | set(_subtree(txn, _ROOT_PATH))}

    note = f"Nothing to roll back: the store is already as it was at {_short(commit_id)} (#{seq})."
    refused = f"Cannot roll back to {_short(commit_id)} (#{seq})"
    return _run_undo(store, "rollback", commit_id, plan, note=note, refused=refused, actor=actor, session=session)

"""The checks of :func:`verify`: every object, commit, index shard and file version (on main and
on its side branches, walked by ``branches``), the freshness mark, the keyring and the key slots,
each problem reported (an IntegrityError is caught per item). What is checked, at what cost, and
the problem codes: docs/format.md §11. Messages name paths, commit, object and data key ids, never
file contents or key bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import crypto
from ..errors import IntegrityError, MemvaultError
from ..format import layout, records
from ..format.records import Node
from ..keys.keyring import ZERO_ID, freshness_problem
from ..store import MemoryStore
from ..store.config import STORE_FILE, config_key, read_config
from ..store.nodes import shard_among, shard_of
from . import keys
from .branches import NOWHERE, BranchWalk, ChainEntry, Where, absent, seq_text, walk_branches
from .report import Problem, Severity, VerifyReport

__all__ = ["verify"]


def verify(store: MemoryStore, *, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Check the whole store and report every problem found (see the module docstring).

    ``progress(done, total)`` is called as commits are checked (``total`` = commits on main and
    on its side branches). Nothing is written. Run it on a store opened with ``check_head=False``.
    """
    return _Verifier(store, progress).run()


# -- implementation ------------------------------------------------------------------------------

#: Log objects (a store in object storage) that stop commits, and those only noted: code, text.
_LOG_FINDINGS_STOP = {
    "junk": ("junk-log-record", "is not an authentic log record: no commit can be made until a key holder voids it"),
    "beyond-gap": ("log-record-beyond-gap", "lies beyond the next commit's place with nothing between: no commit "
                   "can be made until the records before it are restored or a key holder voids it"),
}  # fmt: skip
_LOG_FINDINGS_NOTED = {
    "voided": ("voided-log-record", "was voided by a key holder: commits step over it"),
    "stray": ("stray-log-record", "sits at a later attempt of a commit already made: it is never read"),
    "forged-void": ("forged-log-void", "is a void that does not verify (no key holder wrote it): it is ignored"),
}


@dataclass
class _Pending:
    """A problem whose path may only be known later (from another version of the same token)."""

    severity: Severity
    code: str
    message: str  #: may contain ``{path}``
    path: str | None
    token: bytes | None
    where: Where


class _Verifier:
    def __init__(self, store: MemoryStore, progress: Callable[[int, int], None] | None) -> None:
        self.store = store
        self.git = store.git
        self.progress = progress
        self.pending: list[_Pending] = []
        self.objects: set[bytes] = set()
        self.trees: dict[tuple[bytes, str], dict[bytes, tuple[int, bytes]] | None] = {}
        #: (tree id, role, position) of every subtree walked: the same tree at another position
        #: names other shards and tokens, so it is walked again there.
        self.walked_trees: set[tuple[bytes, str, bytes]] = set()
        self.shards: set[tuple[bytes, bytes]] = set()
        self.versions: set[bytes] = set()
        self.referenced: set[bytes] = set()
        self.reported_keys: set[bytes] = set()
        self.token_paths: dict[bytes, str] = {}
        self.content_entries: dict[bytes, tuple[bytes, Where]] = {}  #: blob id -> (token, where)
        self.checked_blobs: set[bytes] = set()
        #: tokens whose node record could not be opened, shards with an unreadable blob: the
        #: content blobs under them are checked as objects but not called stray.
        self.unopened_tokens: set[bytes] = set()
        self.redacted_tokens: set[bytes] = set()
        self.unread_shards: set[bytes] = set()
        self.recorded: dict[bytes, tuple[int, bytes]] = {}  #: commit id -> (seq, parent) per keyring
        self.walked: set[bytes] = set()  #: every commit id met on main
        self.complete = True  #: the walk of main reached the first commit

    # -- reporting ---------------------------------------------------------------------------

    def add(  # fmt: skip
        self,
        severity: Severity,
        code: str,
        message: str,
        *,
        path: str | None = None,
        token: bytes | None = None,
        where: Where = NOWHERE,
    ) -> None:
        self.pending.append(_Pending(severity, code, message, path, token, where))

    def _problems(self) -> list[Problem]:
        out = []
        for p in self.pending:
            path = p.path if p.path is not None else self.token_paths.get(p.token or b"")
            message = p.message.replace("{path}", path if path is not None else "an unknown path")
            branch = p.where.branch or None
            out.append(Problem(p.severity, p.code, message, path, p.where.commit, p.where.seq, branch))
        return out

    def absent(self, obj_id: bytes) -> bool:
        return absent(self.git, obj_id)

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> VerifyReport:
        slots = keys.check_key_slots(self.store, self.add)
        ref = self.read_head()  # before the keyring: a writer appends the keyring, then moves the branch
        keyring_ok = keys.refresh_keyring(self.store, self.add)
        scan = keys.scan_keyring(self.store, keyring_ok, self.add)
        head = self.effective_head(ref) if ref is not None and keyring_ok else ref
        self.recorded = scan.commits
        chain = self.walk_chain(head) if head is not None else []
        if head is not None and keyring_ok:
            self.check_freshness(head, chain)
        if chain and chain[0].authentic:
            self.check_settings(chain)
        side = walk_branches(self.store, self.add, main=self.walked, main_known=head is not None and self.complete)
        self.explain_forged(side)
        self.objects.update(entry.commit_id for entry in side.entries)
        # Oldest first ("first where it appears"): main, then each branch from its fork commit.
        entries = [*reversed(chain), *side.entries]
        total = len(entries)
        if self.progress is not None:
            self.progress(0, total)
        for done, entry in enumerate(entries, 1):
            self.check_commit_tree(entry)
            if self.progress is not None:
                self.progress(done, total)
        self.check_stray_blobs()
        if chain and chain[0].authentic:
            self.check_head_keys(chain[0])
        key_count = keys.check_keys(
            self.store, scan, self.add, bad_key=lambda dek_id: self.bad_key(dek_id, None, NOWHERE),
            orphans_known=self.complete and side.complete, referenced=self.referenced,
        )  # fmt: skip
        keys.check_access_times(self.store, self.add)
        self.check_remote_log()
        head_seq = chain[0].seq if chain and chain[0].authentic else None
        return VerifyReport(
            problems=self._problems(),
            commits=total,
            objects=len(self.objects),
            versions=len(self.versions),
            keys=key_count,
            key_slots=slots,
            head=head.decode() if head is not None else None,
            head_seq=head_seq,
        )

    def check_remote_log(self) -> None:
        """A store in object storage: the log objects that are not simply commits' records."""
        if self.store.remote is None:
            return
        for found in self.store.remote.log_findings():
            where = Where(None, found.seq)
            if found.kind in _LOG_FINDINGS_STOP:
                code, text = _LOG_FINDINGS_STOP[found.kind]
                self.add("error", code, f"{found.key} {text} (memvault repair-log).", where=where)
            else:
                code, text = _LOG_FINDINGS_NOTED[found.kind]
                self.add("warning", code, f"{found.key} {text}.", where=where)

    # -- branch and commit chain ---------------------------------------------------------------

    def read_head(self) -> bytes | None:
        try:
            head = self.git.head()
            for _attempt in range(3):
                # The branch is overwritten in place (format.md §7 step 4): a value read during
                # that write names no commit. A branch that moved since is read again.
                if head is None or not self.absent(head):
                    break
                again = self.git.head()
                if again == head:
                    break
                head = again
        except IntegrityError:
            self.add("error", "bad-ref", "The branch refs/heads/main is damaged.")
            return None
        if head is None:
            self.add("error", "bad-ref", "The branch refs/heads/main is missing: the store has no history.")
        return head

    def effective_head(self, ref: bytes) -> bytes:
        """The commit the store serves: a commit recorded in the keyring on top of the branch
        (its writer died before moving the branch) is the head; the next write publishes it."""
        hw = self.store.keyring.high_water
        if hw is None or ref == hw.commit_id or ref != hw.parent_id:
            return ref
        if self.git.contains(hw.commit_id):
            self.add(
                "warning",
                "unpublished-commit",
                f"Commit #{hw.seq} {hw.commit_id.decode()} is recorded but the branch still points at its "
                "parent (a writer stopped before moving it); the next write publishes it.",
                where=Where(hw.commit_id.decode(), hw.seq),
            )
            return hw.commit_id
        if self.store.settings.durability == "full":
            self.add(
                "error",
                "rollback",
                f"Rollback detected: the store recorded commit #{hw.seq} {hw.commit_id.decode()}, but it is "
                "missing and the branch points at its parent.",
                where=Where(hw.commit_id.decode(), hw.seq),
            )
        else:
            self.add(
                "warning",
                "unpublished-commit",
                f"Commit #{hw.seq} {hw.commit_id.decode()} was recorded but its objects were lost (durability "
                '"none": a power loss may drop unsynced writes).',
                where=Where(hw.commit_id.decode(), hw.seq),
            )
        return ref

    def walk_chain(self, head: bytes) -> list[ChainEntry]:
        """The commits from the head back to the first, newest first; problems recorded."""
        chain: list[ChainEntry] = []
        seen: set[bytes] = set()
        commit_id: bytes | None = head
        expected: int | None = None  # the seq the child's seq implies
        while commit_id is not None:
            here = Where(commit_id.decode(), expected)
            if commit_id in seen:
                self.add(
                    "error", "broken-chain", f"The history loops back to commit {commit_id[:10].decode()}.", where=here
                )
                self.complete = False
                break
            seen.add(commit_id)
            self.walked.add(commit_id)
            self.objects.add(commit_id)
            try:
                tree_id, parents, _message = self.git.read_commit(commit_id)
            except IntegrityError:
                recorded = self.recorded.get(commit_id)
                if recorded is not None:
                    expected = recorded[0]
                    here = Where(commit_id.decode(), expected)
                    after = "the walk goes on from the parent the keyring records for it"
                else:
                    self.complete = False
                    after = "the history before it cannot be checked"
                if self.absent(commit_id):
                    code, state = "missing-object", "is missing"
                else:
                    code, state = (
                        "bad-commit",
                        (
                            "is damaged (the object does not match its id, is not a commit, or is not in the "
                            "format memvault writes)"
                        ),
                    )
                self.add(
                    "error", code, f"Commit {seq_text(expected)}{commit_id.decode()} {state}; {after}.", where=here
                )
                if recorded is None:
                    break
                commit_id = recorded[1] if recorded[1] != ZERO_ID else None
                expected = recorded[0] - 1
                continue
            parent = parents[0] if parents else None
            try:
                meta, _tree, _parent = self.store.commit(commit_id)
                seq: int | None = meta.seq
                authentic = True
            except IntegrityError:
                seq, authentic = expected, False
            if authentic and expected is not None and seq != expected:
                self.add(
                    "error",
                    "broken-chain",
                    f"Commit {commit_id.decode()} is #{seq} but its child expects #{expected}: the history "
                    "is not contiguous.",
                    where=Where(commit_id.decode(), seq),
                )
            chain.append(ChainEntry(commit_id, seq, tree_id, authentic))
            if parent is None and not authentic and seq not in (None, 0):
                self.add(
                    "error",
                    "broken-chain",
                    f"The history ends at commit #{seq}, not at #0.",
                    where=Where(commit_id.decode(), seq),
                )
            expected = seq - 1 if seq is not None else None
            if expected is not None and expected < 0 and parent is not None:
                expected = None  # already reported by the tag check (#0 has no parent)
            commit_id = parent
        # A forged commit's own seq is not trusted: take it from its child, else from its parent.
        for i in range(len(chain) - 2, -1, -1):
            entry, older = chain[i], chain[i + 1]
            if entry.seq is None and older.seq is not None:
                chain[i] = ChainEntry(entry.commit_id, older.seq + 1, entry.tree_id, entry.authentic)
        for entry in chain:
            if not entry.authentic:
                self.add(
                    "error",
                    "forged-commit",
                    f"Commit {seq_text(entry.seq)}{entry.commit_id.decode()} does not authenticate (forged "
                    "or altered: its Memvault-Tag, metadata or parents do not verify).",
                    where=Where(entry.commit_id.decode(), entry.seq),
                )
        return chain

    def explain_forged(self, side: BranchWalk) -> None:
        """A commit on main that does not authenticate there but does on a side branch was moved
        from that branch: say so."""
        for p in self.pending:
            branch = side.owners.get(p.where.commit.encode()) if p.where.commit is not None else None
            if p.code == "forged-commit" and branch is not None:
                p.message = (
                    f"Commit {seq_text(p.where.seq)}{p.where.commit} is a commit of the dream branch {branch}, not "
                    "of main: it authenticates only on that branch."
                )

    def check_freshness(self, head: bytes, chain: list[ChainEntry]) -> None:
        hw = self.store.keyring.high_water
        if hw is None:
            self.add("error", "rollback", "The keyring records no commit: it is older than the history.")
            return
        self.check_anchor(hw.seq, hw.commit_id, hw.parent_id)
        if chain and chain[0].authentic and chain[0].seq is not None:
            problem = freshness_problem(head, chain[0].seq, hw)
            if problem is not None:
                self.add("error", "rollback", str(problem), where=Where(head.decode(), chain[0].seq))
            return
        # The head does not authenticate (reported): the recorded commit must still be on the branch.
        if hw.commit_id not in self.walked and hw.parent_id not in self.walked:
            self.add(
                "error",
                "rollback",
                f"The branch's history does not contain commit #{hw.seq} {hw.commit_id[:10].decode()}, the "
                "newest this store has recorded: someone reset or replaced the history.",
            )

    def check_settings(self, chain: list[ChainEntry]) -> None:
        """``memvault.json`` is the settings file the head records as in force (docs/format.md §1.1)."""
        head = chain[0]
        recorded = self.store.commit_meta(head.commit_id).settings_digest
        try:
            config = read_config(self.store.root)
            config.verify(config_key(self.store.master_keys(), self.store.store_id))
            bound = config.bound_to(recorded)
        except MemvaultError:
            bound = False
        if bound:
            return
        where = Where(head.commit_id.decode(), head.seq)
        for entry in chain:  # the commit that put the recorded settings in force
            try:
                meta = self.store.commit_meta(entry.commit_id) if entry.authentic else None
            except IntegrityError:
                meta = None
            if meta is not None and meta.settings_file is not None:
                where = Where(entry.commit_id.decode(), entry.seq)
                break
        self.add(
            "error",
            "settings-mismatch",
            f"{STORE_FILE} is not the settings file the history records as in force (set by commit "
            f"{seq_text(where.seq)}{(where.commit or '')[:10]}): an older copy was put back, or a settings change "
            "stopped before its commit; the store does not open. `memvault config repair` writes the recorded "
            "settings back.",
            where=where,
        )

    def check_anchor(self, seq: int, commit_id: bytes, parent_id: bytes) -> None:
        """The keyring's newest commit against this host's anchor (docs/format.md §14.2): an older
        copy of the whole store put back, or another copy of it, is a ``rollback``."""
        anchor = self.store.anchor
        if anchor is None:
            return
        problem: MemvaultError | None
        try:
            problem = anchor.problem(seq, commit_id, parent_id)
        except MemvaultError as err:
            problem = err
        if problem is not None:
            self.add("error", "rollback", str(problem), where=Where(commit_id.decode(), seq))

    # -- trees -----------------------------------------------------------------------------------

    def tree(self, tree_id: bytes, role: str, where: Where) -> dict[bytes, tuple[int, bytes]] | None:
        """The entries of a tree of ``role``, or None if it is bad (reported once)."""
        key = (tree_id, role)
        if key in self.trees:
            return self.trees[key]
        self.objects.add(tree_id)
        entries: dict[bytes, tuple[int, bytes]] | None
        try:
            entries = self.git.read_tree(tree_id)
        except IntegrityError:
            entries = None
            problem = self.git.tree_problem(tree_id)
            if problem is not None:
                self.add(
                    "error",
                    "hostile-tree",
                    f"The {layout.ROLE_NAMES[role]} {tree_id.decode()} holds {problem}: memvault never writes "
                    "such an entry, so the repository was changed by something else.",
                    where=where,
                )
            elif self.absent(tree_id):
                self.add(
                    "error",
                    "missing-object",
                    f"The {layout.ROLE_NAMES[role]} {tree_id.decode()} is missing.",
                    where=where,
                )
            else:
                self.add(
                    "error",
                    "bad-tree",
                    f"The {layout.ROLE_NAMES[role]} {tree_id.decode()} is damaged (the object does not match its id "
                    "or is not a tree).",
                    where=where,
                )
        if entries is not None and layout.shape_problem(entries, role) is not None:
            entries = None
            self.add(
                "error",
                "hostile-tree",
                f"The {layout.ROLE_NAMES[role]} {tree_id.decode()} holds "
                + ("a top-level entry that fits neither layout" if role == "root" else "an entry out of place")
                + ": it does not have the layout memvault writes.",
                where=where,
            )
        self.trees[key] = entries
        return entries

    def check_commit_tree(self, entry: ChainEntry) -> None:
        if entry.tree_id is None:
            return
        where = Where(entry.commit_id.decode(), entry.seq, entry.branch)

        def read(tree_id: bytes, role: str, prefix: bytes) -> layout.Entries | None:
            entries = self.tree(tree_id, role, where)
            if (tree_id, role, prefix) in self.walked_trees:
                return None  # this subtree at this position was walked for an earlier commit
            self.walked_trees.add((tree_id, role, prefix))
            return entries

        try:
            depth = layout.fanout_depth(self.git.read_tree(entry.tree_id), self.git.read_tree)
        except IntegrityError:
            depth = 2  # a tree on the way that cannot be read: the walk reports it
        shard_map, blobs = layout.walk(entry.tree_id, read, depth=depth)
        for token, blob_id in blobs.items():
            self.content_entries.setdefault(blob_id, (token, where))
        for shard, blob_id in sorted(shard_map.items()):
            self.check_shard(shard, blob_id, where)

    def check_head_keys(self, head: ChainEntry) -> None:
        """No version at the head uses a destroyed data key: redaction removes a version from the
        head before it destroys the key, so such a head is not served (the store does not open)."""
        if head.tree_id is None:
            return
        where = Where(head.commit_id.decode(), head.seq)
        try:
            shards = self.store.index_blobs(head.tree_id)
        except IntegrityError:
            return  # the tree is reported
        for shard, blob_id in sorted(shards.items()):
            try:
                nodes = self.store.shard_nodes(shard, blob_id)
            except IntegrityError:
                continue  # the shard is reported
            for node in nodes.values():
                if node.redacted:
                    self.add(
                        "error",
                        "destroyed-key-at-head",
                        f"The head holds a version whose data key {node.dek_id.hex()} was destroyed ({{path}}): "
                        "the store cannot serve its current state, so it does not open (a redaction removes a "
                        "version from the head before it destroys the key).",
                        token=node.token,
                        where=where,
                    )

    # -- index shards and node records --------------------------------------------------------

    def check_shard(self, shard: bytes, blob_id: bytes, where: Where) -> None:
        if (shard, blob_id) in self.shards:
            return
        self.shards.add((shard, blob_id))
        self.objects.add(blob_id)
        name = shard.decode()
        try:
            blob = self.git.read_blob(blob_id)  # the git checksum, even when the shard is cached decoded
        except IntegrityError:
            self.unread_shards.add(shard)
            if self.absent(blob_id):
                self.add(
                    "error", "missing-object", f"Index shard {name} (blob {blob_id.decode()}) is missing.", where=where
                )
            else:
                self.add(
                    "error",
                    "bad-index",
                    f"Index shard {name} (blob {blob_id.decode()}) is damaged: the object does not match its id.",
                    where=where,
                )
            return
        try:
            nodes = list(self.store.shard_nodes(shard, blob_id).values())
        except IntegrityError:
            nodes = self.diagnose_shard(shard, blob_id, blob, where)
        for node in nodes:
            self.check_node(node, where)

    def diagnose_shard(self, shard: bytes, blob_id: bytes, blob: bytes, where: Where) -> list[Node]:
        """Open a shard that failed entry by entry: report each bad entry, return the good nodes."""
        store, name = self.store, shard.decode()
        label = f"index shard {name} (blob {blob_id[:10].decode()})"
        try:
            entries = store.shard_entries(shard, blob)
        except IntegrityError:
            self.unread_shards.add(shard)
            self.add("error", "bad-index", f"The {label} does not decrypt: damaged or not this store's.", where=where)
            return []
        good: list[Node] = []
        tokens: set[bytes] = set()
        for token, dek_id, sealed in entries:
            if shard_of(token, len(shard)) != shard or token in tokens:
                self.add("error", "bad-index", f"The {label} holds an entry that does not belong to it.", where=where)
                continue
            tokens.add(token)
            self.referenced.add(dek_id)
            node = self.open_entry(shard, token, dek_id, sealed, label, where)
            if node is None:
                self.unopened_tokens.add(token)  # its content blob cannot be tied to a version
                continue
            good.append(node)
        return good

    def open_entry(
        self, shard: bytes, token: bytes, dek_id: bytes, sealed: bytes, label: str, where: Where
    ) -> Node | None:
        store = self.store
        if store.keyring.is_destroyed(dek_id):
            self.redacted_tokens.add(token)
            return None  # redacted version
        if not store.keyring.has(dek_id):
            self.missing_key(dek_id, token, where)
            return None
        try:
            dek = store.keyring.dek(dek_id)
        except IntegrityError:
            self.bad_key(dek_id, token, where)
            return None
        try:
            node = records.open_node(dek, store.store_id, token, dek_id, sealed)
        except IntegrityError:
            self.add(
                "error",
                "bad-index",
                f"The node record of {{path}} in the {label} does not open.",
                token=token,
                where=where,
            )
            return None
        if store.token(node.path) != token:
            self.add(
                "error", "bad-index", f"A node record in the {label} is filed under another path's token.", where=where
            )
            return None
        return node

    def missing_key(self, dek_id: bytes, token: bytes | None, where: Where) -> None:
        if dek_id in self.reported_keys:
            return
        self.reported_keys.add(dek_id)
        self.add(
            "error",
            "missing-key",
            f"The data key {dek_id.hex()} of a version of {{path}} is not in the keyring.",
            token=token,
            where=where,
        )

    def bad_key(self, dek_id: bytes, token: bytes | None, where: Where) -> None:
        if dek_id in self.reported_keys:
            return
        self.reported_keys.add(dek_id)
        used = " of a version of {path}" if token is not None else ""
        self.add(
            "error",
            "bad-key",
            f"The keyring record of data key {dek_id.hex()}{used} does not authenticate (damaged).",
            token=token,
            where=where,
        )

    def check_node(self, node: Node, where: Where) -> None:
        self.referenced.add(node.dek_id)
        if node.redacted:
            self.redacted_tokens.add(node.token)
            return  # its key was destroyed on purpose (a tombstone says so): nothing to decrypt
        self.token_paths.setdefault(node.token, node.path)
        if node.is_dir or node.dek_id in self.versions:
            return
        self.versions.add(node.dek_id)
        self.check_content(node, where)

    def check_content(self, node: Node, where: Where) -> None:
        """Authenticate and decrypt one file version (the plaintext is dropped at once).

        Reads the blob itself rather than through ``MemoryStore.read_node``, whose content
        cache would skip re-reading a blob decrypted earlier by this store object.
        """
        what = f"Content blob {node.blob_id.decode()} of {node.path} (version {node.version})"
        self.objects.add(node.blob_id)
        self.checked_blobs.add(node.blob_id)
        try:
            blob = self.git.read_blob(node.blob_id)
        except IntegrityError:
            if self.absent(node.blob_id):
                self.add("error", "missing-object", f"{what} is missing.", path=node.path, where=where)
            else:
                self.add(
                    "error",
                    "bad-blob",
                    f"{what} is damaged: the object does not match its id.",
                    path=node.path,
                    where=where,
                )
            return
        if crypto.sha256(blob) != node.ct_sha256:
            self.add(
                "error",
                "bad-blob",
                f"{what} is not the blob its node record pins (SHA-256 differs).",
                path=node.path,
                where=where,
            )
            return
        try:
            dek = self.store.keyring.dek(node.dek_id)
        except IntegrityError:
            if self.store.keyring.has(node.dek_id):
                self.bad_key(node.dek_id, node.token, where)
            else:
                self.missing_key(node.dek_id, node.token, where)
            return
        try:
            records.decode_blob(dek, blob, store_id=self.store.store_id, node=node)
        except IntegrityError:
            self.add("error", "bad-blob", f"{what} does not authenticate or decrypt.", path=node.path, where=where)

    def check_stray_blobs(self) -> None:
        """Content blobs in the tree that no file version references: check the object, then warn."""
        for blob_id, (token, where) in self.content_entries.items():
            if blob_id in self.checked_blobs:
                continue
            self.objects.add(blob_id)
            try:
                self.git.read_blob(blob_id)
            except IntegrityError:
                code = "missing-object" if self.absent(blob_id) else "bad-blob"
                if code == "missing-object" and token in self.redacted_tokens:
                    continue  # a redacted version's ciphertext: a remote gc drops it (format.md §12.8, inv. 4)
                state = "is missing" if code == "missing-object" else "is damaged: the object does not match its id"
                self.add(
                    "error", code, f"Content blob {blob_id.decode()} under {{path}} {state}.", token=token, where=where
                )
                continue
            if token in self.unopened_tokens or shard_among(self.unread_shards, token) in self.unread_shards:
                continue  # its version could not be read (reported): not known to be stray
            if token in self.redacted_tokens:
                continue  # the content of a redacted version: kept as ciphertext on purpose
            self.add(
                "warning",
                "stray-blob",
                f"Content blob {blob_id.decode()} under {{path}} belongs to no file version.",
                token=token,
                where=where,
            )

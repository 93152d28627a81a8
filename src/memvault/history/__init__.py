"""Reading a store's past: revisions (re-exported from :mod:`memvault.store.revisions`), log
(what each commit changed, filtered, paged), files (trees, files, diff, blame at a revision), grep."""

from ..store.revisions import ancestors, looks_like_revision, parse_time, resolve, split_range
from .files import (
    BlameLine,
    FileDiff,
    TreeEntry,
    attribute_lines,
    blame,
    commit_diff,
    diff,
    format_diff,
    read_at,
    tree_at,
)  # fmt: skip
from .log import (
    OPERATIONS,
    Change,
    CommitInfo,
    LogPage,
    Operation,
    changes,
    iter_log,
    log,
    log_page,
    node_pairs,
    shard_diff,
    walk,
    within,
)  # fmt: skip

__all__ = [
    "Operation", "OPERATIONS", "Change", "CommitInfo", "LogPage", "TreeEntry", "FileDiff", "BlameLine", "resolve",
    "split_range", "looks_like_revision", "parse_time", "ancestors", "walk", "shard_diff", "node_pairs",
    "changes", "within", "iter_log", "log", "log_page", "tree_at", "read_at", "diff", "commit_diff",
    "format_diff", "blame", "attribute_lines",
]  # fmt: skip

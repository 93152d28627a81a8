r"""Differential test: memvault's ``MemoryTool`` against the SDK's ``BetaLocalFilesystemMemoryTool``.

Random command sequences (all six commands, successes and failures) run against both tools,
each over its own fresh store. For every command the two must agree on the outcome (result vs
``ToolError``); after every command they must hold the same directories and the same files with
identical bytes (the reference is walked on disk, memvault is read through a fresh
``store.snapshot()``; at the end of each sequence also after closing and reopening the store).
Reference: the installed SDK (measured with anthropic 2.14.0). Outputs are compared where the docs and the SDK agree:

* create / delete / rename / insert success strings: exactly;
* str_replace success: both start with ``The memory file has been edited.``; memvault's snippet
  lines must also be lines of the edited file (its wording and window differ from the SDK's);
* file views: header and numbered lines, after dropping the SDK's extra empty line for a
  trailing newline (or for an empty file);
* directory views: the listed paths in order (sizes, the header wording and the SDK's trailing
  ``/`` on directories differ by design);
* error messages: equal after stripping memvault's documented ``Error: `` prefix, except in the
  cases of :func:`wording_differs` (create over a directory, str_replace on a directory, every
  insert error, and a rename whose source is missing *and* destination exists: the SDK checks
  the destination first, memvault the source).

Inputs the generator stays away from, because the docs-vs-SDK deviations (README
"The protocol") make the *outcome* differ, not just the text:

1. Paths outside memvault's strict grammar (``/memoriesX/a``, ``..``, backslashes, ``%2e``,
   NFD names, control characters, trailing ``/`` ...): the SDK accepts them, memvault refuses.
   The namespace below only holds canonical, NFC/NFKC, grammar-valid paths.
2. Empty ``old_str``: memvault refuses it; the SDK counts ``len+1`` matches (and replaces in an
   empty file).
3. ``view_range`` out of range or reversed: memvault errors, the SDK trims. Only in-range
   ranges (``1 <= start <= n``, ``end`` in ``[start, n]`` or ``-1``) are generated.
4. ``str_replace`` without ``new_str``: the SDK requires it (the docs make it optional);
   ``new_str`` is always sent (possibly empty).
5. ``create`` or ``rename`` whose target lies below an existing *file*: the SDK raises a raw
   ``NotADirectoryError`` (not a ``ToolError``).
6. ``rename`` whose *source* lies below an existing file: same raw ``NotADirectoryError``.
7. ``rename`` of a directory into itself (new path strictly inside the old one, not existing):
   the SDK raises a raw ``OSError`` (EINVAL) - after creating the missing intermediate dirs.
8. ``rename`` of a missing source to a missing destination whose parent is missing: the SDK
   creates the destination's parent directories before discovering that the source is
   missing, so a failed command leaves new empty directories behind; memvault's failed
   command changes nothing.
9. Case-fold / compatibility-form sibling collisions (``A.md`` next to ``a.md``): memvault
   refuses the second name, the SDK allows it. No two names in the namespace fold together.
10. Hidden names (leading ``.``) and ``node_modules``: listings differ by design (and the SDK
    keeps ``.tmp-*`` files transiently); the namespace has none.
11. ``insert`` whose result would end with an empty line (an insert_text that is empty once its
    trailing LFs are stripped, put after the last line; or any insert into a file that ends in a
    blank line, i.e. ``...\n\n``, other than after its last line): the SDK joins the lines and
    adds a LF only if the join does not already end with one, so it silently drops that blank
    line; memvault keeps every line and always appends one LF (``a\n\n`` + insert at 0 of ``X``:
    SDK ``X\na\n``, memvault ``X\na\n\n``). Pinned in ``test_insert_trailing_blank_line``.
13. ``insert_text`` ending in more than one LF: the SDK strips them all; memvault strips one
    (it ends the inserted line) and keeps the blank lines the model asked for.
12. Contents over the view truncation limit (16,000 characters) or the line limit: the texts
    are a few short lines.

Not excluded although the docs and SDK differ in wording: ``create`` over an existing
directory (both fail), ``str_replace``/``insert`` on a directory (both fail), delete/rename of
``/memories`` (both fail).
"""

from __future__ import annotations

import os
import random
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from anthropic.tools import BetaLocalFilesystemMemoryTool, ToolError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memvault
from conftest import PASSPHRASE, make_store
from memvault.paths import MemoryPath
from memvault.settings import StoreSettings

T = TypeVar("T")
Rel = tuple[str, ...]  # a path below /memories as its segments; () is the root

ROOT = "/memories"
#: Directory names and leaf names; no two fold together (exclusion 9), none hidden (10).
DIR_NAMES = ("a", "proj", "\u65e5\u672c")  # a, proj, 日本
LEAF_NAMES = ("n.md", "caf\u00e9.txt", "x")  # n.md, café.txt (NFC), x
MAX_DIR_DEPTH = 3

#: Building blocks of file texts: CR, CRLF (via a later LF), unicode, empty lines, U+2028.
LINES = ("alpha", "beta\r", "\u00fcn\u00efc\u00f8d\u00e9 \u2713", "", "  indented", "tab\there", "a\u2028b", "alpha")
NEEDLES = ("alpha", "beta", "\r", "\n", "\u2713", "zzz-absent", "a", "\r\n", "\n\n", "here\n")


def text_of(p: Rel) -> str:
    return ROOT if not p else ROOT + "/" + "/".join(p)


# -- state -------------------------------------------------------------------------------------------


@dataclass
class State:
    files: dict[Rel, bytes] = field(default_factory=dict)
    dirs: set[Rel] = field(default_factory=set)  # not including the root

    def is_file(self, p: Rel) -> bool:
        return p in self.files

    def is_dir(self, p: Rel) -> bool:
        return p == () or p in self.dirs

    def exists(self, p: Rel) -> bool:
        return self.is_file(p) or self.is_dir(p)

    def file_ancestor(self, p: Rel) -> bool:
        """Some proper ancestor of ``p`` is a file."""
        return any(p[:i] in self.files for i in range(1, len(p)))


def reference_state(root: Path) -> State:
    state = State()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root).parts
        for d in dirnames:
            state.dirs.add((*rel, d))
        for f in filenames:
            full = Path(dirpath) / f
            assert not f.startswith(".tmp-"), f"reference left a temp file {full}"
            state.files[(*rel, f)] = full.read_bytes()
    return state


def memvault_state(store: memvault.MemoryStore) -> State:
    snap = store.snapshot()
    state = State()

    def walk(path: MemoryPath) -> None:
        for name in snap.child_names(path):
            child = path.child(name)
            node = snap.get(child)
            assert node is not None, f"memvault lists {child.text} but has no node for it"
            if node.is_dir:
                state.dirs.add(child.parts)
                walk(child)
            else:
                state.files[child.parts] = snap.read(child)

    walk(MemoryPath(()))
    return state


def file_lines(content: str) -> list[str]:
    """Lines as the docs number them: split on LF, no extra line for a trailing LF."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


# -- generation --------------------------------------------------------------------------------------


class Chooser:
    """The random decisions of the generator, from ``random.Random`` or from hypothesis."""

    def __init__(self, rng: random.Random | None = None, data: Any = None) -> None:
        self.rng = rng
        self.data = data

    def choice(self, seq: Sequence[T]) -> T:
        if self.rng is not None:
            return self.rng.choice(list(seq))
        return self.data.draw(st.sampled_from(list(seq)))

    def randint(self, lo: int, hi: int) -> int:
        if self.rng is not None:
            return self.rng.randint(lo, hi)
        return self.data.draw(st.integers(lo, hi))

    def chance(self, percent: int) -> bool:
        return self.randint(1, 100) <= percent


def random_path(c: Chooser) -> Rel:
    dirs = tuple(c.choice(DIR_NAMES) for _ in range(c.randint(0, MAX_DIR_DEPTH)))
    return (*dirs, c.choice(DIR_NAMES + LEAF_NAMES))


def pick_path(c: Chooser, state: State, *, files: int = 40, dirs: int = 15, root: int = 0) -> Rel:
    """An existing file / existing dir / the root / a random namespace path, by percentage."""
    roll = c.randint(1, 100)
    if roll <= files and state.files:
        return c.choice(sorted(state.files))
    if roll <= files + dirs and state.dirs:
        return c.choice(sorted(state.dirs))
    if roll <= files + dirs + root:
        return ()
    return random_path(c)


def random_text(c: Chooser) -> str:
    text = "\n".join(c.choice(LINES) for _ in range(c.randint(0, 4)))
    if c.chance(50):
        text += "\n"
    return text


def pick_old_str(c: Chooser, state: State, p: Rel) -> str:
    content = state.files[p].decode() if p in state.files else ""
    if content and c.chance(60):
        start = c.randint(0, len(content) - 1)
        return content[start : start + c.randint(1, 8)]
    return c.choice(NEEDLES)


def gen_command(c: Chooser, state: State) -> dict[str, Any]:
    kind = c.choice(("view", "view", "create", "create", "str_replace", "insert", "delete", "rename", "rename"))
    if kind == "view":
        p = pick_path(c, state, files=45, dirs=25, root=10)
        cmd: dict[str, Any] = {"command": "view", "path": text_of(p)}
        if p in state.files and c.chance(40):
            n = len(file_lines(state.files[p].decode()))
            start = c.randint(1, max(n, 1))
            end = -1 if c.chance(40) else c.randint(start, max(n, 1))
            cmd["view_range"] = [start, end]
        return cmd
    if kind == "create":
        p = pick_path(c, state, files=20, dirs=10, root=2)
        return {"command": "create", "path": text_of(p), "file_text": random_text(c)}
    if kind == "str_replace":
        p = pick_path(c, state, files=75, dirs=10)
        new = c.choice(("", "X", "alpha", "new\nline", "\u2713\r\n", "beta\r"))
        return {"command": "str_replace", "path": text_of(p), "old_str": pick_old_str(c, state, p), "new_str": new}
    if kind == "insert":
        p = pick_path(c, state, files=75, dirs=10)
        n = len(file_lines(state.files[p].decode())) if p in state.files else 2
        line = c.randint(-1, n + 1) if c.chance(25) else c.randint(0, n)
        return {"command": "insert", "path": text_of(p), "insert_line": line, "insert_text": random_text(c)}
    if kind == "delete":
        return {"command": "delete", "path": text_of(pick_path(c, state, files=45, dirs=25, root=3))}
    old = pick_path(c, state, files=45, dirs=30, root=3)
    roll = c.randint(1, 100)
    if roll <= 35 and old:  # rename within the same directory
        new = (*old[:-1], c.choice(DIR_NAMES + LEAF_NAMES))
    elif roll <= 55:  # onto something that exists (fails), or the root
        new = pick_path(c, state, files=50, dirs=40, root=10)
    else:  # move anywhere in the namespace, possibly creating parents
        new = random_path(c)
    return {"command": "rename", "old_path": text_of(old), "new_path": text_of(new)}


def rel_of(text: str) -> Rel:
    return () if text == ROOT else tuple(text[len(ROOT) + 1 :].split("/"))


def excluded(cmd: dict[str, Any], state: State) -> str | None:
    """Why the SDK's deviations make this command's outcome legitimately differ (None: compare)."""
    if cmd["command"] == "create" and state.file_ancestor(rel_of(cmd["path"])):
        return "5: create below a file"
    if cmd["command"] == "rename":
        old, new = rel_of(cmd["old_path"]), rel_of(cmd["new_path"])
        if state.file_ancestor(new):
            return "5: rename to below a file"
        if state.file_ancestor(old):
            return "6: rename from below a file"
        if old and len(new) > len(old) and new[: len(old)] == old and not state.exists(new):
            return "7: rename into itself"
        if old and not state.exists(old) and not state.exists(new) and not state.is_dir(new[:-1]):
            return "8: failed rename with missing destination parents"
    if cmd["command"] == "insert" and cmd["insert_text"].endswith("\n\n"):
        return "13: insert_text ending in several LFs"
    if cmd["command"] == "insert" and rel_of(cmd["path"]) in state.files:
        lines = file_lines(state.files[rel_of(cmd["path"])].decode())
        line = cmd["insert_line"]
        if 0 <= line <= len(lines):
            lines.insert(line, cmd["insert_text"].rstrip("\n"))
            if lines[-1] == "":
                return "11: insert leaving a trailing blank line"
    return None


# -- running and comparing ---------------------------------------------------------------------------

#: The SDK's view lines: right-aligned number, tab, content.
_ROW_RE = re.compile(r"^ *(\d+)\t")


def run(tool: Any, cmd: dict[str, Any]) -> tuple[bool, Any]:
    """(succeeded, result or message). Anything but a ToolError propagates and fails the test."""
    try:
        return True, tool.call(dict(cmd))
    except ToolError as err:
        return False, str(err)


def split_view(out: str) -> tuple[str, list[str]]:
    header, _, body = out.partition("\n")
    return header, (body.split("\n") if body else [])


def wording_differs(cmd: dict[str, Any], state: State) -> bool:
    """Failures whose message text the docs (memvault) and the SDK word differently."""
    kind = cmd["command"]
    if kind == "create":  # create over a directory: "is a directory" vs "already exists"
        return state.is_dir(rel_of(cmd["path"]))
    if kind == "str_replace":  # a directory: "does not exist" vs "is not a file"
        return state.is_dir(rel_of(cmd["path"]))
    if kind == "insert":  # missing path, directory and bad line are all worded differently
        return True
    if kind == "rename":  # both missing source and existing destination: check order differs
        old, new = rel_of(cmd["old_path"]), rel_of(cmd["new_path"])
        return not state.exists(old) and state.exists(new)
    return False


def compare(cmd: dict[str, Any], before: State, mv: tuple[bool, Any], ref: tuple[bool, Any]) -> None:
    (mv_ok, mv_out), (ref_ok, ref_out) = mv, ref
    assert mv_ok == ref_ok, f"outcome differs: memvault {mv_ok} {mv_out!r}, SDK {ref_ok} {ref_out!r}"
    kind = cmd["command"]
    if not mv_ok:
        if not wording_differs(cmd, before):
            assert mv_out.removeprefix("Error: ") == ref_out.removeprefix("Error: "), "error messages differ"
        return
    if kind in ("create", "delete", "rename", "insert"):
        assert mv_out == ref_out, "success strings differ"
    elif kind == "str_replace":
        prefix = "The memory file has been edited."
        assert mv_out.startswith(prefix) and ref_out.startswith(prefix), "str_replace success lines differ"
    elif kind == "view":
        p = rel_of(cmd["path"])
        mv_head, mv_rows = split_view(mv_out)
        ref_head, ref_rows = split_view(ref_out)
        if before.is_dir(p):
            assert [r.split("\t", 1)[1] for r in mv_rows] == [
                r.split("\t", 1)[1].removesuffix("/") for r in ref_rows
            ], "directory listings differ"
        else:
            content = before.files[p].decode()
            sdk_lines = content.split("\n")
            if sdk_lines[-1] == "" and ref_rows and ref_rows[-1] == f"{len(sdk_lines):>6}\t":
                ref_rows.pop()  # the SDK's extra line for a trailing newline / empty file
            assert mv_head == ref_head, "file view headers differ"
            assert mv_rows == ref_rows, "file views differ"


def check_snippet(cmd: dict[str, Any], out: str, after: State) -> None:
    """memvault's str_replace snippet shows real lines of the edited file."""
    lines = file_lines(after.files[rel_of(cmd["path"])].decode())
    for row in split_view(out)[1]:  # an edit that empties the file shows no rows
        m = _ROW_RE.match(row)
        assert m is not None, f"snippet row {row!r} is not numbered"
        n = int(m.group(1))
        assert 1 <= n <= len(lines) and row[m.end() :] == lines[n - 1], f"snippet row {row!r} is not line {n}"


@dataclass
class Stats:
    sequences: int = 0
    commands: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, bool]] = field(default_factory=Counter)
    cases: Counter[str] = field(default_factory=Counter)


#: Labels of the cases the generator must reach, from memvault's result and the state before.
CASES = (
    "view dir",
    "view file",
    "view range",
    "view missing",
    "create exists",
    "create over dir",
    "create new parents",
    "str_replace multiple",
    "str_replace absent",
    "str_replace missing",
    "str_replace dir",
    "insert bad line",
    "insert missing",
    "delete dir",
    "delete missing",
    "delete root",
    "rename dir",
    "rename file",
    "rename dest exists",
    "rename missing",
    "rename root",
)


def case_of(cmd: dict[str, Any], state: State, ok: bool, out: Any) -> str | None:
    kind = cmd["command"]
    if kind == "rename":
        old, new = rel_of(cmd["old_path"]), rel_of(cmd["new_path"])
        if ok:
            return "rename dir" if state.is_dir(old) else "rename file"
        if not old:
            return "rename root"
        return "rename missing" if not state.exists(old) else "rename dest exists" if state.exists(new) else None
    p = rel_of(cmd["path"])
    if kind == "view":
        if not ok:
            return "view missing"
        return "view dir" if state.is_dir(p) else "view range" if "view_range" in cmd else "view file"
    if kind == "create":
        if ok:
            return "create new parents" if not state.is_dir(p[:-1]) else None
        return "create over dir" if state.is_dir(p) else "create exists"
    if kind in ("str_replace", "insert") and not ok:
        if state.is_dir(p):
            return f"{kind} dir"
        if not state.exists(p):
            return f"{kind} missing"
        if kind == "insert":
            return "insert bad line"
        return "str_replace multiple" if "Multiple occurrences" in out else "str_replace absent"
    if kind == "delete":
        if not p:
            return "delete root"
        if ok and state.is_dir(p):
            return "delete dir"
        return None if ok else "delete missing"
    return None


#: A RAM-backed temp dir where there is one: both stores make hundreds of tiny files, directories
#: and fsyncs per sequence, which is ten times slower on a disk.
_TMP_BASE = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def run_sequence(c: Chooser, n_commands: int, stats: Stats, on_step: Callable[[], None] | None = None) -> None:
    with tempfile.TemporaryDirectory(dir=_TMP_BASE) as tmp:
        store = make_store(Path(tmp) / "store", StoreSettings(durability="none"))
        try:
            mv = memvault.MemoryTool(store, actor="differential", session="s")
            ref = BetaLocalFilesystemMemoryTool(base_path=str(Path(tmp) / "ref"))
            ref_root = Path(tmp) / "ref" / "memories"
            history: list[dict[str, Any]] = []
            state = reference_state(ref_root)
            stats.sequences += 1
            for _ in range(n_commands):
                cmd = gen_command(c, state)
                for _retry in range(5):
                    why = excluded(cmd, state)
                    if why is None:
                        break
                    stats.skipped[why] += 1
                    cmd = gen_command(c, state)
                else:
                    continue
                history.append(cmd)
                try:
                    mv_res = run(mv, cmd)
                    ref_res = run(ref, cmd)
                    compare(cmd, state, mv_res, ref_res)
                    after = reference_state(ref_root)
                    mine = memvault_state(store)
                    assert mine.dirs == after.dirs, "directory sets differ"
                    assert mine.files == after.files, "files differ"
                    if mv_res[0] and cmd["command"] == "str_replace":
                        check_snippet(cmd, mv_res[1], after)
                except AssertionError as err:
                    raise AssertionError(
                        f"{err}\ncommand: {cmd!r}\nmemvault: {mv_res!r}\nSDK: {ref_res!r}\n"
                        f"state before: {state!r}\nhistory ({len(history)}): {history!r}"
                    ) from None
                stats.commands += 1
                stats.outcomes[(cmd["command"], mv_res[0])] += 1
                stats.cases[case_of(cmd, state, *mv_res) or "other"] += 1
                state = after
            # What memvault committed is what it serves after a reopen, too.
            store.close()
            store = memvault.MemoryStore.open(Path(tmp) / "store", passphrase=PASSPHRASE)
            reopened = memvault_state(store)
            assert reopened.dirs == state.dirs and reopened.files == state.files, "state differs after reopen"
        finally:
            store.close()


# -- tests -------------------------------------------------------------------------------------------

SEEDS = 30
COMMANDS_PER_SEQUENCE = 60


def test_seeded_sequences() -> None:
    stats = Stats()
    for seed in range(SEEDS):
        try:
            run_sequence(Chooser(rng=random.Random(seed)), COMMANDS_PER_SEQUENCE, stats)
        except AssertionError as err:
            raise AssertionError(f"seed {seed}: {err}") from None
    print(f"\ndifferential: {stats.sequences} sequences, {stats.commands} commands compared")
    print(f"  outcomes: {dict(sorted(stats.outcomes.items()))}")
    print(f"  cases: {dict(sorted(stats.cases.items()))}")
    print(f"  regenerated (excluded inputs): {dict(stats.skipped)}")
    assert not set(CASES) - set(stats.cases), f"cases never reached: {set(CASES) - set(stats.cases)}"
    # The generator is not degenerate: every command both succeeded and failed somewhere.
    for kind in ("view", "create", "str_replace", "insert", "delete", "rename"):
        assert stats.outcomes[(kind, True)] >= 10, f"too few successful {kind}"
        assert stats.outcomes[(kind, False)] >= 5, f"too few failing {kind}"
    assert stats.commands >= SEEDS * COMMANDS_PER_SEQUENCE * 9 // 10


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), n_commands=st.integers(1, 30))
def test_hypothesis_sequences(data: Any, n_commands: int) -> None:
    run_sequence(Chooser(data=data), n_commands, Stats())


def test_insert_trailing_blank_line(tmp_path: Path) -> None:
    """Exclusion 11 pinned: the SDK drops a trailing blank line on insert, memvault keeps it."""
    store = make_store(tmp_path / "store", StoreSettings(durability="none"))
    try:
        mv = memvault.MemoryTool(store, actor="differential", session="s")
        ref = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path / "ref"))
        for tool in (mv, ref):
            tool.call({"command": "create", "path": "/memories/n.md", "file_text": "a\n\n"})
            tool.call({"command": "insert", "path": "/memories/n.md", "insert_line": 0, "insert_text": "X"})
            tool.call({"command": "create", "path": "/memories/m.md", "file_text": "a"})
            tool.call({"command": "insert", "path": "/memories/m.md", "insert_line": 1, "insert_text": "\n"})
        assert memvault_state(store).files == {("n.md",): b"X\na\n\n", ("m.md",): b"a\n\n"}
        assert reference_state(tmp_path / "ref" / "memories").files == {("n.md",): b"X\na\n", ("m.md",): b"a\n"}
    finally:
        store.close()


# -- harness self-checks: the comparisons above can fail ------------------------------------------


def test_compare_detects_differences() -> None:
    state = State(files={("n.md",): b"a\nb\n"})
    view = {"command": "view", "path": "/memories/n.md"}
    good = "Here's the content of /memories/n.md with line numbers:\n     1\ta\n     2\tb"
    compare(view, state, (True, good), (True, good + "\n     3\t"))
    with pytest.raises(AssertionError):
        compare(view, state, (True, good), (True, good.replace("\tb", "\tc") + "\n     3\t"))
    with pytest.raises(AssertionError):
        compare(view, state, (True, good), (False, "boom"))
    create = {"command": "create", "path": "/memories/x", "file_text": ""}
    with pytest.raises(AssertionError):
        compare(create, state, (True, "File created successfully at: /memories/x"), (True, "File created at x"))
    delete = {"command": "delete", "path": "/memories/y"}
    with pytest.raises(AssertionError):
        compare(delete, state, (False, "Error: The path /memories/y does not exist"), (False, "other"))

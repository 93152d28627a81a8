"""A hostile repository is refused on open and reported by verify.

The trees here are built byte by byte (git's raw tree format) and committed with the store's own
keys, with a high-water record in the keyring: the commit authenticates and is fresh, so the
*only* thing wrong is the tree. Whoever holds the key (or a bug) could write such a tree; git
tools run on the repository would interpret its ``..``, ``.git``, symlink and gitlink entries.
memvault must refuse it with a clear :class:`~memvault.errors.IntegrityError` and ``verify``
must report it with the ``hostile-tree`` code.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

import memvault
import memvault.store.opening
from conftest import PASSPHRASE, make_odd_file, make_store
from memvault.errors import IntegrityError, MemvaultError
from memvault.format import records
from memvault.format.layout import LayoutChecker
from memvault.format.records import CommitMeta
from memvault.git.objects import parse_tree_strict
from memvault.git.repo import GitStore
from memvault.settings import StoreSettings
from memvault.verify import verify

Entry = tuple[bytes, bytes, bytes]  #: (mode text, name, 20-byte id)


# -- building blocks -------------------------------------------------------------------------------


def _write_object(store_path: Path, kind: bytes, body: bytes) -> bytes:
    """Write a loose object from raw bytes (no parsing, so any tree layout can be written)."""
    data = kind + b" " + str(len(body)).encode() + b"\0" + body
    obj_id = hashlib.sha1(data).hexdigest().encode()
    path = store_path / "repo" / "objects" / obj_id[:2].decode() / obj_id[2:].decode()
    path.parent.mkdir(exist_ok=True)
    if not path.exists():
        path.write_bytes(zlib.compress(data))
    return obj_id


def _raw(entries: list[Entry]) -> bytes:
    return b"".join(mode + b" " + name + b"\0" + sha for mode, name, sha in entries)


def _git_sorted(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: e[1] + (b"/" if e[0] == b"40000" else b""))


def _entries(store: memvault.MemoryStore, tree_id: bytes) -> list[Entry]:
    parsed, problem = parse_tree_strict(store.git._raw_tree(tree_id))
    assert problem is None
    return [
        (b"100644" if mode == 0o100644 else b"40000", name, bytes.fromhex(sha.decode()))
        for name, (mode, sha) in parsed.items()
    ]


def _blob(store_path: Path, data: bytes) -> bytes:
    return bytes.fromhex(_write_object(store_path, b"blob", data).decode())


Mutation = Callable[[Path, list[Entry]], bytes]  #: (store path, clean entries) -> hostile raw tree


def _add(mode: bytes, name: bytes, target: str = "blob") -> Mutation:
    """Add one entry (in git's order) to the tree."""

    def mutate(store_path: Path, entries: list[Entry]) -> bytes:
        if target == "blob":
            sha = _blob(store_path, b"#!/bin/sh\n")
        elif target == "tree":  # any valid tree: the entry itself is what is wrong
            sha = bytes.fromhex(_write_object(store_path, b"tree", _raw(entries)).decode())
        else:  # a gitlink names a commit that is not in the repository
            sha = bytes(range(20))
        return _raw(_git_sorted([*entries, (mode, name, sha)]))

    return mutate


def _duplicate(store_path: Path, entries: list[Entry]) -> bytes:
    return _raw(entries[:1] + entries)


def _unsorted(store_path: Path, entries: list[Entry]) -> bytes:
    if len(entries) < 2:  # add a second entry, named unlike the first (else it is a duplicate)
        name = b"e" if entries and entries[0][1] == b"f" else b"f"
        entries = _git_sorted([*entries, (b"100644", name, _blob(store_path, b"x"))])
    return _raw(list(reversed(entries)))


def _zero_padded(store_path: Path, entries: list[Entry]) -> bytes:
    return _raw([(b"0" + mode if i == 0 else mode, name, sha) for i, (mode, name, sha) in enumerate(entries)])


def _nul_in_name(store_path: Path, entries: list[Entry]) -> bytes:
    return _raw(entries) + b"100644 a\0b\0" + _blob(store_path, b"x")


#: name -> (mutation, words the open error must contain)
HOSTILE: dict[str, tuple[Mutation, str]] = {
    "dotdot": (_add(b"40000", b"..", "tree"), "'.' or '..'"),
    "dot": (_add(b"40000", b".", "tree"), "'.' or '..'"),
    "dotgit": (_add(b"40000", b".git", "tree"), "'.git'"),
    "dotgit-upper": (_add(b"40000", b".GIT", "tree"), "'.git'"),
    "slash": (_add(b"100644", b"a/b"), "path separator"),
    "nul": (_nul_in_name, "tree memvault did not write"),
    "empty-name": (_add(b"100644", b""), "empty name"),
    "symlink": (_add(b"120000", b"5"), "symbolic link"),
    "gitlink": (_add(b"160000", b"6", "commit"), "gitlink"),
    "executable": (_add(b"100755", b"7"), "mode 100755"),
    "group-writable": (_add(b"100664", b"8"), "mode 100664"),
    "zero-padded": (_zero_padded, "zero-padded"),
    "duplicate": (_duplicate, "duplicate"),
    "unsorted": (_unsorted, "order"),
}

#: Where the hostile tree sits, per tree layout (docs/format.md 5.3): a path of entry names from
#: the root (resolved per store; h0, h1: the first entry there).
LOCATIONS = {
    1: ["root", "i", "i/h0", "c", "c/h0", "c/h0/h1"],
    2: ["root", "h0", "h0/h1"],
    3: ["root", "h0", "h0/h1", "h0/h1/h2"],
    4: ["root", "h0", "h0/h1", "h0/h1/h2", "h0/h1/h2/h3"],
}
#: The files of the seeded store and their contents (enough that the first tree at each level is
#: rarely the only one there).
SEEDED = {"/memories/a.md": "alpha\n", "/memories/notes/b.md": "bravo\n"} | {
    f"/memories/more/f{i}.md": f"file {i}\n" for i in range(12)
}
#: ``max_files`` that makes a format version 6 store file its first node in layout 3 or 4.
MAX_FILES = {3: 100_000, 4: 1_000_000}


def _seed(path: Path, layout: int = 2) -> None:
    """A store whose trees have ``layout`` (1, 2: made as a store of that format version; 3, 4:
    a version 6 store whose ``max_files`` calls for that layout)."""
    version = layout if layout < 3 else 6
    with pytest.MonkeyPatch.context() as m:
        m.setattr(memvault.store.memorystore, "FORMAT_VERSION", version)
        m.setattr(memvault.store.opening, "FORMAT_VERSION", version)
        store = make_store(path, StoreSettings(durability="none", max_files=MAX_FILES.get(layout, 100_000)))
    for path, text in SEEDED.items():
        store.put_file(path, text)
    root_id = store.git.read_commit(store.head[0])[0]
    root = store.git.tree_entries(root_id)
    assert (b"i" in root) == (layout == 1)
    with store.reading() as view:
        node = view.get("/memories/a.md")
    assert node is not None
    digits = 2 if layout == 1 else layout  # the shard's name is that many hex digits of the token
    assert node.token.hex()[:digits].encode() in store.index_blobs(root_id)
    store.close()


def _commit_tree(path: Path, new_root: bytes) -> bytes:
    """Commit ``new_root`` on top of the head with the store's keys, record it, move the branch."""
    store = memvault.MemoryStore.open(path, passphrase=PASSPHRASE, check_head=False)
    try:
        head = store.git.head()
        assert head is not None
        seq = store.commit_meta(head).seq + 1
        meta = CommitMeta(seq=seq, time=1.0, actor="mallory", session="", command="put", paths=(), findings={})
        sealed = records.seal_meta(store._keys.meta, store.store_id, meta)
        tag = records.commit_tag(store._keys.chain, store.store_id, seq, head, new_root, sealed)
        message = (
            b"memvault\n\nMemvault-Meta: "
            + memvault.crypto.b64encode(sealed).encode()
            + b"\nMemvault-Tag: "
            + tag.hex().encode()
            + b"\n"
        )
        commit = GitStore.commit(new_root, head, message)
        store.git.write([commit])
        store.keyring.refresh()
        store.keyring.append(store.keyring.commit_record(seq, commit.id, head), durable=False)
        assert store.git.compare_and_swap(head, commit.id)
        return commit.id
    finally:
        store.close()


def _make_hostile(path: Path, location: str, mutation: Mutation) -> None:
    """Replace the tree at ``location`` of the head by a hostile one and commit it authentically."""
    store = memvault.MemoryStore.open(path, passphrase=PASSPHRASE)
    try:
        root_id = store.git.read_commit(store.head[0])[0]
        chain = [root_id]  # tree ids from the root down to the location
        names: list[bytes] = []  # the entry names followed
        for part in location.split("/") if location != "root" else []:
            entries = _entries(store, chain[-1])
            name = part.encode() if part in ("i", "c") else entries[0][1]  # h0, h1...: the first entry
            names.append(name)
            chain.append(next(e[2] for e in entries if e[1] == name).hex().encode())
        new_id = _write_object(path, b"tree", mutation(path, _entries(store, chain[-1])))
        for depth in range(len(names) - 1, -1, -1):  # re-link the clean parents up to the root
            entries = [
                (m, n, bytes.fromhex(new_id.decode()) if n == names[depth] else s)
                for m, n, s in _entries(store, chain[depth])
            ]
            new_id = _write_object(path, b"tree", _raw(entries))
    finally:
        store.close()
    _commit_tree(path, new_id)


@pytest.fixture
def seeded(store_path: Path) -> Path:
    _seed(store_path)
    return store_path


# -- the tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("layout", "location"), [(1, "c/h0"), (2, "h0"), (3, "h0/h1"), (4, "h0/h1/h2/h3")])
def test_the_forging_helper_makes_an_authentic_commit(store_path: Path, layout: int, location: str) -> None:
    """Control: the same helper with a clean tree gives a store that opens and verifies."""
    _seed(store_path, layout)
    seeded = store_path
    _make_hostile(seeded, location, lambda _p, entries: _raw(entries))
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE) as store:
        assert store.head[1] == len(SEEDED) + 1  # the seeded files, then the forged commit
        assert store.snapshot().read(memvault.paths.parse_path("/memories/a.md", store.settings)) == b"alpha\n"
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE, check_head=False) as store:
        report = verify(store)
    assert report.ok, report.problems


def _params() -> list[object]:
    return [
        pytest.param(layout, location, name, id=f"v{layout}-{location}-{name}")
        for layout, locations in LOCATIONS.items()
        for location in locations
        for name in HOSTILE
    ]


#: The trees that grow with the store (one per shard): checked when their shard is first needed,
#: not at open (docs/format.md §8, *Lazy decoding*). Every other tree is checked at open.
LEAVES = {
    (1, "c/h0/h1"), (2, "h0/h1"), (3, "h0/h1"), (3, "h0/h1/h2"), (4, "h0/h1"), (4, "h0/h1/h2"), (4, "h0/h1/h2/h3"),
}  # fmt: skip


@pytest.mark.parametrize(("layout", "location", "name"), _params())
def test_hostile_tree_is_refused_on_open(store_path: Path, layout: int, location: str, name: str) -> None:
    """A hostile tree at the top of the head's tree is refused at open; one in a leaf (a shard's
    tree) when a command first needs that shard, with the same error, and by a listing, which
    needs every shard. Nothing in it is ever served."""
    _seed(store_path, layout)
    seeded = store_path
    mutation, words = HOSTILE[name]
    _make_hostile(seeded, location, mutation)
    if (layout, location) not in LEAVES:
        with pytest.raises(IntegrityError) as info:
            memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE).close()
        assert words in str(info.value)
        return
    refused = []
    for path, text in SEEDED.items():  # each file in a store object of its own: nothing decoded before
        with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE) as store:
            try:
                assert store.read_text(path) == text
            except IntegrityError as err:
                refused.append(str(err))
    assert refused and all(words in message for message in refused)
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE) as store:
        with pytest.raises(IntegrityError) as info:
            store.list(recursive=True)
    assert words in str(info.value)


@pytest.mark.parametrize(("layout", "location", "name"), _params())
def test_hostile_tree_is_reported_by_verify(store_path: Path, layout: int, location: str, name: str) -> None:
    _seed(store_path, layout)
    seeded = store_path
    mutation, words = HOSTILE[name]
    _make_hostile(seeded, location, mutation)
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE, check_head=False) as store:
        report = verify(store)
    hostile = [p for p in report.problems if p.code == "hostile-tree"]
    assert len(hostile) == 1, report.problems
    assert hostile[0].seq == len(SEEDED) + 1 and hostile[0].severity == "error"
    assert not report.ok
    assert "bad-tree" not in {p.code for p in report.problems}
    if name != "nul":  # a NUL cuts the name: the parser sees a malformed entry, not the name
        assert words in hostile[0].message


@pytest.mark.parametrize(
    ("layout", "extra", "mode"),
    [
        *((1, extra, mode) for extra, mode in [(b"x", b"100644"), (b"readme", b"40000"), (b"d", b"40000"),
                                                (b"0", b"100644"), (b"0", b"40000")]),
        # layout 2: hex digits are its top-level subtrees; "i" beside them mixes the two layouts
        *((2, extra, mode) for extra, mode in [(b"x", b"100644"), (b"readme", b"40000"), (b"g", b"40000"),
                                                (b"0", b"100644"), (b"i", b"40000")]),
    ],
)  # fmt: skip
def test_unexpected_top_level_entry(store_path: Path, layout: int, extra: bytes, mode: bytes) -> None:
    """A name memvault's tree grammar allows but its layout does not: refused, reported."""
    _seed(store_path, layout)
    seeded = store_path
    if layout == 2 and extra == b"0":  # a hex digit the root does not hold yet (tokens are random)
        with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE) as store:
            taken = store.git.tree_entries(store.git.read_commit(store.head[0])[0])
        extra = next(d for d in (bytes([c]) for c in b"0123456789abcdef") if d not in taken)
    _make_hostile(seeded, "root", _add(mode, extra, "tree" if mode == b"40000" else "blob"))
    with pytest.raises(IntegrityError):
        memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE).close()
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE, check_head=False) as store:
        assert (
            LayoutChecker(store.git.tree_entries).problem(store.git.read_commit(store.git.head() or b"")[0]) is not None
        )
        report = verify(store)
    assert [p.code for p in report.errors] == ["hostile-tree"]
    assert "fits neither layout" in report.errors[0].message


@pytest.mark.parametrize(
    ("layout", "location"),
    [(1, "i"), (1, "i/h0"), (1, "c"), (1, "c/h0"), (1, "c/h0/h1"), (2, "h0"), (2, "h0/h1"), (3, "h0"), (3, "h0/h1"),
     (3, "h0/h1/h2"), (4, "h0/h1/h2"), (4, "h0/h1/h2/h3")],
)  # fmt: skip
def test_entry_out_of_place_in_the_layout(store_path: Path, layout: int, location: str) -> None:
    """A well-formed name and mode that the layout does not allow at that depth (a blob where a
    subtree belongs or the reverse, a non-hex name): the layout check and verify see it."""
    _seed(store_path, layout)
    seeded = store_path
    holds_blobs = location in ("i/h0", "c/h0/h1") if layout == 1 else location.count("/") + 1 == layout
    mode = b"40000" if holds_blobs else b"100644"
    _make_hostile(seeded, location, _add(mode, b"z", "tree" if mode == b"40000" else "blob"))
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE, check_head=False) as store:
        tree_id = store.git.read_commit(store.git.head() or b"")[0]
        assert LayoutChecker(store.git.tree_entries).problem(tree_id) is not None
        report = verify(store)
    assert "hostile-tree" in [p.code for p in report.errors]


def _alias_first_entry(store_path: Path, entries: list[Entry]) -> bytes:
    """The tree with one more entry: the first entry's subtree again, under an unused hex name."""
    used = {name for _mode, name, _sha in entries}
    name = next(bytes([c]) for c in b"0123456789abcdef" if bytes([c]) not in used)
    return _raw(_git_sorted([*entries, (entries[0][0], name, entries[0][2])]))


@pytest.mark.parametrize(("layout", "location"), [(1, "i"), (2, "root"), (3, "h0/h1"), (4, "h0/h1/h2")])
def test_a_subtree_filed_under_a_second_name_is_checked_there_too(store_path: Path, layout: int, location: str) -> None:
    """The same shard tree under another name files its index shard under another shard name (part
    of the shard's associated data): decoding it there refuses it (a listing decodes every shard),
    and verify must walk it there too, not skip it as a tree it has already seen."""
    _seed(store_path, layout)
    _make_hostile(store_path, location, _alias_first_entry)
    with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE) as store, pytest.raises(IntegrityError):
        store.list(recursive=True)  # every shard: the one filed under a second name too
    with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE, check_head=False) as store:
        report = verify(store)
    assert not report.ok
    assert "bad-index" in {p.code for p in report.problems}, report.problems


def _lift_first_shard_tree(store_path: Path, entries: list[Entry]) -> bytes:
    """The first subtree's content in place of the tree: its shard tree one level higher."""
    with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE) as store:
        return _raw(_entries(store, entries[0][2].hex().encode()))


@pytest.mark.parametrize(("layout", "location"), [(3, "h0/h1"), (4, "h0/h1/h2"), (4, "h0/h1")])
def test_shard_trees_at_two_depths_are_refused(store_path: Path, layout: int, location: str) -> None:
    """A tree whose shard trees are not all at one depth fits no layout: the depth a reader takes
    from the first blob is then wrong for some of them, which meet a tree of the wrong role on the
    way and are refused; a listing and verify refuse the tree, and no file is served wrongly."""
    _seed(store_path, layout)
    _make_hostile(store_path, location, _lift_first_shard_tree)
    with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE, check_head=False) as store:
        tree_id = store.git.read_commit(store.git.head() or b"")[0]
        assert LayoutChecker(store.git.tree_entries).problem(tree_id) is not None
        report = verify(store)
    assert "hostile-tree" in [p.code for p in report.errors], report.problems
    refused = 0
    for path, text in SEEDED.items():
        with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE) as store:
            try:
                assert store.read_text(path) == text
            except IntegrityError:
                refused += 1
            except memvault.errors.PathNotFoundError:
                pass  # its subtree is not in the forged tree (the lift dropped the first tree's siblings)
    assert refused
    with memvault.MemoryStore.open(store_path, passphrase=PASSPHRASE) as store, pytest.raises(IntegrityError):
        store.list(recursive=True)


def test_layout_problem_is_none_for_a_real_store(seeded: Path) -> None:
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE) as store:
        assert LayoutChecker(store.git.tree_entries).problem(store.git.read_commit(store.head[0])[0]) is None


@pytest.mark.parametrize("redirect", ["objects/info/alternates", "commondir", ".git"])
def test_repository_redirecting_outside_itself_is_refused(seeded: Path, tmp_path: Path, redirect: str) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    target = seeded / "repo" / redirect
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{other}\n" if redirect != ".git" else f"gitdir: {other}\n")
    with pytest.raises(IntegrityError, match="outside it"):
        memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE)


def test_repository_with_another_object_format_is_refused(seeded: Path) -> None:
    config = seeded / "repo" / "config"
    text = config.read_text().replace("repositoryformatversion = 0", "repositoryformatversion = 1")
    config.write_text(text + "[extensions]\n\tobjectformat = sha256\n")
    with pytest.raises(MemvaultError):
        memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "huge"])
def test_branch_file_that_is_not_a_small_regular_file(seeded: Path, kind: str) -> None:
    """Reading the branch never blocks (FIFO) or reads without bound (/dev/zero)."""
    ref = seeded / "repo" / "refs" / "heads" / "main"
    ref.unlink()
    make_odd_file(ref, kind, b"0" * 40 + b"\n" + b" " * 8192)
    with pytest.raises(IntegrityError, match="branch is damaged"):
        memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE)
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE, check_head=False) as store:
        assert [p.code for p in verify(store).errors][:1] == ["bad-ref"]


def _forge_commit_bytes(path: Path, transform: Callable[[bytes], bytes]) -> None:
    """Point the branch at a rewritten copy of the head commit (raw bytes, keyring updated)."""
    with memvault.MemoryStore.open(path, passphrase=PASSPHRASE) as store:
        head = store.head[0]
        raw = store.git._get(head).as_raw_string()
    new_id = _write_object(path, b"commit", transform(raw))
    with memvault.MemoryStore.open(path, passphrase=PASSPHRASE, check_head=False) as store:
        # the head commit replaced: same seq and parent, as a writer that never published it
        store.keyring.refresh()
        hw = store.keyring.high_water
        assert hw is not None
        store.keyring.append(store.keyring.commit_record(hw.seq, new_id, hw.parent_id), durable=False)
    (path / "repo" / "refs" / "heads" / "main").write_bytes(new_id + b"\n")


@pytest.mark.parametrize(
    "name",
    ["extra-header", "gpgsig", "encoding", "other-author", "nonzero-time", "no-message", "two-parents", "two-trees"],
)
def test_commit_not_in_memvault_format_is_refused(seeded: Path, name: str) -> None:
    """The tag covers seq, parent, tree and metadata; everything else of the commit object must
    be exactly what memvault writes, or the commit is refused (never a TypeError or a crash)."""

    def transform(raw: bytes) -> bytes:
        head, _, message = raw.partition(b"\n\n")
        lines = head.split(b"\n")
        if name == "extra-header":
            lines.append(b"x-hostile yes")
        elif name == "gpgsig":
            lines.append(b"gpgsig -----BEGIN PGP SIGNATURE-----\n -----END PGP SIGNATURE-----")
        elif name == "encoding":
            lines.append(b"encoding latin-1")
        elif name == "other-author":
            lines = [
                line.replace(b"memvault <memvault@invalid>", b"eve <eve@example>")
                if line.startswith(b"author")
                else line
                for line in lines
            ]
        elif name == "nonzero-time":
            lines = [
                line.replace(b"> 0 +0000", b"> 1 +0000") if line.startswith(b"committer") else line for line in lines
            ]
        elif name == "no-message":
            return head + b"\n"
        elif name == "two-parents":
            parent = next(line for line in lines if line.startswith(b"parent "))
            lines.insert(lines.index(parent) + 1, parent)
        elif name == "two-trees":
            lines.insert(1, lines[0])
        return b"\n".join(lines) + b"\n\n" + message

    _forge_commit_bytes(seeded, transform)
    with pytest.raises(IntegrityError) as info:
        memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE)
    if name != "two-trees":  # dulwich itself refuses to parse that one (a generic integrity error)
        assert "not in the format memvault writes" in str(info.value)
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE, check_head=False) as store:
        codes = {p.code for p in verify(store).errors}
    assert codes & {"bad-commit", "forged-commit"}, codes


def test_a_root_this_process_built_is_taken_as_checked_only_when_its_parent_was(seeded: Path) -> None:
    """A commit's new root takes over its parent's check (LayoutChecker.carry), and only that:
    what the writer built still passes a fresh check, and an unchecked parent passes on nothing."""
    reads: list[bytes] = []
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE) as store:

        def read(tree_id: bytes) -> dict[bytes, tuple[int, bytes]]:
            reads.append(tree_id)
            return store.git.tree_entries(tree_id)

        parent = store.git.read_commit(store.head[0])[0]
        memvault.MemoryTool(store).call({"command": "create", "path": "/memories/carried.md", "file_text": "x\n"})
        child = store.git.read_commit(store.head[0])[0]
        checker = LayoutChecker(read)
        checker.carry(parent, child)  # the parent was never checked: nothing to carry
        assert checker.problem(child, levels=1) is None and child in reads
        reads.clear()
        other = store.git.read_commit(store.head[0])[0]
        memvault.MemoryTool(store).call({"command": "create", "path": "/memories/carried2.md", "file_text": "y\n"})
        newer = store.git.read_commit(store.head[0])[0]
        assert checker.problem(other, levels=1) is None  # checked once (the same tree as child)
        checker.carry(other, newer)
        assert checker.problem(newer, levels=1) is None and newer not in reads  # taken over, not read
        assert LayoutChecker(store.git.tree_entries).problem(newer) is None  # and it does fit, whole


def test_roots_taken_over_are_bounded_like_every_checked_tree(seeded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-lived writer carries a check to every root it builds; the cache of checked trees
    stays bounded (the oldest go first, and are read again when next needed)."""
    from memvault.format import layout as layout_mod

    monkeypatch.setattr(layout_mod, "_CHECKED_ENTRIES", 40)
    with memvault.MemoryStore.open(seeded, passphrase=PASSPHRASE) as store:
        checker = LayoutChecker(store.git.tree_entries)
        root = store.git.read_commit(store.head[0])[0]
        assert checker.problem(root, levels=1) is None
        parent = root
        for i in range(200):  # roots as a writer would carry them, commit after commit
            child = i.to_bytes(20, "big").hex().encode()
            checker.carry(parent, child)
            parent = child
        assert len(checker._top_ok) <= 40  # bounded, where every carry used to add one
        assert checker.problem(parent, levels=1) is None  # the newest is still taken as checked

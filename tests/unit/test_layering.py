"""The package's shape: one owner per third-party dependency, imports point one way between folders
and within each subpackage, no module uses another's private names, no module over 700 lines."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import memvault

SRC = Path(memvault.__file__).parent

#: Which module may import which third-party package (``folder/module`` for subpackages).
OWNERS = {
    "cryptography": {"crypto"},
    "dulwich": {"git/repo"},
    "anthropic": {"agent/tool", "agent/remote", "agent/demo", "dream/runner", "transfer/migrate/client"},
    "httpx2": {"agent/remote"},  # the SDK's transport: which connection failures sent nothing
    "merge3": {"dream/merge"},
    "hyperscan": {"scrub/prefilter"},
    "ahocorasick": {"scrub/validators"},
    "pydantic": {"settings"},
    "boto3": {"storage/s3", "keys/kms"},
    "pkcs11": {"keys/hsm"},
    "mcp": {"agent/mcp"},
    "botocore": {"storage/s3", "keys/kms"},
}

#: Tier of each top-level module or subpackage: a unit may import only units of a lower tier.
TIERS = {
    "errors": 0,
    "settings": 1,
    "timefmt": 1,  # ISO 8601 times in JSON (the CLI and the MCP server)
    "paths": 2,
    "fsutil": 2,
    "crypto": 2,
    "hoststate": 2.5,  # the host state: fsutil and crypto
    "scrub": 3,
    "git": 3,
    "storage": 3,
    "format": 4,  # format.layout names git's tree modes
    "keys": 4,
    "remote": 4.5,
    "store": 5,
    "history": 6,
    "protocol": 6,  # the memory tool's commands and the context-editing block
    "erasure": 7,  # redact, retention, expiry, destroy: history, store
    "edits": 7,  # writes, files, batch, undo, templates: protocol, history, scrub.guard
    "verify": 7,
    "admin": 7.25,  # keys, config, status, audit (erasure.expiry, protocol.context)
    "agent": 7.25,  # tool, remote, mcp (edits.undo, history), demo
    "memories": 7.25,  # the memory-stores model: store, history, scrub.guard
    "transfer": 7.5,  # migrate: store, history, scrub.guard, agent.remote's client options
    "dream": 8,
    "ui": 8.25,  # the review UI (memvault ui, serve's /ui/): history, admin, verify, dream, erasure, edits, memories
    "server": 8.5,  # memvault serve: memories, protocol, erasure, store; mounts ui
    "cli": 9,
    "__init__": 10,
}

#: Inside a subpackage, a module may import only the modules listed before it (its ``__init__``
#: may import any of them). The cli package's commands share ``_common`` and ``__init__``.
ORDER = {
    "format": ["records", "layout"],
    "git": ["objects", "pack", "packindex", "packread", "packdir", "refs", "repo"],
    "keys": ["framing", "command", "kms", "hsm", "provider", "slots", "marks", "keyfile", "sealedkeys", "keyring"],
    "store": [
        "lock",
        "config",
        "atimes",
        "access",
        "nodes",
        "state",
        "head",
        "transaction",
        "journal",
        "commit",
        "branch",
        "replicated",
        "hosting",
        "keychanges",
        "building",
        "upkeep",
        "revisions",
        "reads",
        "opening",
        "memorystore",
    ],
    "scrub": ["prefilter", "validators", "versions", "names", "detectors", "personal", "rules", "engine", "guard"],
    "verify": ["report", "keys", "branches", "checker", "orphans"],
    "transfer": ["importer", "exporter", "copier", "migrate"],
    "transfer/migrate": ["rules", "model", "state", "summary", "client", "pull", "push"],
    "storage": ["base", "local", "s3", "url"],
    "remote": [
        "layout",
        "checkpoint",
        "packmap",
        "logstate",
        "lostkeys",
        "keyslots",
        "catchup",
        "follow",
        "uploads",
        "lease",
        "replica",
        "inventory",
        "compact",
    ],
    "dream": ["merge", "prompt", "review", "runner"],
    "history": ["log", "files", "grep"],
    "protocol": ["context", "commands"],
    "erasure": ["expiry", "redact", "retention", "destroy"],
    "edits": ["writes", "files", "batch", "undo", "templates"],
    "admin": ["keys", "config", "status", "audit", "remote_gc"],
    "agent": ["mcphttp", "tool", "remote", "mcp", "demo"],
    "memories": ["ids", "model", "paths", "cursor", "index", "versions", "ops"],
    "server": ["catalog", "errors", "compaction", "openstores", "replicas", "root", "ops", "views", "app", "run"],
    "server/views": ["base", "health", "memories", "stores", "versions", "tool"],
    "ui": ["textview", "sessions", "jobs", "backend", "views", "app"],
    "ui/views": ["base", "login", "tree", "file", "history", "commit", "checks", "dreams", "erase", "undo"],
}

#: Private names of third-party objects memvault uses knowingly (dulwich's object store), and the
#: standard library's ``os._exit`` (the CLI ends at once on Ctrl-C while it starts: cli/__init__).
THIRD_PARTY_PRIVATE = {"_iter_loose_objects", "_update_pack_cache", "_exit"}

MAX_LINES = 700


def _modules() -> dict[str, Path]:
    """``name -> file``: top-level modules by stem, subpackage modules as ``folder/stem``."""
    out: dict[str, Path] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        out["/".join(rel.with_suffix("").parts)] = path
    return out


def _unit(name: str) -> str:
    return name.split("/")[0]


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports inside ``if TYPE_CHECKING:`` blocks (not run, no cycle)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def _imports(name: str, path: Path, *, runtime_only: bool = False) -> list[tuple[str, list[str]]]:
    """``(absolute module, imported names)`` of every import in ``path``."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree) if runtime_only else set()
    package = ["memvault", *name.split("/")[:-1]]
    if name.endswith("__init__"):
        package = ["memvault", *name.split("/")[:-1]]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            out.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((module, names))
    return out


def _targets(module: str, names: list[str]) -> list[str]:
    """The memvault modules an import reaches, as ``unit`` or ``unit/module`` names."""
    parts = module.split(".")
    if parts[0] != "memvault":
        return []
    if len(parts) == 1:  # from memvault import x, y
        return ["/".join([n]) for n in names]
    if (SRC.joinpath(*parts[1:])).is_dir():  # from memvault.git import repo, from memvault.server.views import x
        base = "/".join(parts[1:])
        return [f"{base}/{n}" if SRC.joinpath(*parts[1:], f"{n}.py").exists() else base for n in names] or [base]
    # a module, possibly in a nested subpackage (memvault.server.views.base)
    for depth in range(len(parts), 1, -1):
        if SRC.joinpath(*parts[1:depth]).with_suffix(".py").exists():
            return ["/".join(parts[1:depth])]
    return ["/".join(parts[1:3])]


def test_every_unit_has_a_tier() -> None:
    units = {_unit(n) for n in _modules()}
    assert units == set(TIERS), units ^ set(TIERS)
    for package, order in ORDER.items():
        depth = package.count("/") + 1
        present = {
            n.split("/")[depth] for n in _modules() if n.startswith(package + "/") and not n.endswith("__init__")
        }
        assert present == set(order), (package, present ^ set(order))


def test_third_party_owners() -> None:
    for name, path in _modules().items():
        for module, _names in _imports(name, path):
            top = module.split(".")[0]
            if top in OWNERS:
                assert name in OWNERS[top], f"{name} imports {top}"


def test_imports_point_down_between_units() -> None:
    for name, path in _modules().items():
        unit = _unit(name)
        for module, names in _imports(name, path, runtime_only=True):
            for target in _targets(module, names):
                tunit = _unit(target)
                if tunit == unit:
                    continue
                assert TIERS[tunit] < TIERS[unit], f"{name} imports {target}"


def test_imports_point_one_way_inside_subpackages() -> None:
    """Inside a subpackage (or a nested one: ``server/views``), a module imports only the modules
    listed before it in ``ORDER`` for the innermost package both lie in."""
    for name, path in _modules().items():
        own = name.split("/")
        if own[-1] == "__init__":
            continue
        for module, names in _imports(name, path, runtime_only=True):
            for target in _targets(module, names):
                other = target.split("/")
                common = 0
                while common < min(len(own), len(other)) - 1 and own[common] == other[common]:
                    common += 1
                package = "/".join(own[:common])
                if not common or package not in ORDER or len(other) <= common or other[common] == "__init__":
                    continue
                order = ORDER[package]
                assert order.index(other[common]) < order.index(own[common]), f"{name} imports {target}"


def test_no_module_imports_a_private_name() -> None:
    for name, path in _modules().items():
        for module, names in _imports(name, path):
            if not module.startswith("memvault"):
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            assert not private, f"{name} imports {private} from {module}"


def _class_names(cls: ast.ClassDef) -> set[str]:
    """Names a class defines: its methods, class attributes and ``self.x`` assignments."""
    out: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    out.add(target.id)
    return out


def _private_uses(tree: ast.Module) -> list[tuple[int, str]]:
    """``obj._name`` uses of a private attribute the enclosing class does not define itself."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, own: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            own = own | _class_names(node)
        if isinstance(node, ast.Attribute):
            attr = node.attr
            if attr.startswith("_") and not attr.startswith("__") and attr not in own:
                if attr not in THIRD_PARTY_PRIVATE:
                    found.append((node.lineno, attr))
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(tree, set())
    return found


def test_no_module_uses_another_modules_private_attributes() -> None:
    for name, path in _modules().items():
        uses = _private_uses(ast.parse(path.read_text()))
        assert not uses, f"{name} uses private attributes it does not own: {uses}"


def test_private_use_check_finds_a_sideways_use() -> None:
    tree = ast.parse("from memvault import store\n\ndef f(s):\n    return s._keys.index\n")
    assert _private_uses(tree) == [(4, "_keys")]
    own = ast.parse(
        "class A:\n    def __init__(self):\n        self._k = 1\n    def g(self, o):\n        return o._k\n"
    )
    assert _private_uses(own) == []


@pytest.mark.parametrize("name", sorted(_modules()))
def test_module_size(name: str) -> None:
    lines = _modules()[name].read_text().count("\n")
    assert lines <= MAX_LINES, f"{name} has {lines} lines"


def test_each_subpackage_says_what_it_owns() -> None:
    for init in SRC.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, init.parent.name
        assert 1 <= len(doc.strip().split("\n\n")[0].splitlines()) <= 2, init.parent.name


def test_store_and_cli_do_not_import_anthropic() -> None:
    code = (
        "import sys, memvault, memvault.cli, memvault.protocol.commands, memvault.history; memvault.cli.build_parser(); "
        "print(any(m == 'anthropic' or m.startswith('anthropic.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_git_binary_or_print_in_library() -> None:
    for name, path in _modules().items():
        if name.startswith("cli/"):
            continue
        text = path.read_text()
        assert "print(" not in text, name
        # keys/command runs the one subprocess of the library: an operator's key helper.
        assert "subprocess" not in text or name == "keys/command", name

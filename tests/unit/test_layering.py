"""The import rules of the package: one owner per third-party dependency, imports point one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memvault

SRC = Path(memvault.__file__).parent

#: Which memvault module may import which third-party package.
OWNERS = {"cryptography": {"crypto"}, "dulwich": {"gitstore"}, "anthropic": {"tool", "demo"}}

#: Tier of each module; a module may import only modules of a strictly lower tier.
TIERS = {
    "errors": 0,
    "settings": 1,
    "paths": 2,
    "crypto": 2,
    "fsutil": 2,
    "keys": 3,
    "keyring": 3,
    "records": 3,
    "gitstore": 3,
    "store": 4,
    "protocol": 5,
    "history": 5,
    "tool": 6,
    "demo": 7,
    "cli": 8,
    "__init__": 9,
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from .x import y / from . import x
                if node.module:
                    out.add("memvault." + node.module.split(".")[0])
                else:
                    out.update("memvault." + alias.name for alias in node.names)
            elif node.module:
                out.add(node.module)
    return out


def test_every_module_has_a_tier() -> None:
    assert {p.stem for p in SRC.glob("*.py")} == set(TIERS)


def test_third_party_owners() -> None:
    for path in SRC.glob("*.py"):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in OWNERS:
                assert path.stem in OWNERS[top], f"{path.stem} imports {top}"


def test_imports_point_down() -> None:
    for path in SRC.glob("*.py"):
        for name in _imports(path):
            if name.startswith("memvault."):
                target = name.split(".")[1]
                assert TIERS[target] < TIERS[path.stem], f"{path.stem} imports {target}"


def test_store_and_cli_do_not_import_anthropic() -> None:
    code = (
        "import sys, memvault, memvault.cli, memvault.protocol, memvault.history; "
        "print(any(m == 'anthropic' or m.startswith('anthropic.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_git_binary_or_print_in_library() -> None:
    for path in SRC.glob("*.py"):
        if path.stem in ("cli",):
            continue
        text = path.read_text()
        assert "print(" not in text, path.stem
        assert "subprocess" not in text, path.stem

"""The import rules of the package: one owner per third-party dependency, imports point one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memvault

SRC = Path(memvault.__file__).parent

#: Which memvault module may import which third-party package.
OWNERS = {
    "cryptography": {"crypto"},
    "dulwich": {"gitstore"},
    "anthropic": {"tool", "demo"},
    "hyperscan": {"scrub/prefilter"},
    "ahocorasick": {"scrub/validators"},
}

#: Tier of each module; a module may import only modules of a strictly lower tier.
TIERS = {
    "errors": 0,
    "settings": 1,
    "scrub/prefilter": 1,
    "paths": 2,
    # the scrub package: each module imports only those below it
    "scrub/validators": 2,
    "scrub/detectors": 2.1,
    "scrub/rules": 2.2,
    "scrub/engine": 2.3,
    "scrub/__init__": 2.4,
    "crypto": 2,
    "fsutil": 2,
    "packread": 2,
    "keys": 3,
    "keyring": 3,
    "access": 3,
    "records": 3,
    "gitstore": 3,
    "store": 4,
    "scrub/guard": 4.5,  # names MemoryStore for typing; protocol and transfer call it
    "protocol": 5,
    "history": 5,
    "tool": 6,
    "undo": 6,
    "transfer": 6,
    "verify": 6,
    "redact": 6,
    "expiry": 6,
    "keymgmt": 6,
    "demo": 7,
    "cli": 8,
    "__init__": 9,
}


def _modules() -> dict[str, Path]:
    """Tier name -> file: top-level modules by stem, every file of the cli package as "cli",
    the files of the scrub package as "scrub/<stem>"."""
    out = {p.stem: p for p in SRC.glob("*.py")}
    out.update({f"cli/{p.stem}": p for p in (SRC / "cli").glob("*.py")})
    out.update({f"scrub/{p.stem}": p for p in (SRC / "scrub").glob("*.py")})
    return out


def _tier(name: str) -> float:
    return TIERS["cli"] if name.startswith("cli/") else TIERS[name]


def _target(name: str) -> str:
    """The tier name of an imported ``memvault.x[.y]`` module."""
    parts = name.split(".")
    if parts[1] == "scrub":
        return "scrub/" + (parts[2] if len(parts) > 2 else "__init__")
    return parts[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    in_cli = path.parent.name == "cli"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if in_cli and node.level == 1:
                continue  # within the cli package
            if node.level:  # relative: from .x import y / from . import x
                if node.module:
                    out.add("memvault." + node.module)
                else:
                    out.update("memvault." + alias.name for alias in node.names)
            elif node.module:
                out.add(node.module)
    return out


def test_every_module_has_a_tier() -> None:
    assert {n for n in _modules() if not n.startswith("cli/")} | {"cli"} == set(TIERS)


def test_third_party_owners() -> None:
    for module, path in _modules().items():
        for name in _imports(path):
            top = name.split(".")[0]
            if top in OWNERS:
                assert module in OWNERS[top], f"{module} imports {top}"


def test_imports_point_down() -> None:
    for module, path in _modules().items():
        for name in _imports(path):
            if name.startswith("memvault."):
                target = _target(name)
                assert _tier(target) < _tier(module), f"{module} imports {target}"


def test_store_and_cli_do_not_import_anthropic() -> None:
    code = (
        "import sys, memvault, memvault.cli, memvault.protocol, memvault.history; memvault.cli.build_parser(); "
        "print(any(m == 'anthropic' or m.startswith('anthropic.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_git_binary_or_print_in_library() -> None:
    for module, path in _modules().items():
        if module.startswith("cli/"):
            continue
        text = path.read_text()
        assert "print(" not in text, path.stem
        assert "subprocess" not in text, path.stem

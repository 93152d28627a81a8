"""``memvault completion bash|zsh|fish``: a shell completion script, generated from the parser
itself, so it always offers the commands and options this version has.

It completes command and subcommand names, options (with their descriptions in zsh and fish),
the values of options and arguments that have a fixed set of choices, and file names elsewhere.
It never opens a store: paths inside one are not completed (that would need the key).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from ._main import GLOBAL_OPTIONS, CommandParser, build_parser

__all__ = ["register", "script", "SHELLS"]

SHELLS = ("bash", "zsh", "fish")


@dataclass
class Option:
    flags: list[str]
    takes_value: bool
    help: str
    choices: list[str]


@dataclass
class Node:
    """One command (``path`` ``""`` for ``memvault`` itself, else e.g. ``"key add"``)."""

    path: str
    commands: list[tuple[str, str]] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    choices: list[str] = field(default_factory=list)  # of its positional arguments


def _help(text: str | None) -> str:
    if not text or text == argparse.SUPPRESS:
        return ""
    return " ".join(text.split()).replace("%%", "%")


def _option(action: argparse.Action) -> Option:
    choices = [str(c) for c in action.choices] if action.choices and not isinstance(action.choices, dict) else []
    return Option(list(action.option_strings), action.nargs != 0, _help(action.help), choices)


def tree(parser: CommandParser) -> list[Node]:
    """Every command of ``parser``, depth first, the root first."""
    out: list[Node] = []

    def visit(p: CommandParser, path: str) -> None:
        node = Node(path)
        own = p.option_strings()
        for action in p.defined:
            if action.option_strings:
                if action.help != argparse.SUPPRESS:
                    node.options.append(_option(action))
            elif action.choices and not isinstance(action.choices, dict):
                node.choices += [str(c) for c in action.choices]
        if not p.root:
            for flags, kwargs in GLOBAL_OPTIONS:
                if not own.intersection(flags):
                    node.options.append(
                        Option(list(flags), kwargs.get("action") != "store_true", _help(kwargs["help"]), [])
                    )
        node.commands = [(name, _help(text)) for name, (_sub, text) in p.commands.items()]
        out.append(node)
        for name, (sub, _text) in p.commands.items():
            visit(sub, f"{path} {name}".strip())

    visit(parser, "")
    return out


def _sh(text: str) -> str:
    """``text`` single-quoted for bash and zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


def _fish_quote(text: str) -> str:
    """``text`` single-quoted for fish."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _valued(nodes: list[Node]) -> list[str]:
    """``"path|--option"`` for every option that takes a value (the word after it is its value)."""
    return [f"{node.path}|{flag}" for node in nodes for opt in node.options if opt.takes_value for flag in opt.flags]


def _sh_tables(nodes: list[Node], *, zsh: bool) -> list[str]:
    """The shell functions bash and zsh share: each sets ``REPLY`` (a word list) or ``reply``
    (zsh: an array) for a command path, and ``_memvault_valued PATH OPTION`` says whether the
    option takes a value."""

    def table(name: str, rows: list[tuple[str, list[str]]]) -> list[str]:
        out = [f"{name}() {{", '    case "$1" in']
        for key, words in rows:
            value = f"({' '.join(_sh(w) for w in words)})" if zsh else _sh(" ".join(words))
            out.append(f"    {_sh(key)}) {'reply' if zsh else 'REPLY'}={value} ;;")
        out += [f"    *) {'reply=()' if zsh else 'REPLY='} ;;", "    esac", "}"]
        return out

    lines = table("_memvault_commands", [(n.path, [c for c, _ in n.commands]) for n in nodes if n.commands])
    choices = [
        (f"{n.path}|{flag}", opt.choices) for n in nodes for opt in n.options if opt.choices for flag in opt.flags
    ]
    choices += [(f"{n.path}|", n.choices) for n in nodes if n.choices]
    lines += table("_memvault_choices", choices)
    if zsh:  # "name:description" for _describe
        lines += table("_memvault_described", [(n.path, [f"{c}:{t}" for c, t in n.commands]) for n in nodes])
        options = [(n.path, [f"{flag}:{o.help}" for o in n.options for flag in o.flags]) for n in nodes]
        lines += table("_memvault_options", options)
    else:
        lines += table("_memvault_options", [(n.path, [flag for o in n.options for flag in o.flags]) for n in nodes])
    lines += ["_memvault_valued() {", '    case "$1|$2" in']
    valued = _valued(nodes)
    if valued:
        lines.append(f"    {'|'.join(_sh(v) for v in valued)}) return 0 ;;")
    lines += ["    esac", "    return 1", "}"]
    return lines


#: The word scan bash and zsh share: the command path so far, and the option whose value is
#: being completed (if any).
_SCAN = [
    '        if [[ -n $option ]]; then option=""; continue; fi',
    "        if [[ $word == -* ]]; then",
    '            [[ $word != *=* ]] && _memvault_valued "$path" "$word" && option=$word',
    "            continue",
    "        fi",
    '        _memvault_commands "$path"',
]


def _bash(nodes: list[Node]) -> str:
    lines = [
        "# memvault completion for bash (memvault completion bash).",
        '# Load it with: eval "$(memvault completion bash)"',
        *_sh_tables(nodes, zsh=False),
        "_memvault() {",
        '    local cur=${COMP_WORDS[COMP_CWORD]} path="" option="" word i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        word=${COMP_WORDS[i]}",
        *_SCAN,
        '        if [[ " $REPLY " == *" $word "* ]]; then path=${path:+$path }$word; fi',
        "    done",
        "    COMPREPLY=()",
        "    if [[ -n $option ]]; then",
        '        _memvault_choices "$path|$option"',
        "    elif [[ $cur == -* ]]; then",
        '        _memvault_options "$path"',
        "    else",
        '        _memvault_commands "$path"',
        '        [[ -z $REPLY ]] && _memvault_choices "$path|"',
        "    fi",
        '    [[ -n $REPLY ]] && COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))',
        "    return 0",
        "}",
        "complete -o default -F _memvault memvault",
    ]
    return "\n".join(lines) + "\n"


def _zsh(nodes: list[Node]) -> str:
    lines = [
        "#compdef memvault",
        "# memvault completion for zsh (memvault completion zsh).",
        '# Load it with: eval "$(memvault completion zsh)" after compinit, or save it as _memvault in $fpath.',
        *_sh_tables(nodes, zsh=True),
        "_memvault() {",
        '    local path="" option="" word i',
        "    local -a reply",
        "    for ((i = 2; i < CURRENT; i++)); do",
        "        word=${words[i]}",
        *_SCAN,
        "        if (( ${reply[(Ie)$word]} )); then path=${path:+$path }$word; fi",
        "    done",
        "    if [[ -n $option ]]; then",
        '        _memvault_choices "$path|$option"',
        "        if (( $#reply )); then compadd -a reply; else _files; fi",
        "    elif [[ $PREFIX == -* ]]; then",
        '        _memvault_options "$path"',
        "        _describe -t options option reply",
        "    else",
        '        _memvault_described "$path"',
        "        if (( $#reply )); then",
        "            _describe -t commands command reply",
        "        else",
        '            _memvault_choices "$path|"',
        "            if (( $#reply )); then compadd -a reply; else _files; fi",
        "        fi",
        "    fi",
        "}",
        'if [[ "${funcstack[1]}" == _memvault ]]; then _memvault "$@"; else compdef _memvault memvault; fi',
    ]
    return "\n".join(lines) + "\n"


def _fish(nodes: list[Node]) -> str:
    """Command paths are ``memvault`` and ``memvault key add``: never empty, so that fish's
    ``switch`` and ``test`` see one word."""
    q = _fish_quote
    lines = [
        "# memvault completion for fish (memvault completion fish).",
        "# Load it with: memvault completion fish | source",
        "# or save it as ~/.config/fish/completions/memvault.fish.",
        "function __memvault_commands",
        "    switch $argv[1]",
    ]
    for n in nodes:
        if n.commands:
            lines += [
                f"        case {q(('memvault ' + n.path).strip())}",
                f"            printf '%s\\n' {' '.join(q(c) for c, _ in n.commands)}",
            ]
    lines += ["    end", "end", "function __memvault_valued", '    switch "$argv[1]|$argv[2]"']
    valued = [f"memvault {v}".replace("memvault |", "memvault|") for v in _valued(nodes)]
    if valued:
        lines += [f"        case {' '.join(q(v) for v in valued)}", "            return 0"]
    lines += [
        "    end",
        "    return 1",
        "end",
        "function __memvault_path",
        "    set -l words (commandline -opc)",
        "    set -e words[1]",
        "    set -l path memvault",
        "    set -l option ''",
        "    for word in $words",
        '        if test -n "$option"',
        "            set option ''",
        "            continue",
        "        end",
        "        if string match -q -- '-*' $word",
        "            if not string match -q -- '*=*' $word; and __memvault_valued \"$path\" $word",
        "                set option $word",
        "            end",
        "            continue",
        "        end",
        '        if contains -- $word (__memvault_commands "$path")',
        '            set path "$path $word"',
        "        end",
        "    end",
        '    echo "$path"',
        "end",
        "function __memvault_at",
        '    test (__memvault_path) = "$argv[1]"',
        "end",
        "complete -c memvault -f",
    ]
    for n in nodes:
        when = f"-n {q('__memvault_at ' + q(('memvault ' + n.path).strip()))}"
        for name, text in n.commands:
            lines.append(f"complete -c memvault {when} -a {q(name)} -d {q(text)}")
        if n.choices:
            lines.append(f"complete -c memvault {when} -a {q(' '.join(n.choices))}")
        elif not n.commands:
            lines.append(f"complete -c memvault {when} -F")
        for opt in n.options:
            parts = [
                f"-l {q(flag[2:])}"
                if flag.startswith("--")
                else f"-s {q(flag[1:])}"
                if len(flag) == 2
                else f"-o {q(flag[1:])}"
                for flag in opt.flags
            ]
            if opt.takes_value:
                parts.append(f"-x -a {q(' '.join(opt.choices))}" if opt.choices else "-r -F")
            if opt.help:
                parts.append(f"-d {q(opt.help)}")
            lines.append(f"complete -c memvault {when} {' '.join(parts)}")
    return "\n".join(lines) + "\n"


def script(shell: str, parser: CommandParser | None = None) -> str:
    """The completion script for ``shell`` (one of :data:`SHELLS`)."""
    nodes = tree(parser or build_parser())
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](nodes)


def _cmd_completion(args: argparse.Namespace) -> int:
    print(script(args.shell), end="")
    return 0


def register(sub: Any) -> None:
    s = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description=(
            'Print a completion script for SHELL on stdout. bash: eval "$(memvault completion bash)" in '
            '~/.bashrc; zsh: eval "$(memvault completion zsh)" in ~/.zshrc after compinit; fish: '
            "memvault completion fish > ~/.config/fish/completions/memvault.fish."
        ),
    )
    s.add_argument("shell", choices=SHELLS, help="the shell")
    s.set_defaults(func=_cmd_completion)

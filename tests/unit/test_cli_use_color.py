"""``cli._common.use_color``: the colour rule of the commands without ``--color`` (verify, key
list, ...) is the history commands' ``--color=auto``: a terminal, ``NO_COLOR`` unset or empty,
``TERM`` not ``dumb``."""

from __future__ import annotations

import io

import pytest

from memvault.cli._common import use_color


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("env", "tty", "expected"),
    [
        ({"TERM": "xterm-256color"}, True, True),
        ({"TERM": "xterm-256color"}, False, False),
        ({"TERM": "dumb"}, True, False),
        ({"TERM": "xterm", "NO_COLOR": "1"}, True, False),
        ({"TERM": "xterm", "NO_COLOR": ""}, True, True),
    ],
)
def test_use_color(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], tty: bool, expected: bool) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert use_color(_Tty() if tty else io.StringIO()) is expected

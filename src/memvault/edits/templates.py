"""Starting layouts for a memory directory (``memvault init --template NAME``).

Each template seeds the files recommended for work that spans many sessions: an index,
``/memories/MEMORY.md``, saying what is where (its first lines are what a session starts with, see
``memvault hook session-start``), and a progress log, plus files for the kind of work:

- ``project``: a feature checklist and how to run the project's init script (software built over
  many sessions: read the progress log, run the init script, work on one feature, log it);
- ``support``: guidelines and the layout of per-customer notes;
- ``research``: sources, findings and open questions.

:func:`apply_template` writes one template as one commit.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import InvalidInputError, PathExistsError
from ..paths import parse_path
from ..protocol.context import INDEX_PATH
from ..store import Committed, MemoryStore, Transaction

__all__ = ["TEMPLATES", "template_names", "check_template", "apply_template"]

_INDEX_RULES = (
    "The first 200 lines of this file start every session: keep it short, one line per file,\n"
    "details in the files. Never store secrets (passwords, keys, card numbers).\n"
)

_PROGRESS = """\
# Progress log

Newest entry first. Read the latest entry at the start of a session; add one before it ends.

## YYYY-MM-DD: <what this session was about>
- Done:
- State: what works now; what is half-done, and where.
- Next: the first thing the next session should do.
- Notes: surprises, decisions and their reasons.
"""

_PROJECT = {
    INDEX_PATH: f"""\
# Memory index: project

{_INDEX_RULES}
- /memories/progress.md: progress log, newest first. Read it first.
- /memories/features.md: feature checklist; what is done is what is checked.
- /memories/init.md: how to start the project and check that it works.

Each session: read the progress log, run the init script, pick ONE unchecked feature, finish and
test it, check it off, log the session.
""",
    "/memories/progress.md": _PROGRESS,
    "/memories/features.md": """\
# Feature checklist

One line per behaviour a user would notice, with how to check it. Check an item only after testing
it end to end; never delete or reword an item to make it pass.

- [ ] <feature>: <how to verify it>
""",
    "/memories/init.md": """\
# Starting the project

Run this at the start of every session, before changing anything; if it fails, fix that first.

- Init script: `./init.sh` (installs dependencies, starts the development server)
- Smoke test: <the command or steps showing the main flow works>
- Tests: <the command that runs the test suite>
- Needs: <services, ports, environment variable names; never their secret values>
""",
}

_SUPPORT = {
    INDEX_PATH: f"""\
# Memory index: customer support

{_INDEX_RULES}
- /memories/guidelines.md: how we answer (tone, policies, escalation). Read before replying.
- /memories/customers/README.md: how customer notes are kept; one file per customer.
- /memories/progress.md: open cases and promised follow-ups, newest first.
""",
    "/memories/guidelines.md": """\
# Support guidelines

- Tone: <e.g. friendly, concise, no jargon>
- Policies: <refunds, replacements, what needs approval>
- Escalate to a person when: <legal threats, security issues, anything you cannot verify>
- Confirm what you did and what happens next at the end of every reply.
""",
    "/memories/customers/README.md": """\
# Customer notes

One file per customer: /memories/customers/<customer-id>.md (an account or ticket id, not a name).
Keep in each: preferences (contact channel, language), open issues with dates, what was promised.
Never: passwords, full card numbers, government ids, health details.
Update the file when a case changes; delete what is no longer true.
""",
    "/memories/progress.md": """\
# Open cases and follow-ups

Newest first; remove a line when the case is closed.

- YYYY-MM-DD <customer-id>: <issue>; next step: <what, by when>
""",
}

_RESEARCH = {
    INDEX_PATH: f"""\
# Memory index: research

{_INDEX_RULES}
- /memories/questions.md: the question being answered and the open questions. Start here.
- /memories/findings.md: what has been established, each with its sources and confidence.
- /memories/sources.md: sources read, one line each: what it is and what it is good for.
- /memories/progress.md: progress log, newest first.
""",
    "/memories/questions.md": """\
# Questions

Main question: <what this research must answer>

Open:
- <question>: <why it matters; what would settle it>

Settled (see findings.md):
""",
    "/memories/findings.md": """\
# Findings

One entry per claim: the claim, the sources supporting it (ids from sources.md), confidence
(high / medium / low), and what would change it.

- <claim> [S1, S2] (confidence: medium)
""",
    "/memories/sources.md": """\
# Sources

- S1: <title, author, date, where to find it>: <what it covers; how reliable>
""",
    "/memories/progress.md": _PROGRESS,
}

#: Every template: name -> {path: content}.
TEMPLATES: Mapping[str, Mapping[str, str]] = {"project": _PROJECT, "support": _SUPPORT, "research": _RESEARCH}


def template_names() -> tuple[str, ...]:
    """The names :func:`apply_template` takes, sorted."""
    return tuple(sorted(TEMPLATES))


def check_template(name: object) -> Mapping[str, str]:
    """The files of template ``name`` (``path -> content``).

    Raises:
        InvalidInputError: no template has that name (the message lists the names).
    """
    files = TEMPLATES.get(name) if isinstance(name, str) else None
    if files is None:
        raise InvalidInputError(f"Error: Unknown template {name!r}; use one of {', '.join(template_names())}.")
    return files


def apply_template(
    store: MemoryStore, name: str, *, actor: str = "operator", session: str = ""
) -> Committed[tuple[str, ...]]:
    """Write the files of template ``name`` as one commit (command ``template``).

    Returns:
        What was committed; its ``value`` is the paths written.

    Raises:
        InvalidInputError: an unknown template (the message lists the names); nothing is written.
        PathExistsError: one of the files (or a directory at its path) exists already; nothing is
            written.
        LimitExceededError, StorageError, ...: as any write.
    """
    files = check_template(name)
    encoded = [(parse_path(path, store.settings), text.encode("utf-8")) for path, text in files.items()]

    def apply(txn: Transaction) -> tuple[str, ...]:
        for path, _data in encoded:
            if txn.get(path) is not None:
                raise PathExistsError(f"Error: {path.text} already exists; the template writes only new files")
        for path, data in encoded:
            txn.write_file(path, data)
        return tuple(path.text for path, _data in encoded)

    paths = tuple(path.text for path, _data in encoded)
    return store.transact(apply, command="template", paths=paths, actor=actor, session=session)

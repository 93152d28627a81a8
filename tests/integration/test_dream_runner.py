"""``memvault.dream.runner.run_dream`` against a scripted fake of the Messages API over real HTTP.

A consolidation pass runs on a side branch of a real store: the tests assert the branch's exact
contents and commits afterwards, that ``main`` did not move, what reached the API (the system
prompt, the audit findings, scrubbed transcripts, the tool results of refused calls), and how a
pass stops (done, quota, turns), plus the failures that must come before any branch or request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

import memvault
from conftest import make_store
from fake_messages_http import FakeMessagesServer
from memvault.admin.audit import AuditReport, Finding
from memvault.dream import prompt as dream_prompt
from memvault.dream.prompt import (
    CONSOLIDATION_PROMPT,
    DEFAULT_MODEL,
    MAX_TRANSCRIPT_CHARS,
    build_request,
    dream_model,
    read_transcripts,
)
from memvault.dream.runner import DreamQuotas, DreamResult, run_dream
from memvault.errors import InvalidInputError, ServiceError
from memvault.history import read_at
from memvault.paths import parse_path
from memvault.settings import StoreSettings
from memvault.store import AnyBranch, Transaction

MODEL = "claude-sonnet-4-6"
INDEX = "/memories/MEMORY.md"
DEPLOY = "/memories/deploy.md"
DEPLOY_COPY = "/memories/deploy-copy.md"
SPRINT = "/memories/sprint-2023.md"
MERGED = "/memories/deployment.md"

DEPLOY_TEXT = "# Deploy\n- Deploys go out on Tuesdays.\n- Run `make release` from main.\n"
SPRINT_TEXT = "# Sprint 2023-14\n- Finish the beta migration by 2023-04-07.\n"
INDEX_TEXT = (
    "# Memory index\n"
    "- [Deploy notes](deploy.md)\n"
    "- [Deploy notes, copy](deploy-copy.md)\n"
    "- [Sprint 2023-14](sprint-2023.md)\n"
    "- [Style guide](style.md)\n"
)
SEED = {INDEX: INDEX_TEXT, DEPLOY: DEPLOY_TEXT, DEPLOY_COPY: DEPLOY_TEXT, SPRINT: SPRINT_TEXT}
MERGED_TEXT = (
    "# Deployment\n"
    "- Deploys go out on Tuesdays.\n"
    "- Run `make release` from main.\n"
    "(merged from /memories/deploy.md and /memories/deploy-copy.md)\n"
)
INDEX_OLD_TAIL = (
    "- [Deploy notes, copy](deploy-copy.md)\n- [Sprint 2023-14](sprint-2023.md)\n- [Style guide](style.md)\n"
)
INDEX_NEW_TAIL = "- [Deployment (merged)](deployment.md)\n"
FINAL_TEXT = "Merged the two deploy notes, fixed the index's dangling link, pruned the 2023 sprint note."

PATH_ERROR = "Error: Invalid path /etc/passwd: it must be /memories or start with /memories/"
QUOTA_FILES_4 = (
    "Error: This consolidation pass may change at most 4 files (quota); the change was not made. "
    "Stop changing files and finish with your summary."
)
QUOTA_BYTES_10 = (
    "Error: This consolidation pass may delete at most 10 bytes of the memory it started from (quota); "
    "the change was not made. Stop changing files and finish with your summary."
)
DANGLING_LINE = "- dangling-link /memories/style.md: linked from /memories/MEMORY.md line 5: no such file"
DUPLICATE_LINE = (
    "- duplicate /memories/deploy-copy.md: 2 files with the same content: /memories/deploy-copy.md, /memories/deploy.md"
)

EMAIL = "tomas.patel@monarchsolutions.de"
API_KEY = "sk-ant-api03-" + "Zq7Xk2Lm9Pw4Rt6Yb1Nc8Vd3Hf5Gj0Ks" * 3 + "Ab3dE" + "AA"


def _tool_use(tool_use_id: str, **command: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": "memory", "input": command}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


# -- fixtures and helpers -----------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[memvault.MemoryStore]:
    """A store whose main holds :data:`SEED`: two duplicate notes, an index with a dangling link
    (``style.md``) and a stale sprint note."""
    s = make_store(tmp_path / "store", StoreSettings(durability="none"))

    def apply(txn: Transaction) -> None:
        for path, text in SEED.items():
            txn.write_file(parse_path(path, txn.settings), text.encode("utf-8"))

    s.transact(apply, command="put", paths=tuple(SEED), actor="test", session="")
    yield s
    s.close()


def _client(server: FakeMessagesServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0)


def _files(store: AnyBranch) -> dict[str, str]:
    """Every file at the head of ``store`` (a store or a branch) with its content."""
    snap = store.snapshot()
    out: dict[str, str] = {}
    for path in snap.descendants(parse_path("/memories", snap.settings)):
        node = snap.get(path)
        if node is not None and not node.is_dir:
            out[path.text] = read_at(store, path.text).decode("utf-8")
    return out


def _first_user_message(server: FakeMessagesServer) -> str:
    messages = server.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["user"]
    content = messages[0]["content"]
    assert isinstance(content, str)
    return content


def _assert_main_unchanged(store: memvault.MemoryStore, head: tuple[bytes, int]) -> None:
    assert store.head == head
    assert _files(store) == SEED


# -- the consolidation pass ---------------------------------------------------------------------------

CONSOLIDATION_SCRIPT: list[list[dict[str, Any]]] = [
    [_text("Let me look at the memory first."), _tool_use("toolu_01", command="view", path="/memories")],
    [_tool_use("toolu_02", command="create", path=MERGED, file_text=MERGED_TEXT)],
    [_tool_use("toolu_03", command="delete", path=DEPLOY_COPY)],
    [_tool_use("toolu_04", command="str_replace", path=INDEX, old_str=INDEX_OLD_TAIL, new_str=INDEX_NEW_TAIL)],
    [_tool_use("toolu_05", command="delete", path=SPRINT)],
    [_tool_use("toolu_06", command="create", path="/etc/passwd", file_text="root:x:0:0::/root:/bin/sh\n")],
    # A fifth changed file: over the quota. The store still answers the next call of the turn.
    [_tool_use("toolu_07", command="delete", path=DEPLOY), _tool_use("toolu_08", command="view", path=DEPLOY)],
    [_text(FINAL_TEXT)],
]


def test_a_consolidation_pass_on_its_branch(store: memvault.MemoryStore) -> None:
    head = store.head
    with FakeMessagesServer(CONSOLIDATION_SCRIPT) as server:
        result = run_dream(store, client=_client(server), model=MODEL, quotas=DreamQuotas(max_changed_files=4))

    assert server.errors == [] and server.exhausted
    assert len(server.requests) == len(CONSOLIDATION_SCRIPT)

    # What reached the API: our system prompt, the audit's findings, the memory tool.
    first = server.requests[0]
    assert first["model"] == MODEL
    assert first["system"] == CONSOLIDATION_PROMPT
    assert {"type": "memory_20250818", "name": "memory"} in first["tools"]
    user = _first_user_message(server)
    assert DANGLING_LINE in user.splitlines()
    assert DUPLICATE_LINE in user.splitlines()
    assert "<transcript" not in user

    # The refused calls: the model read the protocol's path error and the quota's error.
    assert server.tool_results_of(6) == [
        {"type": "tool_result", "tool_use_id": "toolu_06", "content": PATH_ERROR, "is_error": True}
    ]
    quota, view = server.tool_results_of(7)
    assert quota == {"type": "tool_result", "tool_use_id": "toolu_07", "content": QUOTA_FILES_4, "is_error": True}
    assert view["tool_use_id"] == "toolu_08" and not view.get("is_error")
    assert view["content"] == (
        f"Here's the content of {DEPLOY} with line numbers:\n"
        "     1\t# Deploy\n     2\t- Deploys go out on Tuesdays.\n     3\t- Run `make release` from main."
    )
    for index in range(1, 6):
        assert [not r.get("is_error") for r in server.tool_results_of(index)] == [True], index

    # The result.
    assert re.fullmatch(r"[0-9a-f]{16}", result.dream_id)
    assert result.branch == f"dream/{result.dream_id}"
    assert result.fork_point == head[0].decode("ascii")
    assert result == DreamResult(
        dream_id=result.dream_id,
        branch=result.branch,
        fork_point=result.fork_point,
        model=MODEL,
        commits=4,
        changed_files=[INDEX, DEPLOY_COPY, MERGED, SPRINT],
        # two whole files gone, and what the index lost by its edit (a shrinking file counts)
        deleted_bytes=len(DEPLOY_TEXT.encode()) + len(SPRINT_TEXT.encode()) + len(INDEX_OLD_TAIL) - len(INDEX_NEW_TAIL),
        stopped="quota",
        summary=FINAL_TEXT,
        refused=2,
    )
    assert result.to_json() == {
        "dream_id": result.dream_id,
        "branch": result.branch,
        "fork_point": result.fork_point,
        "model": MODEL,
        "commits": 4,
        "changed_files": [INDEX, DEPLOY_COPY, MERGED, SPRINT],
        "deleted_bytes": len(DEPLOY_TEXT) + len(SPRINT_TEXT) + len(INDEX_OLD_TAIL) - len(INDEX_NEW_TAIL),
        "stopped": "quota",
        "summary": FINAL_TEXT,
        "refused": 2,
    }

    # The branch holds exactly the consolidated memory.
    assert store.branches() == [result.branch]
    branch = store.branch(result.branch)
    assert _files(branch) == {
        INDEX: INDEX_TEXT.replace(INDEX_OLD_TAIL, INDEX_NEW_TAIL),
        DEPLOY: DEPLOY_TEXT,
        MERGED: MERGED_TEXT,
    }
    assert branch.fork_point == head[0]

    # Its commits: the fork commit, then one per change, all by the dream's actor and session.
    metas = [branch.commit_meta(commit) for commit in reversed(branch.branch_commits())]
    assert [(m.command, m.paths) for m in metas] == [
        ("fork", ()),
        ("create", (MERGED,)),
        ("delete", (DEPLOY_COPY,)),
        ("str_replace", (INDEX,)),
        ("delete", (SPRINT,)),
    ]
    assert {(m.actor, m.session, m.branch) for m in metas} == {("dream", result.dream_id, result.branch)}
    assert metas[0].extra == {
        "fork": result.fork_point,
        "model": MODEL,
        "max_changed_files": "4",
        "max_deleted_bytes": "65536",
        "keyring": "recorded",  # the keyring records the branch (docs/format.md §5.8)
    }
    assert [m.seq for m in metas] == list(range(head[1] + 1, head[1] + 6))

    # Main did not move and holds what it held.
    _assert_main_unchanged(store, head)


def test_the_deleted_bytes_quota_stops_the_pass_after_the_next_turn(store: memvault.MemoryStore) -> None:
    head = store.head
    script = [
        [_tool_use("toolu_01", command="delete", path=SPRINT)],  # over the quota of 10 bytes
        # The turn after the refusal is the last: its tool call is not run.
        [
            _text("The quota stops me; nothing changed."),
            _tool_use("toolu_02", command="create", path=MERGED, file_text="x\n"),
        ],
    ]
    with FakeMessagesServer(script) as server:
        result = run_dream(store, client=_client(server), model=MODEL, quotas=DreamQuotas(max_deleted_bytes=10))

    assert server.errors == [] and server.exhausted and len(server.requests) == 2
    assert server.tool_results_of(1) == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": QUOTA_BYTES_10, "is_error": True}
    ]
    assert (result.stopped, result.commits, result.changed_files, result.deleted_bytes, result.refused) == (
        "quota",
        0,
        [],
        0,
        1,
    )
    assert result.summary == "The quota stops me; nothing changed."
    branch = store.branch(result.branch)
    assert _files(branch) == SEED  # neither the refused delete nor the unrun create
    assert [branch.commit_meta(c).command for c in branch.branch_commits()] == ["fork"]
    assert branch.fork_meta.extra["max_deleted_bytes"] == "10"
    _assert_main_unchanged(store, head)


def test_max_turns_stops_the_pass_without_running_the_last_turns_calls(store: memvault.MemoryStore) -> None:
    head = store.head
    script = [
        [_tool_use("toolu_01", command="view", path="/memories")],
        [_text("Creating the merged note."), _tool_use("toolu_02", command="create", path=MERGED, file_text="x\n")],
        [_text("never requested")],
    ]
    with FakeMessagesServer(script) as server:
        result = run_dream(store, client=_client(server), model=MODEL, max_turns=2)

    assert server.errors == [] and not server.exhausted and len(server.requests) == 2
    assert (result.stopped, result.commits, result.changed_files, result.refused) == ("turns", 0, [], 0)
    assert result.summary == "Creating the merged note."
    assert _files(store.branch(result.branch)) == SEED
    _assert_main_unchanged(store, head)


def test_transcripts_are_scrubbed_before_they_reach_the_api(
    store: memvault.MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transcripts = tmp_path / "transcripts"
    (transcripts / "nested").mkdir(parents=True)
    (transcripts / "2024-05-01-session.txt").write_text(
        f"user: my address is {EMAIL}, and the key is {API_KEY}\nassistant: noted.\n"
    )
    (transcripts / "2024-05-02-session.jsonl").write_text(
        '{"role": "user", "content": "deploys moved to Wednesdays"}\n'
    )
    (transcripts / "build.log").write_text("NOT-A-TRANSCRIPT\n")
    (transcripts / "nested" / "deep.txt").write_text("NESTED-TRANSCRIPT\n")
    monkeypatch.setenv("MEMVAULT_DREAM_MODEL", "claude-from-env")

    with FakeMessagesServer([[_text("Nothing to change.")]]) as server:
        result = run_dream(store, client=_client(server), transcripts=transcripts, instructions="Prefer short files.")

    assert server.errors == [] and len(server.requests) == 1
    wire = json.dumps(server.requests)
    assert EMAIL not in wire and API_KEY not in wire and API_KEY[:20] not in wire
    user = _first_user_message(server)
    assert (
        '<transcript name="2024-05-01-session.txt">\n'
        "user: my address is [REDACTED:email], and the key is [REDACTED:anthropic_api_key]\nassistant: noted.\n"
        "\n</transcript>"
    ) in user
    assert '<transcript name="2024-05-02-session.jsonl">' in user
    assert user.index("2024-05-01-session.txt") < user.index("2024-05-02-session.jsonl")
    assert "NOT-A-TRANSCRIPT" not in user and "NESTED-TRANSCRIPT" not in user
    assert "## Instructions from the operator\n\nPrefer short files." in user
    assert server.requests[0]["model"] == "claude-from-env"
    assert (result.model, result.stopped, result.commits, result.summary) == (
        "claude-from-env",
        "done",
        0,
        "Nothing to change.",
    )
    assert store.branch(result.branch).fork_meta.extra["model"] == "claude-from-env"


def test_a_missing_transcripts_directory_fails_before_any_branch_or_request(
    store: memvault.MemoryStore, tmp_path: Path
) -> None:
    head = store.head
    (tmp_path / "a-file.txt").write_text("not a directory\n")
    with FakeMessagesServer([[_text("unused")]]) as server:
        for path in (tmp_path / "missing", tmp_path / "a-file.txt"):
            with pytest.raises(
                InvalidInputError, match="^The transcripts directory does not exist or is not a directory.$"
            ):
                run_dream(store, client=_client(server), model=MODEL, transcripts=path)
    assert server.requests == [] and server.request_targets == []
    assert store.branches() == []
    _assert_main_unchanged(store, head)


def test_an_api_failure_names_the_service_and_status_and_keeps_the_branch(store: memvault.MemoryStore) -> None:
    head = store.head
    # One scripted turn asking for a tool: the request with its result finds the script run out (HTTP 400).
    with FakeMessagesServer([[_tool_use("toolu_01", command="view", path=INDEX)]]) as server:
        with pytest.raises(ServiceError) as caught:
            run_dream(store, client=_client(server), model=MODEL, instructions="SECRET-INSTRUCTION-CANARY")
    assert len(server.requests) == 2 and server.errors
    [name] = store.branches()
    assert str(caught.value) == (
        f"The Anthropic API failed to answer the consolidation pass on {name}: HTTP 400 (invalid_request_error)."
    )
    assert "CANARY" not in str(caught.value) and "script" not in str(caught.value)
    assert caught.value.service == "The Anthropic API"
    assert _files(store.branch(name)) == SEED
    _assert_main_unchanged(store, head)


def test_the_default_client_reads_the_environment(store: memvault.MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeMessagesServer([[_text("Nothing to change.")]]) as server:
        for key, value in server.env().items():
            if key.startswith("ANTHROPIC_") or key.lower() == "no_proxy":
                monkeypatch.setenv(key, value)
        result = run_dream(store, model=MODEL)
    assert result.stopped == "done" and len(server.requests) == 1
    assert server.request_headers[0]["authorization"] == "Bearer test"


def test_the_default_client_without_credentials_fails_before_the_branch(
    store: memvault.MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_IDENTITY_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "no-config"))
    with pytest.raises(InvalidInputError, match="^No usable Anthropic API credentials"):
        run_dream(store, model=MODEL)
    assert store.branches() == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_turns": 0},
        {"max_tokens": 0},
        {"quotas": DreamQuotas(max_changed_files=-1)},
        {"quotas": DreamQuotas(max_deleted_bytes=-1)},
        {"actor": ""},
        {"model": " "},
        {"instructions": "x" * 20_001},
    ],
)
def test_bad_arguments_fail_before_the_branch(store: memvault.MemoryStore, kwargs: dict[str, Any]) -> None:
    with FakeMessagesServer([[_text("unused")]]) as server:
        with pytest.raises(InvalidInputError):
            run_dream(store, client=_client(server), **({"model": MODEL} | kwargs))
    assert server.requests == [] and store.branches() == []


# -- the prompt module --------------------------------------------------------------------------------


def test_dream_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMVAULT_DREAM_MODEL", raising=False)
    assert dream_model(None) == DEFAULT_MODEL == "claude-sonnet-4-5"
    monkeypatch.setenv("MEMVAULT_DREAM_MODEL", "  ")
    assert dream_model(None) == DEFAULT_MODEL
    monkeypatch.setenv("MEMVAULT_DREAM_MODEL", "claude-opus-4-1")
    assert dream_model(None) == "claude-opus-4-1"
    assert dream_model("claude-haiku-4-5") == "claude-haiku-4-5"
    with pytest.raises(InvalidInputError):
        dream_model("")


def test_the_prompt_states_the_rules() -> None:
    for phrase in (
        "Merge duplicates",
        "Keep provenance",
        "newer evidence",
        "Prune what is stale",
        "/memories/MEMORY.md",
        "200 lines",
        "25,000 bytes",
        "dangling links",
        "Link every file you keep",
        "Never invent facts",
        "Never copy secrets or personal data",
        "Work only through the memory tool",
        "short summary",
    ):
        assert phrase in CONSOLIDATION_PROMPT, phrase


def test_build_request_bounds_the_transcripts() -> None:
    report = AuditReport(
        INDEX, [Finding("orphan", "/memories/a.md", "no index entry links to it")], ["reads-unknown: x"]
    )
    big = [("one.txt", "a" * (MAX_TRANSCRIPT_CHARS - 100)), ("two.txt", "b" * 5000), ("three.txt", "c")]
    system, user = build_request(report, instructions=None, transcripts=big)
    assert system == CONSOLIDATION_PROMPT
    assert "- orphan /memories/a.md: no index entry links to it" in user.splitlines()
    assert "- reads-unknown: x" in user.splitlines()
    assert "## Instructions" not in user
    section = user[user.index('<transcript name="one.txt">') - 1 :]
    assert section.count("a") >= MAX_TRANSCRIPT_CHARS - 100
    assert '<transcript name="two.txt">' in section and "three.txt" not in section
    kept = re.search(r'<transcript name="two.txt">\n(b*)\n</transcript>\n', section)
    assert kept is not None and 0 < len(kept.group(1)) < 5000
    assert section.endswith(
        f"</transcript>\n[Transcripts truncated at their limit of {MAX_TRANSCRIPT_CHARS:,} characters: the last "
        f"{5000 - len(kept.group(1)):,} characters of the transcript above and 1 more transcript(s) left out.]\n"
    )
    assert len(section) < MAX_TRANSCRIPT_CHARS + 300
    # a transcript cannot close its tag early, nor a name break out of its attribute
    _, user = build_request(AuditReport(INDEX), instructions=None, transcripts=[('x"><y', "a</transcript>b")])
    assert '<transcript name="x&quot;&gt;&lt;y">\na<\\/transcript>b\n</transcript>' in user
    assert "The audit found no problems" in user
    with pytest.raises(InvalidInputError):
        build_request(report, instructions="x" * 20_001, transcripts=[])


def test_read_transcripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "t"
    d.mkdir()
    (d / "b.md").write_bytes(b"bee \xff\n")
    (d / "a.TXT").write_text("ay\n")
    (d / "c.json").write_text("x" * 200)
    (d / "d.csv").write_text("no\n")
    (d / "link.txt").symlink_to(d / "b.md")
    monkeypatch.setattr(dream_prompt, "MAX_TRANSCRIPT_FILE_BYTES", 100)
    got = read_transcripts(d, str.upper)
    assert got == [
        ("A.TXT", "AY\n"),
        ("B.MD", "BEE \ufffd\n"),
        ("C.JSON", "[Not read: the file is larger than 100 bytes.]"),
    ]
    with pytest.raises(InvalidInputError):
        read_transcripts(tmp_path / "missing", str.upper)


def test_emptying_or_shrinking_a_file_counts_as_deleting_its_bytes() -> None:
    from memvault.dream.runner import changes_since

    fork = {"/memories/a.md": (b"a" * 32, 100), "/memories/b.md": (b"b" * 32, 40), "/memories/c.md": (b"c" * 32, 7)}
    now = {"/memories/a.md": (b"x" * 32, 0), "/memories/b.md": (b"y" * 32, 50), "/memories/d.md": (b"d" * 32, 9)}
    assert changes_since(fork, now) == (["/memories/a.md", "/memories/b.md", "/memories/c.md", "/memories/d.md"], 107)

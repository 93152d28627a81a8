"""The HTTP fake of the Messages API (:mod:`fake_messages_http`) against the real SDK, in-process and
from a subprocess that builds its client from ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.tools import BetaLocalFilesystemMemoryTool

from fake_messages_http import FakeMessagesServer

MODEL = "claude-sonnet-4-6"
NOTES_PATH = "/memories/notes.md"
NOTES_TEXT = "# Notes\n- Dana (order #4521): late parcel, refund offered\n- ünïcödé ✓\n"
FINAL_TEXT = "The case is logged in /memories/notes.md."
CREATED = f"File created successfully at: {NOTES_PATH}"  # the SDK tool's reply (spec/memory-tool.md)

SCRIPT: list[list[dict[str, Any]]] = [
    [
        {"type": "text", "text": "I'll note that down."},
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "memory",
            "input": {"command": "create", "path": NOTES_PATH, "file_text": NOTES_TEXT},
        },
    ],
    [{"type": "text", "text": FINAL_TEXT}],
]


def _final_text(message: Any) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_sdk_tool_runner_with_reference_memory_tool_over_http(tmp_path: Path, stream: bool) -> None:
    memory_root = tmp_path / "reference"
    with FakeMessagesServer(SCRIPT) as server:
        with anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0) as client:
            final = client.beta.messages.tool_runner(
                model=MODEL,
                max_tokens=1024,
                system="You keep careful notes.",
                messages=[{"role": "user", "content": "Log Dana's late parcel."}],
                tools=[BetaLocalFilesystemMemoryTool(str(memory_root))],
                stream=stream,
            ).until_done()
        assert server.connections_accepted == 1  # both requests on one keep-alive connection

    assert _final_text(final) == FINAL_TEXT
    assert server.errors == []
    assert server.exhausted
    assert server.request_targets == ["POST /v1/messages", "POST /v1/messages"]
    assert (memory_root / "memories" / "notes.md").read_bytes() == NOTES_TEXT.encode()

    first, second = server.requests
    assert first["system"] == "You keep careful notes."
    assert first["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert first["messages"] == [{"role": "user", "content": "Log Dana's late parcel."}]
    assert first.get("stream", False) is stream
    assert server.tool_results_of(1) == [{"type": "tool_result", "tool_use_id": "toolu_01", "content": CREATED}]
    assert second["thread"] == {"type": "continue", "previous_message_id": "msg_fake_000"}
    for headers in server.request_headers:
        assert headers["authorization"] == "Bearer test"
        assert "message-threads-2026-08-12" in headers["anthropic-beta"]


def _run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


# A client as the CLI builds it: everything from the environment, the SDK's default retry policy.
CLIENT_FROM_ENV = """
    import anthropic

    client = anthropic.Anthropic()
    message = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=256,
        system="Be brief.",
        messages=[{"role": "user", "content": "Say hello."}],
    )
    print(message.content[0].text)
"""


def test_subprocess_client_from_environment() -> None:
    with FakeMessagesServer([[{"type": "text", "text": "Hello from the fake!"}]]) as server:
        result = _run_python(CLIENT_FROM_ENV, server.env())

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello from the fake!\n"
    assert server.errors == []
    assert server.exhausted
    (request,) = server.requests
    assert request["system"] == "Be brief."
    assert request["messages"] == [{"role": "user", "content": "Say hello."}]
    assert server.request_headers[0]["authorization"] == "Bearer test"


def test_subprocess_fails_at_once_when_the_script_has_run_out() -> None:
    # The default client retries 5xx with backoff; the fake's 400 + x-should-retry: false is not retried.
    with FakeMessagesServer([]) as server:
        started = time.monotonic()
        result = _run_python(CLIENT_FROM_ENV, server.env())
        elapsed = time.monotonic() - started

    assert result.returncode != 0
    assert "BadRequestError" in result.stderr
    assert "the script has only 0 turn(s)" in result.stderr
    assert len(server.requests) == 1  # no retry
    assert len(server.errors) == 1 and "the script has only 0 turn(s)" in server.errors[0]
    assert elapsed < 30


def test_unexpected_requests_get_a_400_with_the_reason() -> None:
    with FakeMessagesServer([[{"type": "text", "text": "unused"}]]) as server:
        with httpx2.Client(base_url=server.base_url) as http:
            wrong_path = http.get("/v1/models")
            not_json = http.post("/v1/messages", content=b"{oops")
            incomplete = http.post("/v1/messages", json={"model": MODEL})
        with anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0) as client:
            client.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "a"}])
            with pytest.raises(anthropic.BadRequestError, match="the last reply was 'msg_fake_000'"):
                client.beta.messages.create(
                    model=MODEL,
                    max_tokens=16,
                    messages=[{"role": "user", "content": "b"}],
                    thread={"type": "continue", "previous_message_id": "msg_bogus"},
                    betas=["message-threads-2026-08-12"],
                )

    for response, reason in [
        (wrong_path, "no route for GET /v1/models"),
        (not_json, "request body is not JSON"),
        (incomplete, "missing required field 'max_tokens'"),
    ]:
        assert response.status_code == 400
        assert response.headers["x-should-retry"] == "false"
        assert int(response.headers["content-length"]) == len(response.content)
        error = response.json()
        assert error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
        assert reason in error["error"]["message"]
    assert len(server.errors) == 4
    assert len(server.replies) == 1


def test_stop_does_not_wait_for_an_idle_keep_alive_connection() -> None:
    server = FakeMessagesServer([[{"type": "text", "text": "hi"}]])
    with httpx2.Client() as http:
        with server:
            response = http.post(
                f"{server.base_url}/v1/messages",
                json={"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]},
            )
            assert response.status_code == 200
            assert response.json()["content"] == [{"type": "text", "text": "hi"}]
            started = time.monotonic()
        # the client still holds its pooled connection open here
        assert time.monotonic() - started < 5
    with pytest.raises(RuntimeError, match="not running"):
        server.base_url

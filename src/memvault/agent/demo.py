"""The embedded demo: the customer-service session from Anthropic's memory tool docs.

An operator seeds the store with guidelines; Claude (driven here by a fixed script instead of
the API) views its memory directory, reads the guidelines, records what it learned about a
customer and then corrects it. Each step goes through :class:`memvault.MemoryTool`, exactly as
the SDK's tool runner would call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..store import MemoryStore

__all__ = ["DemoStep", "GUIDELINES", "REFUND_POLICIES", "SCRIPT", "run_demo"]

GUIDELINES = """<guidelines>
<addressing_customers>
- Always address customers by their first name
- Use empathetic language
</addressing_customers>
<escalation>
- Escalate billing disputes over $500 to a supervisor
</escalation>
</guidelines>
"""

REFUND_POLICIES = """<refund_policies>
- Full refund within 30 days of purchase
- Store credit between 30 and 90 days
</refund_policies>
"""

#: What Claude does in the documented example, as memory tool inputs.
SCRIPT: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/customer_service_guidelines.xml"},
    {
        "command": "create",
        "path": "/memories/customers/acme_corp.md",
        "file_text": "# Acme Corp\n- Prefers phone follow-ups\n- Ticket 4821: late delivery, apologised\n",
    },
    {
        "command": "str_replace",
        "path": "/memories/customers/acme_corp.md",
        "old_str": "- Prefers phone follow-ups",
        "new_str": "- Prefers email follow-ups (corrected by the customer)",
    },
    {
        "command": "insert",
        "path": "/memories/customers/acme_corp.md",
        "insert_line": 1,
        "insert_text": "- Contact: first name basis, empathetic tone\n",
    },
    {"command": "view", "path": "/memories/customers/acme_corp.md"},
]


@dataclass(frozen=True)
class DemoStep:
    """One scripted tool call and what the tool answered."""

    input: dict[str, Any]
    output: str
    is_error: bool


def run_demo(store: MemoryStore, *, session: str = "demo-session") -> list[DemoStep]:
    """Seed the store as an operator, then run :data:`SCRIPT` through ``MemoryTool``."""
    from anthropic.lib.tools._beta_functions import ToolError

    from .tool import MemoryTool

    store.put_file("/memories/customer_service_guidelines.xml", GUIDELINES, actor="operator", session="setup")
    store.put_file("/memories/refund_policies.xml", REFUND_POLICIES, actor="operator", session="setup")
    tool = MemoryTool(store, actor="claude", session=session)
    steps = []
    for command in SCRIPT:
        try:
            result = tool.call(command)
            steps.append(DemoStep(command, result if isinstance(result, str) else "[content blocks]", False))
        except ToolError as err:
            steps.append(DemoStep(command, str(err), True))
    return steps

"""The memory_20250818 protocol: commands (the six commands with the documented strings)
and context (the context-editing request block that goes with the tool)."""

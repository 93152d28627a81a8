"""What agents talk to: tool (MemoryTool), remote (RemoteMemoryTool over a server), mcp
(the MCP server; mcphttp its HTTP guards), demo."""

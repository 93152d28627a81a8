"""Writing a store besides the memory tool: writes (preconditioned), batch (many writes, one commit),
files (an operator's put, edit, rm, mv), undo (revert, restore, rollback), templates (init --template)."""

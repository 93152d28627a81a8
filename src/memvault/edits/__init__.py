"""Writing a store besides the memory tool: writes (preconditioned), files (an operator's
put, edit, rm, mv), undo (revert, restore, rollback), templates (init --template)."""

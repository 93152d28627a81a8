"""Running a store: keys (key slots and master-key rotation), config (settings by key,
changed as commits), status (a store at a glance), audit (lint the memory around its index)."""

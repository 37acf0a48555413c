"""The data folder: its zero-LLM scan and listing, the path guard, groups of similar files and the
coverage ledger (what was read, how much, what was skipped and why)."""

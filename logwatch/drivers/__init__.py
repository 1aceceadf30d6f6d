"""The drivers that feed the engine: replay (finished files) and tail (live files)."""

"""Rules as data: the rule types and their parameters; the packs that name them live in the
repository's `rules/*.toml` (inside a wheel: `logwatch/rules/packs/`)."""

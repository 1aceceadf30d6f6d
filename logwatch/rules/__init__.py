"""Rules as data: the rule types, their parameters, and the packs (`packs/*.toml`) that name them."""

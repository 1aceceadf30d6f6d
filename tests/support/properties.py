"""How many examples the property (Hypothesis) tests run: two profiles, one knob.

- `dev` (the default): each property runs a quarter of its `deep` count (rounded, at least
  one), so the suite a developer runs at every change stays quick.
- `deep` (`HYPOTHESIS_PROFILE=deep`, or pytest's `--hypothesis-profile=deep`): every property
  runs its full count, the one written in its `@settings(max_examples=examples(N))`.

A test writes its deep count as `examples(N)`: an explicit `max_examples` overrides the profile,
so the count scales with the profile's `max_examples` (dev 25, deep 100, Hypothesis's own 100).
"""

from __future__ import annotations

import os

from hypothesis import settings

ENV = "HYPOTHESIS_PROFILE"
DEFAULT = "dev"
DEEP_MAX_EXAMPLES = 100
"""Hypothesis's own default `max_examples`: a profile with this many runs the full counts."""
PROFILES = {
    "dev": settings(max_examples=DEEP_MAX_EXAMPLES // 4),
    "deep": settings(max_examples=DEEP_MAX_EXAMPLES),
}


def register() -> None:
    """Make the profiles known to Hypothesis (also to `--hypothesis-profile`)."""
    for name, profile in PROFILES.items():
        settings.register_profile(name, profile)


def chosen() -> str:
    """The profile `HYPOTHESIS_PROFILE` names, `dev` when unset; ValueError for an unknown one."""
    name = os.environ.get(ENV, "").strip() or DEFAULT
    if name not in PROFILES:
        raise ValueError(
            f"{ENV}={name!r} is not a Hypothesis profile of this suite; "
            f"fix: set it to one of {', '.join(PROFILES)} (or unset it for {DEFAULT})"
        )
    return name


def examples(deep: int) -> int:
    """`max_examples` for a property whose full (deep) count is `deep`, scaled to the profile."""
    return max(1, round(deep * settings().max_examples / DEEP_MAX_EXAMPLES))

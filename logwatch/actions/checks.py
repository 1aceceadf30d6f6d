"""What `logwatch doctor` checks of each `[[action]]`: that its command can start here and that
the `{env:NAME}` variables it needs are set, so a missing `scancel` is found now, not at 2 a.m."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence

from logwatch.actions.spec import ActionSpec, placeholder_names
from logwatch.checks import Check


def action_checks(specs: Sequence[ActionSpec], env: Mapping[str, str]) -> list[Check]:
    """One check per action: its program found (unless a placeholder names it), then a warning
    per `{env:NAME}` not set in this environment."""
    checks = []
    for spec in specs:
        name = f"action {spec.name}"
        program = spec.run[0]
        if placeholder_names(program):
            checks.append(Check(name, True, f"{program!r}: filled in per alert, not checked"))
        else:
            found = shutil.which(program, path=env.get("PATH", os.defpath))
            if found is None:
                checks.append(
                    Check(
                        name,
                        False,
                        f"{program!r}: not found on PATH",
                        "install it, or give its full path as the first element of 'run'",
                    )
                )
            else:
                checks.append(Check(name, True, f"{program!r} is {found}"))
        needed = {
            n[4:]
            for element in spec.run
            for n in placeholder_names(element)
            if n.startswith("env:")
        }
        for variable in sorted(needed):
            if not env.get(variable):
                checks.append(
                    Check(
                        name,
                        False,
                        f"${variable} is not set here: the action is skipped while it is not",
                        f"run logwatch tail with {variable} in its environment",
                        required=False,
                    )
                )
    return checks

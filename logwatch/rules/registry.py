"""Every rule type a rule pack may name, each imported from the module that declares it when a
pack first names it: a replay of a one-rule pack loads no other rule type's module."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from logwatch.rules.base import RuleType
from logwatch.rules.params import Kind, Param

_MODULES = {
    "log": ("LOG_RULE_TYPES", ("match", "nonfinite", "stalled", "streak")),
    "gpu": ("GPU_RULE_TYPES", ("gpu-hold", "gpu-rise")),
    "classify": ("CLASSIFY_RULE_TYPES", ("classify",)),
    "anomaly": ("ANOMALY_RULE_TYPES", ("drop", "spike")),
    "scale": ("SCALE_RULE_TYPES", ("halving",)),
    "crash": ("CRASH_RULE_TYPES", ("crash",)),
}
"""Each rule-type module under `logwatch.rules`: the name of its table of types, and the type
names the table holds (`tests/rules/test_params.py` checks them against the tables)."""

_MODULE_OF = {name: module for module, (_, names) in _MODULES.items() for name in names}

if len(_MODULE_OF) != sum(len(names) for _, names in _MODULES.values()):
    raise RuntimeError("two rule-type modules declare the same type name")  # a programming error


class _RuleTypes(Mapping[str, RuleType]):
    """Rule types by name; a type's module imported when the type is first looked up."""

    def __getitem__(self, name: str) -> RuleType:
        module = _MODULE_OF[name]
        table, _ = _MODULES[module]
        types: Mapping[str, RuleType] = getattr(
            importlib.import_module(f"logwatch.rules.{module}"), table
        )
        return types[name]

    def __contains__(self, name: object) -> bool:
        return name in _MODULE_OF

    def __iter__(self) -> Iterator[str]:
        return iter(_MODULE_OF)

    def __len__(self) -> int:
        return len(_MODULE_OF)


RULE_TYPES: Mapping[str, RuleType] = _RuleTypes()
"""Rule types by the name packs give in `type = "..."`."""


def duration_params() -> dict[str, Param]:
    """The duration parameters of every rule type, by name."""
    return {
        param.name: param
        for rule_type in RULE_TYPES.values()
        for param in rule_type.params
        if param.kind is Kind.DURATION
    }

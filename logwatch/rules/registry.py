"""Every rule type a rule pack may name, assembled from the modules that declare them."""

from __future__ import annotations

from logwatch.rules.anomaly import ANOMALY_RULE_TYPES
from logwatch.rules.base import RuleType
from logwatch.rules.classify import CLASSIFY_RULE_TYPES
from logwatch.rules.crash import CRASH_RULE_TYPES
from logwatch.rules.gpu import GPU_RULE_TYPES
from logwatch.rules.log import LOG_RULE_TYPES
from logwatch.rules.params import Kind, Param
from logwatch.rules.scale import SCALE_RULE_TYPES

_MODULES = (
    LOG_RULE_TYPES,
    GPU_RULE_TYPES,
    CLASSIFY_RULE_TYPES,
    ANOMALY_RULE_TYPES,
    SCALE_RULE_TYPES,
    CRASH_RULE_TYPES,
)
RULE_TYPES: dict[str, RuleType] = {name: t for types in _MODULES for name, t in types.items()}
"""Rule types by the name packs give in `type = "..."`."""

if len(RULE_TYPES) != sum(len(types) for types in _MODULES):
    raise RuntimeError("two rule-type modules declare the same type name")  # a programming error


def duration_params() -> dict[str, Param]:
    """The duration parameters of every rule type, by name."""
    return {
        param.name: param
        for rule_type in RULE_TYPES.values()
        for param in rule_type.params
        if param.kind is Kind.DURATION
    }

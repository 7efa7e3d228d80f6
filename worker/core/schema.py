"""The feature schema of one partition: declared up front, or inferred from the records as they come.

Declared features fix names, order (for array input) and types. Without a declaration a name's type
is fixed by the first record that gives it a non-null value (numbers numeric, strings nominal) and the
length of array input by the first array. The inferred part is state: it is checkpointed, so a
replay takes the same decisions.

>>> schema = FeatureSchema((("age", "numeric"), ("plan", "nominal")))
>>> schema.conform([41.0, "pro"])
{'age': 41.0, 'plan': 'pro'}
>>> schema.conform({"age": "old"})
'bad_x'
"""

from __future__ import annotations

from typing import Any

from worker.core.values import Value

_TYPE_OF = {float: "numeric", str: "nominal"}
#: the default bound of an inferred schema (setting max_features)
MAX_FEATURES = 1000


class FeatureSchema:
    """Checks feature values against declared or inferred names and types.

    An inferred schema takes at most ``max_features`` names: a record that would add one more is
    refused (``unknown_feature``), as a name outside a declaration is. Each name costs every leaf of
    the model its split statistics, so records with ever-new keys would otherwise grow it without
    bound.
    """

    def __init__(self, declared: tuple[tuple[str, str], ...] = (), max_features: int = MAX_FEATURES) -> None:
        self.max_features = max_features
        self.declared = bool(declared)
        self.types: dict[str, str] = dict(declared)
        self.order: list[str] = [name for name, _ in declared]
        self.array_length: int | None = len(declared) if declared else None
        self._numeric = {name for name, kind in declared if kind == "numeric"}

    def conform(self, x: dict[str, Value] | list[Value]) -> dict[str, Value] | str:
        """``x`` as a dict of named values, or the dead-letter reason; learns new names when inferring."""
        if isinstance(x, list):
            if self.array_length is not None and len(x) != self.array_length:
                return "wrong_feature_count"
            names = self.order if self.declared else [f"x{i}" for i in range(len(x))]
            row = dict(zip(names, x, strict=True))
        else:
            row = x
        if row.keys() <= self._numeric and str not in set(map(type, row.values())):
            return row  # fast path: only known numeric names with numbers or nulls
        new: dict[str, str] = {}
        for name, value in row.items():
            if value is None:
                continue
            kind = _TYPE_OF[type(value)]
            known = self.types.get(name)
            if known is None:
                if self.declared or len(self.types) + len(new) >= self.max_features:
                    return "unknown_feature"
                new[name] = kind
            elif known != kind:
                return "bad_x"
        self.types.update(new)
        self._numeric.update(name for name, kind in new.items() if kind == "numeric")
        if isinstance(x, list) and self.array_length is None:
            self.array_length = len(x)
        return row

    def to_dict(self) -> dict[str, Any]:
        return {
            "declared": self.declared,
            "types": self.types,
            "order": self.order,
            "array_length": self.array_length,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], max_features: int) -> FeatureSchema:
        schema = cls(max_features=max_features)
        schema.declared = bool(data["declared"])
        schema.types = dict(data["types"])
        schema.order = list(data["order"])
        schema.array_length = data["array_length"]
        schema._numeric = {name for name, kind in schema.types.items() if kind == "numeric"}
        return schema

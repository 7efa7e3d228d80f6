"""The feature space: which features a model knows, of which kind, and how values become codes.

Every value becomes a small integer code (uint16), the unit of all statistics and routing:

- code 0: the value is missing (None, NaN, an absent key);
- numeric features, codes 1..B: B equal-width bins (paper, section 3.2) on a *grid* that grows with the
  data, per feature, from its first value on (never from 0, never pooled across features). The first value v
  is a range of width 0: v itself is bin 1, anything above it bin B. The first learned value x != v sets a
  grid of B bins of a power-of-two width (the smallest above |x - v| / B) about centred on v and x, from a
  multiple of that width. A learned value outside the grid doubles it towards the value (the old grid
  becomes one half of the new one) until the value is inside: every old bin then lies within one new bin
  (adjacent bins merge pairwise), so statistics gathered on the old grid carry over exactly (a `Regrid` says
  how; the model applies it at that record). A *far* value, more than `hold_far` - 1 (7) grid widths beyond
  the grid, is held instead: coded into the end bin on its side, the grid unchanged, until the far values
  held since the grid last grew make up 1/16 of the feature's values (a tail that keeps coming); that one
  grows it. So rare gross outliers do not crowd the ordinary values into a bin or two. Growing stops after a
  feature's first `warm_up` finite values (one far outlier later on cannot coarsen the grid); afterwards
  values outside it, and infinities always (before the first finite value too), are clipped into the end
  bins. Codes are available from the first value on: nothing waits for a range;
- nominal features, codes 1..K: categories in order of first appearance while learning; a category
  never learned gets `UNKNOWN` (prediction only). With `max_categories`, the categories after the
  first `max_categories` share one more code, "other" (its vocabulary key is None, which no value
  can be: None is missing), in learning and in prediction alike.

A feature is nominal when its first value is a string or its name is listed in `nominal`; it is
numeric otherwise (bools count as 0/1). Features are registered by the first learned record that
has a value for them; the new features of one record in a canonical order of their names (declared
`feature_names` first, in their order, then natural order: "x2" before "x10"), never in the order of
its keys. So the feature order, the codes and the ranges depend only on the learned records and their
order, not on how each record lists its keys: a model's predictions and bytes do not either.

>>> space = FeatureSpace(bins=4, warm_up=3)
>>> codes = space.encode_rows([{"a": 0.0, "c": "x"}, {"a": 3.0, "c": "y"}, {"a": 9.0}], learn=None)
>>> codes.tolist()
[[1, 1], [3, 2], [3, 0]]
>>> space.range_of(0)  # bins of width 2 on [-1, 7) (width 1 would not hold 3), then doubled upwards
(-1.0, 15.0)
>>> [(r.row, r.mapping.tolist()) for r in space.take_regrids()]
[(1, [0, 1, 1, 1, 1]), (2, [0, 1, 1, 2, 2])]
>>> space.encode_one({"a": 5.0, "c": "z"}, learn=False)
[2, 65535]
"""

from __future__ import annotations

import math
import numbers
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple, TypeAlias

import numpy as np

from sgt.grid import from_ordered, grown_grid, ordered
from sgt.serialization import NamedArray, SerializationError

__all__ = ["MISSING", "UNKNOWN", "FeatureName", "FeatureSpace", "Regrid", "feature_name"]

MISSING = 0
UNKNOWN = int(np.iinfo(np.uint16).max)
MAX_CATEGORIES = UNKNOWN - 1
CODE_DTYPE = np.uint16
_PLAIN_NUMBERS = frozenset({float, int, bool, type(None)})
_DENSE_NUMBERS = frozenset({float, int, bool})
_DIGITS = re.compile(r"([0-9]+)")

#: a feature's name: a string, or an integer as River's generators key their features (`feature_name`)
FeatureName: TypeAlias = str | int


@dataclass
class _Numeric:
    lo: float = math.nan
    hi: float = math.nan
    seen: int = 0
    far: int = 0  # far values held (clipped, not grown to) since the grid last grew (`FeatureSpace.hold_far`)


# a far value grows the grid once the far values held since its last growth, this one included, make up
# at least 1 / HOLD_SHARE of the feature's learned values (rare gross outliers never do; a heavy tail does)
HOLD_SHARE = 16
# a new space's `hold_far`: a value more than 7 grid widths beyond the grid is held, so a growth to a value
# not held widens the grid at most 8 times (the values so far keep at least 8 of 64 bins)
HOLD_FAR = 8


class Regrid(NamedTuple):
    """A numeric feature's grid grew at a learned record (see the module docstring).

    `mapping[c]` is the new code of old code c (0, missing, stays 0); it never decreases, and the old
    codes that map to one new code are adjacent. `code_before` is the record's own code on the old
    grid: what a prediction made before learning the record saw.
    """

    row: int
    feature: int
    mapping: np.ndarray
    code_before: int
    old_range: tuple[float, float]
    new_range: tuple[float, float]


class FeatureSpace:
    """Names, kinds, numeric ranges and nominal vocabularies, and the encoding of inputs to codes."""

    def __init__(
        self,
        bins: int,
        warm_up: int,
        nominal: Iterable[str] = (),
        feature_names: Sequence[str] | None = None,
        max_categories: int | None = None,
        hold_far: int = HOLD_FAR,
    ) -> None:
        self.bins = bins
        # 0: every learned value in the warm-up grows the grid to hold it (the rule before far values were
        # held, which saved models without it keep); F > 1: a value more than F - 1 grid widths beyond the
        # grid is held (`_grows`)
        self.hold_far = hold_far
        self.max_categories = MAX_CATEGORIES if max_categories is None else max_categories
        self.warm_up = warm_up
        self.nominal = frozenset(nominal)
        self.feature_names = list(feature_names) if feature_names is not None else None
        # a declared name's position (its first, should a name repeat), for `_order_key`
        self._declared = {name: c for c, name in reversed(list(enumerate(self.feature_names or ())))}
        self.names: list[FeatureName] = []
        self.index: dict[FeatureName, int] = {}
        self.numeric: list[_Numeric | None] = []
        self.vocab: list[dict[Any, int] | None] = []
        self.revision = 0  # bumped whenever a feature or category is added: the layout may change
        # grids grown by learned records, in record order, until the model takes them (take_regrids)
        self._regrids: list[Regrid] = []
        # the names of a sequence record's columns, as many as the widest record has had (`_items`):
        # formatted once, not once per value of every record
        self._column_names: tuple[str, ...] = ()

    # -- introspection -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.names)

    def is_nominal(self, j: int) -> bool:
        return self.vocab[j] is not None

    def categories(self, j: int) -> list[Any]:
        vocab = self.vocab[j]
        return list(vocab) if vocab is not None else []

    def kinds(self) -> dict[FeatureName, str]:
        """Feature name to "numeric" or "nominal", in registration order."""
        return {name: "nominal" if self.is_nominal(j) else "numeric" for j, name in enumerate(self.names)}

    def widths(self) -> tuple[int, ...]:
        """Columns of split statistics per feature: B + 1 for numeric, a capacity + 1 for nominal.

        Nominal capacities grow in powers of two so that a new category rarely changes the layout.
        """
        out = []
        for vocab in self.vocab:
            if vocab is None:
                out.append(self.bins + 1)
            else:
                out.append(1 << max(2, len(vocab)).bit_length())
        return tuple(out)

    def threshold_value(self, j: int, t: int) -> float:
        """The largest value that falls in bins 0..t (0-based) of numeric feature j.

        A split on bin t sends exactly the values x <= threshold_value(j, t) left: the largest double
        that the binning arithmetic puts in bins 0..t, which rounding can move far from the nominal edge
        lo + (t + 1) * width / B in ulps (an edge at 0 on [-0.5, 1): every x above -2^-54 bins right of
        it, 2^62 doubles away). Codes never decrease with the value, so the doubles between lo (bin 0)
        and the largest one, ordered as integers, are bisected: 64 steps at most.
        """
        state = self.numeric[j]
        assert state is not None
        code = t + 1
        largest = sys.float_info.max
        if state.lo != state.lo and code < self.bins:  # no range yet: all but +inf bin first (`_bin_one`)
            return largest
        if code >= self.bins or self._bin_one(state, largest) <= code:  # every value goes left (a
            return math.inf  # threshold a grown grid moved to its end, or a width past the float range)
        left, right = ordered(state.lo), ordered(largest)
        while right - left > 1:
            middle = (left + right) // 2
            if self._bin_one(state, from_ordered(middle)) <= code:
                left = middle
            else:
                right = middle
        return from_ordered(left)

    def range_of(self, j: int) -> tuple[float, float] | None:
        state = self.numeric[j]
        if state is None or state.seen == 0:
            return None
        return (state.lo, state.hi)

    def take_regrids(self) -> list[Regrid]:
        """The grid changes since the last call, in record order (rows: of the last encoded batch)."""
        regrids, self._regrids = self._regrids, []
        return regrids

    def freeze_ranges(self) -> None:
        """Stop every numeric grid that has seen a value from growing (ranges known in advance)."""
        for state in self.numeric:
            if state is not None and state.seen:
                state.seen = max(state.seen, self.warm_up)

    def adopt_legacy_ranges(self) -> None:
        """Turn ranges written before grids grew (a plain min and max) into grids, where still warming up.

        A range then still collecting values coded them as missing, so no statistics depend on its
        bins: it becomes the grid that the first two values would give, grown to hold min and max.
        A frozen range stays as it is and keeps binning exactly as before.
        """
        for state in self.numeric:
            if state is None or not 0 < state.seen < self.warm_up or state.lo == state.hi:
                continue
            grid = grown_grid(state.lo, state.lo, state.hi, self.bins)
            if grid is not None:
                state.lo, state.hi, _ = grid

    def snapshot(self) -> tuple[Any, ...]:
        """Everything encoding may change, to undo a batch that turned out to hold a bad record."""
        return (
            self.revision,
            list(self.names),
            dict(self.index),
            [None if s is None else _Numeric(s.lo, s.hi, s.seen, s.far) for s in self.numeric],
            [None if v is None else dict(v) for v in self.vocab],
        )

    def restore(self, snapshot: tuple[Any, ...]) -> None:
        self.revision, self.names, self.index, self.numeric, self.vocab = snapshot
        self._regrids = []

    # -- saving --------------------------------------------------------------------------------
    def saved(self) -> tuple[dict[str, Any], NamedArray]:
        """The space's state for sgt's format: names, values seen and vocabularies, and the ranges.

        The ranges are one [features, 2] array of (lo, hi), NaN for a nominal feature. A space that holds
        far values (`hold_far`) also writes "hold_far" and each numeric feature's held count ("far"); a
        saved state without them restores the rule before far values were held.
        """
        ranges = [[s.lo, s.hi] if s is not None else [np.nan, np.nan] for s in self.numeric]
        state: dict[str, Any] = {
            "names": self.names,
            "seen": [s.seen if s is not None else None for s in self.numeric],
            "vocab": [list(v) if v is not None else None for v in self.vocab],
        }
        if self.hold_far:
            state["hold_far"] = self.hold_far
            state["far"] = [s.far if s is not None else None for s in self.numeric]
        return state, ("space.ranges", np.array(ranges).reshape(-1, 2))

    def load_saved(self, state: dict[str, Any], ranges: np.ndarray, version: int) -> None:
        """Take in what `saved` wrote (into a space that knows no feature yet).

        Formats before 3 froze each range after its warm-up instead of growing a grid.
        """
        names, seen, vocab = state["names"], state["seen"], state["vocab"]
        self.hold_far = int(state.get("hold_far", 0))
        far = state.get("far", [0] * len(names))
        if not (len(names) == len(seen) == len(vocab) == len(far) == ranges.shape[0]):
            raise SerializationError("feature space arrays disagree in length")
        for j, name in enumerate(names):
            self.index[name] = j
            self.names.append(name)
            if vocab[j] is None:
                lo, hi = float(ranges[j, 0]), float(ranges[j, 1])
                self.numeric.append(_Numeric(lo, hi, int(seen[j]), int(far[j])))
                self.vocab.append(None)
            else:
                self.numeric.append(None)
                self.vocab.append({value: code for code, value in enumerate(vocab[j], start=1)})
        if version < 3:
            self.adopt_legacy_ranges()

    # -- encoding ------------------------------------------------------------------------------
    def encode_one(self, x: Mapping[str, Any] | Sequence[Any] | np.ndarray, learn: bool) -> list[int]:
        """Codes of one record; registers features, categories and range values when `learn`.

        Every value is checked before anything is registered, so a bad record changes nothing.
        Plain Python on purpose (a list, no numpy): for one record, numpy's per-call overhead would
        dominate. The arithmetic is exactly that of the vectorised `encode_rows`.
        """
        items = list(x.items()) if isinstance(x, dict) else list(self._items(x))
        index, vocab, numeric = self.index, self.vocab, self.numeric
        if learn:
            fresh: list[tuple[Any, Any]] = []  # the record's new features, registered once all are checked
            for name, value in items:
                kind = type(value)
                j = index.get(name)
                if j is None:
                    if not _is_missing(value):
                        if kind is not float and kind is not int and kind is not str:
                            self._check(name, value)  # (plain numbers and strings always register)
                        fresh.append((name, value))
                elif kind is float or kind is int:
                    if vocab[j] is not None and value == value:  # NaN is missing
                        self._category_check(name, value)
                elif kind is str:
                    if vocab[j] is None:
                        _number(name, value)
                elif value is not None:
                    self._check(name, value)
            if fresh:
                self._register_all(fresh)
        codes = [MISSING] * len(self.names)
        warm_up, bins, last = self.warm_up, self.bins, self.bins - 1
        for name, value in items:
            j = index.get(name)
            if j is None:  # unknown, or known only from this record's missing values
                continue
            if vocab[j] is not None:
                codes[j] = self._category_code(j, name, value, learn)
                continue
            kind = type(value)
            number = float(value) if kind is float or kind is int else _number(name, value)
            if number != number:  # NaN: missing
                continue
            state = numeric[j]
            assert state is not None  # a feature without a vocabulary is numeric
            if learn and state.seen < warm_up and -math.inf < number < math.inf:
                number += 0.0  # -0.0 becomes 0.0, as in the vectorised path: grids never hold -0.0
                inside = state.lo <= number < state.hi or number == state.lo == state.hi
                if state.seen == 0:
                    state.lo = state.hi = number
                elif not inside and self._grows(state, number, state.seen):
                    self._grow(j, state, number, 0)
                state.seen += 1
            lo = state.lo  # `_bin_one`, inlined: this is the hot loop of learn_one
            width = state.hi - lo
            if width == 0.0:
                codes[j] = 1 if number <= lo else bins
            elif lo != lo:  # no range yet: see `_bin_one`
                codes[j] = bins if number == math.inf else 1
            else:
                z = (number - lo) / width * bins
                codes[j] = 1 if not z >= 0.0 else bins if z >= last else 1 + int(z)  # nan: bin 1
        return codes

    def settled(self, items: Iterable[tuple[Any, Any]]) -> bool:
        """Whether learning a record of these (name, value) items would give the codes predicting it
        gives and change nothing in the space: every name a plain string or int (True would find
        feature 1) of a known feature; a numeric one's value a plain float or int (what `encode_one`
        takes without a check), its grid past its warm-up (no longer growing); a nominal one's value a
        string among its categories (no new one to register). A model may then learn the codes it
        predicted the record with."""
        index, numeric, vocab, warm_up = self.index, self.numeric, self.vocab, self.warm_up
        for name, value in items:
            named = type(name)
            j = index.get(name) if named is str or named is int else None
            if j is None:
                return False
            kind = type(value)
            categories = vocab[j]
            if categories is not None:
                if kind is not str or value not in categories:
                    return False
                continue
            state = numeric[j]
            if state is None or state.seen < warm_up or (kind is not float and kind is not int):
                return False
        return True

    def encode_rows(self, rows: Sequence[Any], learn: np.ndarray | None) -> np.ndarray:
        """Codes of many records (dicts or sequences); `learn[i]` says whether row i is learned.

        Row by row for names, kinds and categories; vectorised per numeric feature for ranges and
        bins, with exactly the arithmetic of `encode_one`.
        """
        n = len(rows)
        learn_mask = np.ones(n, dtype=bool) if learn is None else np.asarray(learn, dtype=bool)
        columnar = self._encode_columns(rows, learn_mask)
        if columnar is not None:
            return columnar
        numeric: dict[int, np.ndarray] = {}
        nominal: list[tuple[int, int, int]] = []
        for i, x in enumerate(rows):
            learned = bool(learn_mask[i])
            items = list(self._items(x))
            if learned:
                self._register_new(items)
            for name, value in items:
                j = self.index.get(name, -1)
                if j < 0:
                    continue
                if self.vocab[j] is not None:
                    nominal.append((i, j, self._category_code(j, name, value, learned)))
                else:
                    column = numeric.get(j)
                    if column is None:
                        column = numeric[j] = np.full(n, np.nan)
                    column[i] = _number(name, value)
        codes = np.zeros((n, len(self.names)), dtype=CODE_DTYPE)
        for i, j, code in nominal:
            codes[i, j] = code
        for j, column in numeric.items():
            codes[:, j] = self._code_column(j, column, learn_mask)
        return codes

    def _encode_columns(self, rows: Sequence[Any], learn: np.ndarray) -> np.ndarray | None:
        """Fast path for dict records whose keys are all known features: one pass per column.

        Returns None (use the row-by-row path, which also gives the precise error) when a record is
        not a dict, brings a new feature, or holds a value a numeric column cannot take as is.
        """
        keys: set[Any] = set()
        for x in rows:
            if type(x) is not dict:
                return None
            keys.update(x)
        if not keys <= self.index.keys():
            return None
        codes = np.zeros((len(rows), len(self.names)), dtype=CODE_DTYPE)
        dense = self._dense_columns(rows, keys)
        if dense is not None:
            for k, name in enumerate(keys):  # the same columns in the same order as the loop below
                j = self.index[name]
                codes[:, j] = self._code_column(j, dense[:, k], learn)
            return codes
        columns = {name: [x.get(name) for x in rows] for name in keys}
        for name, values in columns.items():  # (all checked before any is coded: coding grows the grids)
            if self.vocab[self.index[name]] is None:
                kinds = set(map(type, values))
                if not kinds <= _PLAIN_NUMBERS:
                    return None  # anything else (numpy scalars, arrays, strings): the row-by-row path decides
                if type(None) in kinds:
                    columns[name] = [math.nan if v is None else v for v in values]
        for name, values in columns.items():
            j = self.index[name]
            if self.vocab[j] is not None:
                learned = learn.tolist()
                codes[:, j] = [self._category_code(j, name, v, learned[i]) for i, v in enumerate(values)]
                continue
            codes[:, j] = self._code_column(j, np.array(values, dtype=np.float64), learn)
        return codes

    def _dense_columns(self, rows: Sequence[dict[Any, Any]], keys: set[Any]) -> np.ndarray | None:
        """The rows as a float array, one column per name of `keys` (in its iteration order), when every
        row holds every one of them as a plain number (no None) and all are numeric features; else None.

        Each record is read once, in C (itemgetter, chain, fromiter), instead of once per column.
        A plain number converts to the same double either way, so the codes are the same.
        """
        width = len(keys)
        if width < 2 or sum(map(len, rows)) != width * len(rows):
            return None  # a row lacks a key (all keys are known, so equal lengths mean equal key sets)
        if any(self.vocab[self.index[name]] is not None for name in keys):
            return None
        values = np.fromiter(
            chain.from_iterable(map(itemgetter(*keys), rows)), dtype=object, count=width * len(rows)
        )
        if not set(map(type, values)) <= _DENSE_NUMBERS:
            return None
        return values.astype(np.float64).reshape(len(rows), width)

    def encode_array(self, X: np.ndarray, learn: np.ndarray | None) -> np.ndarray:
        """Codes of a 2-D numeric array whose columns are features x0, x1, ... (or feature_names)."""
        n, width = X.shape
        if n == 0:
            return np.zeros((0, len(self.names)), dtype=CODE_DTYPE)
        learn_mask = np.ones(n, dtype=bool) if learn is None else np.asarray(learn, dtype=bool)
        values = np.asarray(X, dtype=np.float64)
        # new columns register in the order a row-by-row pass would register them
        present = learn_mask[:, None] & ~np.isnan(values)
        first_row = np.where(present.any(axis=0), present.argmax(axis=0), n)
        for c in sorted(range(width), key=lambda c: (first_row[c], self._order_key(self._column_name(c)))):
            name = self._column_name(c)
            if name not in self.index and first_row[c] < n:
                self._register(name, values[first_row[c], c])
        columns = [self.index.get(self._column_name(c), -1) for c in range(width)]
        if any(j >= 0 and self.vocab[j] is not None for j in columns):
            rows = [dict(zip(map(self._column_name, range(width)), row)) for row in values.tolist()]
            return self.encode_rows(rows, learn_mask)
        codes = np.zeros((n, len(self.names)), dtype=CODE_DTYPE)
        for c, j in enumerate(columns):
            if j >= 0:
                codes[:, j] = self._code_column(j, values[:, c], learn_mask)
        return codes

    # -- internals -----------------------------------------------------------------------------
    def _column_name(self, c: int) -> str:
        if self.feature_names is not None and c < len(self.feature_names):
            return self.feature_names[c]
        return f"x{c}"

    def _items(self, x: Any) -> Iterable[tuple[str, Any]]:
        if isinstance(x, Mapping):
            return x.items()
        if isinstance(x, (str, bytes)) or not isinstance(x, (Sequence, np.ndarray)):
            raise TypeError(f"a record must be a dict or a sequence of values, got {type(x).__name__}")
        values = x.tolist() if isinstance(x, np.ndarray) else x
        if len(values) > len(self._column_names):
            self._column_names = tuple(map(self._column_name, range(len(values))))
        return zip(self._column_names, values)  # (as long as the record: zip stops at the shorter)

    def _check(self, name: Any, value: Any) -> None:
        """Raise the ValueError that encoding `value` for feature `name` would raise."""
        if _is_missing(value):
            return
        j = self.index.get(name, -1)
        if j < 0:
            feature_name(name)
            if name in self.nominal or isinstance(value, str):
                _category_key(name, value)
            else:
                _number(name, value)
        elif self.vocab[j] is None:
            _number(name, value)
        else:
            self._category_check(name, value)

    def _category_check(self, name: FeatureName, value: Any) -> Any:
        """The dictionary key of a category value; numbers only for features declared nominal."""
        key = _category_key(name, value)
        if not isinstance(key, str) and name not in self.nominal:
            raise ValueError(
                f"feature {name!r} is nominal (its first value was a string); got the number {value!r}. "
                "List it in nominal= to allow numbers as categories."
            )
        return key

    def _register_new(self, items: Iterable[tuple[Any, Any]]) -> None:
        """Register the features of a learned record's items that are new and not missing."""
        fresh = [(name, value) for name, value in items if name not in self.index and not _is_missing(value)]
        if fresh:
            self._register_all(fresh)

    def _register_all(self, fresh: Sequence[tuple[Any, Any]]) -> None:
        """Register a record's new features (names, first values) in the canonical order.

        A feature's index (its column in every statistic) then depends on the record that brings it
        and on the names that record brings, never on the order of the record's keys: split ties, the
        sums of the linear leaves and the saved bytes all follow feature indexes. Every name is checked
        before any registers (`feature_name`), so a record with a bad one changes nothing.
        """
        named = [(feature_name(name), value) for name, value in fresh]
        for name, value in sorted(named, key=lambda item: self._order_key(item[0])):
            self._register(name, value)

    def _order_key(self, name: FeatureName) -> tuple[int, Any]:
        """Where a new feature goes among those of its record: the declared `feature_names` first, in
        their order; then every other string in natural order (digit runs compare as numbers: x2 before
        x10), ties (x01, x1) in code point order. So an array's columns, named x0, x1, ... or by
        `feature_names`, register in their positions' order, as dicts with the same names do. Integer
        names (River's generators key features by integers) come last, in numeric order."""
        if isinstance(name, str):
            position = self._declared.get(name)
            return (1, _natural_key(name)) if position is None else (0, position)
        return (2, name)

    def _register(self, name: FeatureName, value: Any) -> int:
        nominal = name in self.nominal or isinstance(value, str)
        if not nominal:
            _number(name, value)  # reject unsupported types before registering
        self.revision += 1
        self.index[name] = len(self.names)
        self.names.append(name)
        self.numeric.append(None if nominal else _Numeric())
        self.vocab.append({} if nominal else None)
        return len(self.names) - 1

    def _grow(self, j: int, state: _Numeric, x: float, row: int) -> None:
        """Grow feature j's grid to hold the learned finite value x (no change where it cannot)."""
        grown = grown_grid(state.lo, state.hi, x, self.bins)
        if grown is None:
            return
        code_before = self._bin_one(state, x)
        old = (state.lo, state.hi)
        state.lo, state.hi, mapping = grown
        state.far = 0
        self._regrids.append(Regrid(row, j, mapping, code_before, old, (state.lo, state.hi)))

    def _grows(self, state: _Numeric, x: float, seen: int) -> bool:
        """Whether the learned finite value x, outside the feature's grid, grows it (`seen`: the feature's
        finite learned values before x).

        Without `hold_far`, always. With it, a value more than `hold_far` - 1 grid widths beyond the grid
        (it would widen the grid at least `hold_far` times, crowding the values so far into a few bins)
        is held instead: coded into the end bin on its side, and counted, until the far values held
        since the grid last grew, this one included, make up 1 / HOLD_SHARE of the values so far; that
        one grows the grid. So rare gross outliers leave the grid to the ordinary values, and a tail
        that keeps coming gets its bins. The first grid (from a single value) always grows.
        """
        span = state.hi - state.lo
        if not self.hold_far or span == 0.0:
            return True
        beyond = state.lo - x if x < state.lo else x - state.hi
        if not beyond > (self.hold_far - 1) * span:
            return True
        if (state.far + 1) * HOLD_SHARE >= seen + 1:
            return True
        state.far += 1
        return False

    def _bin_one(self, state: _Numeric, x: float) -> int:
        """The code of value x of a numeric feature (`encode_one` inlines the same arithmetic).

        Before the feature's first finite learned value there is no range (lo and hi are NaN): an
        infinity goes to the end bin of its sign, as on every range, so that its code stays right when
        the first finite value v makes the range [v, v] (-inf <= v is bin 1, +inf > v bin B); a finite
        value (met in prediction only: learning one starts the range) takes the first bin.
        """
        width = state.hi - state.lo
        if width == 0.0:
            return 1 if x <= state.lo else self.bins
        if state.lo != state.lo:
            return self.bins if x == math.inf else 1
        z = (x - state.lo) / width * self.bins
        if not z >= 0.0:  # below the range, or nan when hi - lo overflowed: the first bin, as in batches
            return 1
        if z >= self.bins - 1:
            return self.bins
        return 1 + int(z)

    def _code_column(self, j: int, column: np.ndarray, learn: np.ndarray) -> np.ndarray:
        """`encode_one`'s numeric coding, vectorised over a batch for one feature (same arithmetic).

        The learned values that may still grow the grid are scanned for the next one outside it; the
        rows before it are binned on the grid in force, the grid grows, and the scan goes on.
        """
        state = self.numeric[j]
        assert state is not None
        if state.seen >= self.warm_up:
            return self._bin_column(state, column)
        taken = np.flatnonzero(learn & np.isfinite(column))[: self.warm_up - state.seen]
        values = column[taken] + 0.0  # -0.0 becomes 0.0, as in encode_one: grids never hold -0.0
        codes = np.empty(column.shape, dtype=CODE_DTYPE)
        start, k, seen = 0, 0, state.seen  # value k of `values` is the feature's learned value seen + k
        if taken.size and state.seen == 0:  # the first finite value: rows before it have no range yet
            start = int(taken[0])
            codes[:start] = self._bin_column(state, column[:start])
            state.lo = state.hi = float(values[0])
        state.seen += int(taken.size)
        while k < values.size:
            rest = values[k:]
            # a single value so far: any other one grows it; a grid: values outside [lo, hi)
            outside = rest != state.lo if state.lo == state.hi else (rest < state.lo) | (rest >= state.hi)
            hits = np.flatnonzero(outside)
            if not hits.size:
                break
            k += int(hits[0])
            row = int(taken[k])
            if self._grows(state, float(values[k]), seen + k):
                codes[start:row] = self._bin_column(state, column[start:row])
                self._grow(j, state, float(values[k]), row)
                start = row
            k += 1  # (a held value leaves the grid as it is: the scan goes on from the next one)
        codes[start:] = self._bin_column(state, column[start:])
        return codes

    def _bin_column(self, state: _Numeric, column: np.ndarray) -> np.ndarray:
        width = state.hi - state.lo
        with np.errstate(invalid="ignore", over="ignore"):
            if width == 0.0:
                codes = np.where(column <= state.lo, 1, self.bins)
            elif state.lo != state.lo:  # no range yet: see `_bin_one`
                codes = np.where(column == np.inf, self.bins, 1)
            else:
                z = (column - state.lo) / width * self.bins
                # what nan_to_num(z, nan=0.0) did, in one pass: ±inf need no mapping, as clip sends
                # them to the end bins exactly as it sent the float extremes they were mapped to
                z[np.isnan(z)] = 0.0
                codes = 1 + np.clip(np.floor(z), 0, self.bins - 1)
        codes = codes.astype(CODE_DTYPE)
        codes[np.isnan(column)] = MISSING
        return codes

    def _category_code(self, j: int, name: FeatureName, value: Any, learn: bool) -> int:
        if _is_missing(value):
            return MISSING
        key = self._category_check(name, value)
        vocab = self.vocab[j]
        assert vocab is not None
        code = vocab.get(key)
        if code is not None:
            return code
        if len(vocab) >= self.max_categories:  # full: "other" (None), created when first learned
            other = vocab.get(None)
            if other is None and learn and self.max_categories < MAX_CATEGORIES:
                vocab[None] = other = len(vocab) + 1
                self.revision += 1
            if other is not None:
                return other
            if learn:
                raise ValueError(f"feature {name!r}: more than {MAX_CATEGORIES} categories")
            return UNKNOWN
        if not learn:
            return UNKNOWN
        vocab[key] = code = len(vocab) + 1
        self.revision += 1
        return code


def _natural_key(name: str) -> tuple[tuple[Any, ...], str]:
    """A total order on names that compares runs of digits as numbers ("b2" < "b10").

    Split into alternating text and digit runs (text first, so the parts at one position are always
    of one kind); a digit run compares by its length without leading zeros, then its digits (no int
    conversion, so no limit on its length); the name itself breaks the remaining ties ("x01", "x1").
    """
    parts = _DIGITS.split(name)
    key = tuple(
        part if k % 2 == 0 else (len(part.lstrip("0")), part.lstrip("0")) for k, part in enumerate(parts)
    )
    return key, name


def feature_name(name: Any) -> FeatureName:
    """`name` as a feature's name: a string, or an integer (River's generators key their features by
    integers; a numpy integer becomes the Python int it equals, as a dict lookup already treats it).
    Anything else is refused before a model takes it, since a saved model could not hold it (its
    header is JSON) or would restore it as another name (a float, None, a bool, a tuple).

    >>> feature_name("age"), feature_name(np.int64(3))
    ('age', 3)
    >>> feature_name(2.5)
    Traceback (most recent call last):
    ...
    TypeError: feature names must be strings or integers, got 2.5 (float)
    """
    if isinstance(name, str):
        return name
    if isinstance(name, numbers.Integral) and not isinstance(name, (bool, np.bool_)):
        return int(name)
    raise TypeError(f"feature names must be strings or integers, got {name!r} ({type(name).__name__})")


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def _category_key(name: FeatureName, value: Any) -> Any:
    if not isinstance(value, (str, int, float, bool, np.generic)):
        raise ValueError(f"feature {name!r}: unsupported value {value!r} of type {type(value).__name__}")
    return value.item() if isinstance(value, np.generic) else value


def _number(name: FeatureName, value: Any) -> float:
    """The value of a numeric feature as a float (NaN when missing), or a clear ValueError."""
    if value is None:
        return math.nan
    if isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
        return float(value)
    raise ValueError(
        f"feature {name!r} is numeric; got {value!r} of type {type(value).__name__} "
        "(numbers, bools and None are allowed; list it in nominal= to treat it as categories)"
    )

"""Compiled kernels of sgt's learning steps: its numpy results, bit for bit, in a fraction of the time.

A split attempt's arrays are small (10 features x 65 bins), and a batch pass of sgt.leafwise takes a
few dozen rows, so numpy's fixed cost per call is most of their time. Their steps run as loops
compiled by numba instead, one module of this package for each kind of step (this module re-exports
them all, so callers name them ``kernels.numeric_search``). Three steps of the attempt:

- the numeric split search (`numeric_search`, then `winner_outputs` for each output's winner variance
  and steps, by split_search.numeric_winner; sgt.kernels.split_search): about 13 us against
  sgt.split.best_numeric_planes' 80 us (10 features, 64 bins), reading the slot's statistics where
  they lie instead of gathering them into planes;
- the merge of a leaf's pending block into its statistics (`merge_block`, sgt.kernels.leaf_steps),
  which LeafLearner._merge_pending does with sgt.stats' block_stats and merge (`merge_total`: into the
  total alone, for a leaf that gathers no split statistics), and a numeric feature's
  bins carried to its grown grid (`regrid_bins`, Tree.regrid's merges);
- a linear leaf's Newton step on its block (`linear_newton`, sgt.kernels.leaf_steps),
  LinearTermSteps._newton_linear's sums and solve.

A leaf of a one-output tree with numeric features only (no linear gate, no feature subspaces, not
adaptive) takes the three in one call, `evaluate_leaf` (sgt.kernels.leaf_evaluation), with the null
candidate and the winner's variance (LeafLearner._evaluate_compiled): a boosted member's attempt,
most of its learning time, pays one call's fixed cost instead of four and their Python around them.
A constant leaf there at the depth bound merges its block into its total and takes its null candidate
in one call too (`evaluate_bound`, LeafLearner._evaluate_bound).

A multi-output tree (a multiclass ensemble's member) runs them too: the search sums its outputs' loss
changes, the merge takes every output in one pass over the block, and `linear_steps` steps and applies
each output's linear term. And the steps of a batch:

- which rows a leafwise pass takes, and its events (`plan_pass`, leafwise._take's ranking); after an
  event, the node's later rows (`node_rows_after`) and the earliest row where their next event may
  fall (`next_event`, leafwise._horizon), both in one call after a leaf's attempt that did not split it
  (`leaf_rows_after`); both at once with the rows' predictions for a one-output
  tree that is not adaptive (`take_pass`, leafwise._take_compiled): sgt.kernels.passes;
- a linear tree's raw scores (`predict_linear`, Tree.predict_rows and
  MultiOutputTree.predict_outputs), appending the taken rows to their leaves' pending blocks
  (`append_rows`, Tree.append; `append_taken` reads the rows' codes where they lie) and routing rows
  through a tree without nominal branches (`route_numeric`, Tree.route): sgt.kernels.tree_rows;
- a binary member's gradients around numpy's exp, which stays numpy's (`member_binary_exponents`,
  `member_binary_gradients`): sgt.kernels.gradients;
- online bagging's Poisson weights (`poisson_weights`, sgt.boosted.bagging): sgt.kernels.poisson;
- a regressor's rows served in order, its residual levels and its tree choice updated row by row
  (`served_rows`, through sgt.level_rows): sgt.kernels.levels; a regressor's trend offsets, row by
  row (`trend_rows`, sgt.trend.TrendOffset.shift): sgt.kernels.trend_rows.

Every floating-point operation is the numpy code's, on the same operands, in the same order:

- sums over a feature's bins follow numpy's pairwise summation (sgt.kernels.summation), the order in
  which `ndarray.sum` adds a contiguous row;
- cumulative sums run bin after bin, as `np.cumsum` does;
- each product, quotient and difference is rounded once: numba, as numpy, contracts no ``a * b + c``
  into a fused multiply-add (its ``fastmath`` is off);
- an exp is numpy's own (numpy's SIMD exp need not round as the libm a kernel would call): the kernels
  compute its arguments and go on from its results, one np.exp between them.
- a division by zero gives IEEE 754's inf or NaN, as numpy's does (numba's error model "numpy",
  sgt.kernels.compiling), never a ZeroDivisionError: a linear leaf's elimination meets an exactly
  zero pivot on collinear inputs (tests/sgt/test_kernels_pivot.py).

So a model learns the same bits with the kernels or without, and a model saved by either restores in
the other byte for byte (tests/sgt/test_kernels.py compares them on random statistics, and whole
models with and without them).

The kernels run compiled when numba is installed (the ``fast`` extra: ``pip install 'sgt-stream[fast]'``),
unless the environment sets ``SGT_KERNELS=0`` when sgt is imported; `ENABLED` tells whether sgt uses
them. Without numba they are plain Python functions, correct but slow, which sgt does not call (it
takes the numpy code), but for the Mondrian forest's walk (sgt.kernels.mondrian), which it runs as
Python then; sgt itself needs only numpy and scipy. How they are compiled and cached:
sgt.kernels.compiling.

>>> import numpy as np
>>> from sgt.stats import block_stats
>>> codes = np.array([1, 1, 2, 2, 2, 3, 3, 4, 4, 4])  # one feature, bins 1..4 (column 0: missing)
>>> # one output's statistics: [columns, 1, 6]
>>> g = np.array([-1.2, -0.8, -1.1, -0.9, -1.0, 0.9, 1.1, 1.3, 0.7, 1.0])
>>> stats = block_stats(codes, g, np.ones(10), 5)
>>> best, feature, threshold = numeric_search(stats[:, None], np.arange(5)[None], 0.1, 1.0, 10.0)
>>> round(best, 10), feature, threshold
(-0.2958677686, 0, 1)
"""

from __future__ import annotations

import os

from sgt.kernels.compiling import numba
from sgt.kernels.gradients import (
    member_binary_exponents,
    member_binary_gradients,
)
from sgt.kernels.leaf_evaluation import evaluate_bound, evaluate_leaf
from sgt.kernels.leaf_steps import linear_newton, linear_steps, merge_block, merge_total, regrid_bins
from sgt.kernels.levels import MEANS, NO_MEANS, NOT_YET, served_rows
from sgt.kernels.passes import leaf_rows_after, next_event, node_rows_after, plan_pass, take_pass
from sgt.kernels.poisson import poisson_weights
from sgt.kernels.split_search import WINNER_SIZE, numeric_search, winner_outputs
from sgt.kernels.tree_rows import append_rows, append_taken, predict_linear, route_numeric
from sgt.kernels.trend_rows import trend_rows

__all__ = [
    "ENABLED",
    "MEANS",
    "NOT_YET",
    "NO_MEANS",
    "WINNER_SIZE",
    "append_rows",
    "append_taken",
    "evaluate_bound",
    "evaluate_leaf",
    "leaf_rows_after",
    "linear_newton",
    "linear_steps",
    "member_binary_exponents",
    "member_binary_gradients",
    "merge_block",
    "merge_total",
    "next_event",
    "node_rows_after",
    "numeric_search",
    "plan_pass",
    "poisson_weights",
    "predict_linear",
    "regrid_bins",
    "route_numeric",
    "served_rows",
    "take_pass",
    "trend_rows",
    "winner_outputs",
]

#: Whether sgt runs these kernels (numba importable, SGT_KERNELS not "0"). Read here, where every
#: caller looks (``kernels.ENABLED``), so one assignment switches them all (the tests' switch).
ENABLED = numba is not None and os.environ.get("SGT_KERNELS", "1") != "0"

"""sgt.softmax: the two-class gradients' shortcut against the general softmax, bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sgt.softmax import binary_gradients, softmax_with_reference
from tests.sgt.sgt_testkit import bits

SCORES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-40.0, 40.0),
    st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 709.0, -745.0, 1e308]),
)


@given(scores=st.lists(SCORES, min_size=0, max_size=40), seed=st.integers(0, 2**32 - 1))
def test_binary_gradients_are_the_general_softmaxs_bits(scores, seed) -> None:
    """Catches the two-class shortcut a boosted member's gradients take drifting from the softmax over
    (0, u) by one bit anywhere (p as 1 / (1 + exp(-u)), or as e1 / e0 + e1 with its own max, a NaN
    or an infinity handled otherwise), which would make models differ from those saved before it."""
    u = np.array(scores, dtype=np.float64)
    targets = np.random.default_rng(seed).integers(0, 2, size=u.size).astype(np.float64)
    with np.errstate(all="ignore"):
        p = softmax_with_reference(u[None])[1:]
        y = targets[None, :] == np.arange(1, 2)[:, None]
        expected = (p - y, p * (1.0 - p))
        g, h = binary_gradients(u, targets == 1)
    assert bits(g).tolist() == bits(expected[0][0]).tolist()
    assert bits(h).tolist() == bits(expected[1][0]).tolist()

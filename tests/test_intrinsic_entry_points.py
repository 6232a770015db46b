"""The public intrinsic functions are kernel entry points in their own right (the store
pipeline calls tau_bracket, kappa_bracket, profile and native_size directly): each runs with
NumPy float errors ignored, and none lets a label argument change the mathematics."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.certify import InputError
from softrank.certify.intrinsic import (
    interaction_from_logits,
    interaction_from_positive,
    kappa_bracket,
    kappa_lower_rectangles,
    native_size,
    profile,
    tau_bracket,
)

H = np.array([[1.0, 2.0], [3.0, 5.0]])
X = np.array([[1e-200], [2e-200]])  # X Y^T underflows: charged by the bounds, not an error
Y = np.array([[1e-200], [3e-200]])
M = np.array([[1.0, -1.0], [-1.0, 1.0]])
D = np.array([2.0, 2.0])


def _calls():
    C = interaction_from_logits(H)
    tau = tau_bracket(C, X, Y)
    kap = kappa_bracket(X, Y, M=M, D1=D, D2=D)
    return {
        "tau": tau.to_json(),
        "kappa": kap.to_json(),
        "native": native_size(np.array([[1e300, 0.0], [-1e300, 0.0]]), np.eye(2), 1).to_json(),
        "profile": profile(kap, tau.tau, "1/2", 1).status,
    }


def test_a_callers_raise_mode_changes_nothing():
    quiet = _calls()
    with np.errstate(all="raise"):
        assert _calls() == quiet


def test_logits_out_of_range_is_an_input_error_in_raise_mode_too():
    for mode in ("ignore", "raise"):
        with np.errstate(all=mode), pytest.raises(InputError) as err:
            interaction_from_logits(np.array([[1e300, 0.0], [0.0, 1.0]]), 1e10)
        assert err.value.field in ("logits", "beta")


def test_the_field_label_cannot_make_a_positive_matrix_logits():
    B = np.array([[1.0, 1e-6], [1e-6, 1.0]])
    with pytest.raises(ValueError):
        interaction_from_positive(B, field="logits")
    # the two labels it documents give the same enclosure of P log(B) P
    a, b = interaction_from_positive(B, field="A"), interaction_from_positive(B, field="block")
    assert np.array_equal(a.mid, b.mid)
    q = tau_bracket(a, np.zeros((2, 1)), np.zeros((2, 1)), tier="arb").q
    # for n = 2, q is the 2-cycle mean: log(1/1e-6) = 13.8155...
    assert q.lo <= 13.8155 <= q.hi


def test_masked_rectangles_are_refused():
    rects = np.ma.masked_array([[0, 1, 0, 1]], mask=[[False, True, False, False]])
    with pytest.raises(InputError) as err:
        kappa_lower_rectangles(X, Y, rects)
    assert err.value.field == "rects"


def test_profile_takes_numpy_integers_as_check_intrinsic_does():
    C = interaction_from_logits(H)
    tau = tau_bracket(C, X, Y)
    kap = kappa_bracket(X, Y, M=M, D1=D, D2=D)
    assert profile(kap, tau.tau, "1/2", np.int64(2)) == profile(kap, tau.tau, "1/2", 2)
    with pytest.raises(InputError):
        profile(kap, tau.tau, "1/2", np.bool_(True))

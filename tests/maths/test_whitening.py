"""Principal axes and whitening matrices: the stated sign convention, decreasing order,
whitened covariance the identity, and the errors of a covariance that cannot be whitened."""

from __future__ import annotations

import numpy as np
import pytest

from normstats.errors import InvalidOptionError
from normstats.maths.whitening import (
    PrincipalAxes,
    Whitening,
    covariance_conditions,
    pca_whitening_matrix,
    principal_axes,
    zca_matrix,
)


def random_covariance(rng: np.random.Generator, d: int) -> np.ndarray:
    a = rng.normal(size=(d, 3 * d))
    return a @ a.T / (3 * d)


@pytest.mark.parametrize("d", [2, 3, 4, 13])
def test_axes_are_decreasing_orthonormal_and_signed_by_their_largest_component(rng, d):
    cov = random_covariance(rng, d)
    values, vectors = principal_axes(cov)
    assert (np.diff(values) <= 0).all()
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(d), atol=1e-12)
    np.testing.assert_allclose(vectors @ np.diag(values) @ vectors.T, cov, atol=1e-12)
    for column in vectors.T:
        largest = np.argmax(np.abs(column))
        assert column[largest] > 0 and np.abs(column[:largest]).max(initial=0) < \
            abs(column[largest])


def test_the_sign_convention_makes_a_grey_axis_positive():
    """RGB data whose channels move together: the first axis is (1, 1, 1)/√3, positive,
    where some published copies print it negative (flip the column to compare)."""
    cov = np.full((3, 3), 0.9) + 0.1 * np.eye(3)
    values, vectors = principal_axes(cov)
    np.testing.assert_allclose(vectors[:, 0], np.full(3, 1 / np.sqrt(3)), atol=1e-12)
    np.testing.assert_allclose(values, [2.8, 0.1, 0.1], atol=1e-12)


def test_a_tie_between_components_is_broken_by_the_first():
    values, vectors = principal_axes([[1.0, 0.0], [0.0, 1.0]])
    assert vectors.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    _, rotated = principal_axes([[2.0, -1.0], [-1.0, 2.0]])
    assert rotated[0, 0] > 0 and rotated[0, 1] > 0  # both columns: first entry positive


@pytest.mark.parametrize("d", [2, 3, 7])
def test_whitened_data_have_the_identity_as_covariance(rng, d):
    x = rng.normal(size=(5000, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d) * 100
    cov = np.cov(x, rowvar=False, ddof=0)
    for kind in ("zca", "pca"):
        w = Whitening.of(x.mean(axis=0), cov, tuple(f"c{i}" for i in range(d)), 1.0, eps=0,
                         kind=kind)
        np.testing.assert_allclose(np.cov(w.apply(x), rowvar=False, ddof=0), np.eye(d),
                                   atol=1e-10)
    zca = zca_matrix(cov)
    assert np.array_equal(zca, zca.T)
    np.testing.assert_allclose(pca_whitening_matrix(cov).T @ pca_whitening_matrix(cov),
                               zca @ zca, rtol=1e-10)


def test_eps_damps_the_smallest_directions():
    w0, w1 = zca_matrix(np.diag([4.0, 1e-4]), 0.0), zca_matrix(np.diag([4.0, 1e-4]), 1e-4)
    assert w0[1, 1] == pytest.approx(100.0) and w1[1, 1] == pytest.approx(100 / np.sqrt(2))


def test_what_cannot_be_whitened_is_refused_in_words():
    with pytest.raises(InvalidOptionError, match="singular"):
        zca_matrix([[1.0, 1.0], [1.0, 1.0]])
    assert np.isfinite(zca_matrix([[1.0, 1.0], [1.0, 1.0]], eps=1e-3)).all()
    with pytest.raises(InvalidOptionError, match="eps"):
        zca_matrix(np.eye(2), eps=-1.0)
    with pytest.raises(InvalidOptionError, match="square"):
        principal_axes([[1.0, 2.0, 3.0]])
    with pytest.raises(InvalidOptionError, match="kind"):
        Whitening.of([0.0], [[1.0]], ("a",), 1.0, kind="cholesky")


def test_condition_numbers_before_and_after_standardizing_and_whitening(rng):
    cov = np.array([[4.0, 1.9], [1.9, 1.0]])
    raw, standardized, whitened = covariance_conditions(cov)
    assert raw == pytest.approx(np.linalg.cond(cov))
    assert standardized == pytest.approx((1 + 0.95) / (1 - 0.95))  # correlation 0.95
    assert whitened == pytest.approx(1.0, abs=1e-12)
    assert covariance_conditions(np.diag([1.0, 0.0]))[1:] == (float("inf"), float("inf"))


def test_axes_explain_the_whole_variance():
    axes = PrincipalAxes.of(np.diag([3.0, 1.0]), ("a", "b"), 255.0)
    assert axes.explained == (0.75, 0.25) and axes.std == (3**0.5, 1.0)
    assert axes.to_dict()["eigenvectors"] == [[1.0, 0.0], [0.0, 1.0]]


def test_a_whitening_holds_what_it_was_made_with():
    from normstats.maths.whitening import DEFAULT_EPS

    cov = [[4.0, 1.0], [1.0, 2.0]]
    w = Whitening.of([0.5, 0.25], cov, ("a", "b"), 255)
    assert w == Whitening.of([0.5, 0.25], cov, ("a", "b"), 255, DEFAULT_EPS, "zca", 0)
    assert w.to_dict() == {"kind": "zca", "mean": [0.5, 0.25],
                           "matrix": zca_matrix(cov, DEFAULT_EPS).tolist(),
                           "eps": DEFAULT_EPS, "channels": ["a", "b"], "scale": 255.0,
                           "ddof": 0}
    assert type(w.scale) is float and type(w.eps) is float
    pca = Whitening.of([0.5, 0.25], cov, ("a", "b"), 1, eps=0.5, kind="PCA", ddof=1)
    assert pca.to_dict() == {"kind": "pca", "mean": [0.5, 0.25],
                             "matrix": pca_whitening_matrix(cov, 0.5).T.tolist(),
                             "eps": 0.5, "channels": ["a", "b"], "scale": 1.0, "ddof": 1}
    x = np.array([[1.5, 0.25], [0.5, 2.25]])
    assert w.apply(x).tolist() == ((x - [0.5, 0.25]) @ zca_matrix(cov, DEFAULT_EPS)).tolist()


def test_principal_axes_hold_what_they_were_made_with():
    axes = PrincipalAxes.of([[2.0, 1.0], [1.0, 2.0]], ("a", "b"), 255)
    values, vectors = principal_axes([[2.0, 1.0], [1.0, 2.0]])
    assert axes.to_dict() == {"eigenvalues": values.tolist(), "eigenvectors": vectors.tolist(),
                              "channels": ["a", "b"], "scale": 255.0, "ddof": 0}
    assert type(axes.scale) is float
    assert PrincipalAxes.of([[1.0]], ("a",), 1.0, ddof=1).to_dict()["ddof"] == 1


def test_equal_eigenvalues_keep_the_channel_order():
    """Twenty channels of each of three variances: within a variance, the axes follow
    the channels (a stable sort), whatever the size."""
    values, vectors = principal_axes(np.diag(np.repeat([1.0, 2.0, 3.0], 20)))
    assert values.tolist() == [3.0] * 20 + [2.0] * 20 + [1.0] * 20
    order = [*range(40, 60), *range(20, 40), *range(0, 20)]
    assert vectors.tolist() == np.eye(60)[:, order].tolist()


def test_float32_matrices_are_decomposed_in_float64(rng):
    from normstats.maths.whitening import condition_number

    cov = random_covariance(rng, 4).astype(np.float32)
    wide = cov.astype(np.float64)
    assert [a.tolist() for a in principal_axes(cov)] == [a.tolist() for a in
                                                         principal_axes(wide)]
    assert condition_number(cov) == condition_number(wide)
    assert covariance_conditions(cov) == covariance_conditions(wide)


def test_condition_numbers_at_their_edges():
    from normstats.maths.whitening import condition_number

    assert condition_number(np.diag([1.0, 4.0, 2.0])) == 4.0
    assert condition_number(np.diag([1e-15, 1.0])) == float("inf")  # at the threshold
    assert condition_number(np.diag([2e-15, 1.0])) == 1.0 / 2e-15
    raw, standardized, whitened = covariance_conditions([[1.0, 1.0], [1.0, 1.0]])
    assert (raw, whitened) == (float("inf"), float("inf")) and standardized == float("inf")
    raw, standardized, whitened = covariance_conditions([[4.0, 2.0], [2.0, 1.0]])
    assert raw == whitened == float("inf")


def test_eps_must_be_a_finite_non_negative_number():
    from normstats.maths.whitening import parse_eps

    assert parse_eps(0) == 0.0 and type(parse_eps(1)) is float
    for wrong in (-1.0, -1e-300, True, "x", float("inf"), float("nan"), None):
        with pytest.raises(InvalidOptionError) as caught:
            parse_eps(wrong)
        assert str(caught.value) == f"eps must be a finite number >= 0, got {wrong!r}"


def test_a_singular_covariance_is_refused_without_eps():
    message = ("the covariance is singular (a constant channel, or channels that are exact "
               "combinations of others): whitening is undefined; give a positive eps")
    for cov in (np.diag([1.0, 1e-15]), np.diag([1.0, 1e-16]), np.zeros((2, 2))):
        with pytest.raises(InvalidOptionError) as caught:
            zca_matrix(cov)
        assert str(caught.value) == message
    assert zca_matrix(np.eye(2)).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert zca_matrix(np.diag([1.0, 2e-15])).shape == (2, 2)

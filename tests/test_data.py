"""Synthetic data sets of the paper's captions."""

import numpy as np
import pytest

from condlab import ConfigError, DataConfig
from condlab.training._data import make_dataset


def test_fig3_data_matches_caption():
    data = make_dataset(DataConfig())   # defaults are Fig. 3's
    assert data.x.shape == (80, 5) and data.y.shape == (80, 1)
    assert data.x.min() >= -4 and data.x.max() <= 2
    np.testing.assert_allclose(data.y[:, 0], (3.5 * np.sin(5 * data.x + 1)).sum(1), rtol=1e-14)


def test_fig5_target():
    data = make_dataset(DataConfig(n=40, d=1, low=-1, high=1.5, target="fig5"))
    x = data.x[:, 0]
    np.testing.assert_allclose(data.y[:, 0], np.sin(3 * x) + np.sin(6 * x) / 2, rtol=1e-14)


def test_expression_target_in_several_variables():
    data = make_dataset(DataConfig(n=10, d=2, target="x1**2 - sin(x2)"))
    np.testing.assert_allclose(data.y[:, 0], data.x[:, 0] ** 2 - np.sin(data.x[:, 1]), rtol=1e-12)
    one_d = make_dataset(DataConfig(n=10, d=1, target="x**3"))
    np.testing.assert_allclose(one_d.y[:, 0], one_d.x[:, 0] ** 3, rtol=1e-12)


def test_seeded_and_randomized():
    a, b = make_dataset(DataConfig(seed=3)), make_dataset(DataConfig(seed=3))
    np.testing.assert_array_equal(a.x, b.x)
    r = make_dataset(DataConfig(seed=3, randomize=True))
    assert r.config.low != -4.0 and not r.config.randomize   # the drawn values are recorded
    assert r.x.min() >= r.config.low and r.x.max() <= r.config.high


def test_non_finite_target_is_rejected():
    with pytest.raises(ConfigError, match="non-finite"):
        make_dataset(DataConfig(n=10, d=1, low=-1, high=1, target="log(x - 5)"))

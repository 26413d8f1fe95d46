"""The Fig. 2 CIFAR network: shapes, init statistics, weight convention, fast path vs full training."""

import json
import math

import numpy as np
import pytest
import torch

from condlab.training._cnn import (
    CifarNet,
    ConvFeatures,
    FCHead,
    HeadHistory,
    calibrate_batchnorm,
    extract_features,
    fast_path_gap,
    make_cifar_net,
    train_full,
    train_head,
)

CH = (8, 8, 16, 16)  # tiny conv part
WIDTH = 16


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    return x, y


def _net(seed=0, activation="tanh"):
    return make_cifar_net(activation, width=WIDTH, seed=seed, channels=CH)


def test_shapes(data):
    x = torch.from_numpy(data[0][:4])
    net = _net()
    assert isinstance(net, CifarNet) and isinstance(net.conv, ConvFeatures) and isinstance(net.head, FCHead)
    assert net.conv(x).shape == (4, CH[-1])
    assert net.head(net.conv(x)).shape == (4, 10)
    assert net(x).shape == (4, 10)
    shapes = {k: v.shape for k, v in net.head.input_weights().items()}
    assert shapes == {"fc1": (WIDTH, CH[-1] + 1), "fc2": (WIDTH, WIDTH + 1), "output": (10, WIDTH + 1)}
    assert ConvFeatures().out_features == 512  # the default is ResNet18's 64-128-256-512


def test_fc_init_is_variance_one_over_m_out_cubed():
    head = FCHead(64, "tanh", width=1024, classes=10, generator=torch.Generator().manual_seed(1))
    for layer, m_out in ((head.fc1, 1024), (head.fc2, 1024), (head.output, 10)):
        expected = m_out**-1.5
        assert abs(layer.weight.std().item() / expected - 1) < 0.1
        assert abs(layer.weight.mean().item()) < 0.1 * expected
        if m_out == 1024:  # 1024 biases: enough samples for a 10% check
            assert abs(layer.bias.std().item() / expected - 1) < 0.1


def test_conv_init_is_glorot_normal_and_bn_default():
    conv = ConvFeatures((16, 16, 32, 32), torch.Generator().manual_seed(0))
    zs = []
    for m in conv.modules():
        if isinstance(m, torch.nn.Conv2d):
            out_c, in_c, kh, kw = m.weight.shape
            glorot = math.sqrt(2 / (in_c * kh * kw + out_c * kh * kw))
            if m.weight.numel() >= 2000:
                assert abs(m.weight.std().item() / glorot - 1) < 0.1
            assert m.bias is None
            zs.append(m.weight.detach().flatten() / glorot)
        elif isinstance(m, torch.nn.BatchNorm2d):
            assert torch.all(m.weight == 1) and torch.all(m.bias == 0)
            assert torch.all(m.running_mean == 0) and torch.all(m.running_var == 1)
    assert abs(torch.cat(zs).std().item() - 1) < 0.03  # pooled over every conv


def test_input_weights_fold_bias_as_last_column():
    head = _net().head
    w = head.input_weights()
    for name in ("fc1", "fc2", "output"):
        lin = getattr(head, name)
        assert w[name].dtype == np.float64
        np.testing.assert_array_equal(w[name][:, :-1], lin.weight.detach().double().numpy())
        np.testing.assert_array_equal(w[name][:, -1], lin.bias.detach().double().numpy())


def test_forward_is_features_then_head(data):
    x = torch.from_numpy(data[0][:8])
    net = _net(activation="xtanh").eval()
    with torch.no_grad():
        feats = net.conv(x)
        torch.testing.assert_close(net(x), net.head(feats))
    # the head by hand, in float64 from the reported input weights
    w = net.head.input_weights()
    h = feats.double().numpy()
    for name in ("fc1", "fc2"):
        z = h @ w[name][:, :-1].T + w[name][:, -1]
        h = z * np.tanh(z)
    logits = h @ w["output"][:, :-1].T + w["output"][:, -1]
    np.testing.assert_allclose(net.head(feats).detach().double().numpy(), logits, rtol=1e-4, atol=1e-7)


def test_seeded_init_is_deterministic_and_leaves_global_rng_alone():
    state = torch.get_rng_state()
    a, b, c = _net(seed=3), _net(seed=3), _net(seed=4)
    assert torch.equal(state, torch.get_rng_state())
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.head.fc1.weight, c.head.fc1.weight)
    assert not torch.equal(a.conv.stem[0].weight, c.conv.stem[0].weight)


def test_extract_features_equals_eval_output(data):
    x = data[0][:20]
    conv = _net().conv
    conv.train()
    feats = extract_features(conv, x, batch=7)
    assert feats.dtype == np.float32 and feats.shape == (20, CH[-1])
    assert conv.training  # mode restored
    conv.eval()
    with torch.no_grad():
        np.testing.assert_allclose(feats, conv(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_calibrated_batchnorm_matches_train_mode(data):
    x = torch.from_numpy(data[0])
    conv = _net().conv
    with torch.no_grad():
        train_mode = conv.train()(x)  # one batch of all samples: batch statistics = data statistics
    conv.eval()
    raw = extract_features(conv, x)
    calibrate_batchnorm(conv, x, batch=len(x))
    calibrated = extract_features(conv, x)
    err = lambda f: np.linalg.norm(f - train_mode.numpy()) / np.linalg.norm(train_mode.numpy())  # noqa: E731
    assert err(calibrated) < 0.01
    assert err(raw) > 0.5  # BN's default statistics would not normalize at all
    assert not conv.training and all(
        m.momentum == 0.1 for m in conv.modules() if isinstance(m, torch.nn.BatchNorm2d)
    )


def _features(data):
    conv = _net().conv
    calibrate_batchnorm(conv, data[0])  # the fast-path recipe
    return extract_features(conv, data[0])


def test_train_head_is_deterministic_and_snapshots(data):
    feats, y = _features(data), data[1]
    kw = dict(lr=1e-3, epochs=4, batch=16, width=WIDTH, seed=5, snapshot_epochs=[2, 4])
    h1, h2 = train_head(feats, y, "sigmoid", **kw), train_head(feats, y, "sigmoid", **kw)
    assert isinstance(h1, HeadHistory)
    np.testing.assert_array_equal(h1.epochs, [0, 2, 4])
    assert h1.weights["fc1"].shape == (3, WIDTH, CH[-1] + 1)
    assert h1.weights["output"].shape == (3, 10, WIDTH + 1)
    assert h1.loss.shape == h1.accuracy.shape == (4,)
    for name in h1.weights:
        np.testing.assert_array_equal(h1.weights[name], h2.weights[name])
    np.testing.assert_array_equal(h1.loss, h2.loss)
    # epoch 0 is the init of the full network with the same seed
    init = make_cifar_net("sigmoid", width=WIDTH, seed=5, channels=CH).head.input_weights()
    for name in init:
        np.testing.assert_array_equal(h1.weights[name][0], init[name])
    assert not np.array_equal(h1.weights["fc1"][0], h1.weights["fc1"][-1])


def test_train_head_with_larger_lr_reduces_loss(data):
    feats, y = _features(data), data[1]
    hist = train_head(feats, y, "tanh", lr=1e-2, epochs=40, batch=16, width=32)
    assert hist.loss[-1] < 0.8 * hist.loss[0]  # 64 random labels on 16 features: slow, but it learns
    assert hist.accuracy[-1] > 0.25  # chance is 0.1
    frozen = train_head(feats, y, "tanh", lr=1e-9, epochs=3, batch=16, width=32)
    assert abs(frozen.loss[-1] - frozen.loss[0]) < 1e-4


def test_train_full_is_deterministic(data):
    x, y = data[0][:32], data[1][:32]
    kw = dict(lr=1e-3, epochs=2, batch=16, width=WIDTH, channels=CH, snapshot_epochs=[1])
    h1, h2 = train_full(x, y, "softplus", **kw), train_full(x, y, "softplus", **kw)
    np.testing.assert_array_equal(h1.epochs, [0, 1])
    for name in h1.weights:
        np.testing.assert_array_equal(h1.weights[name], h2.weights[name])
    np.testing.assert_array_equal(h1.loss, h2.loss)
    assert np.all(np.isfinite(h1.loss))


def test_fast_path_matches_full_training_at_tiny_lr(data):
    x, y = data
    # one batch of all samples: train-mode BN statistics equal the calibrated ones, so the only
    # difference left between the two paths is the conv part's motion
    gap = fast_path_gap(x, y, "tanh", lr=1e-6, epochs=5, n_subset=64, width=64, batch=64, channels=CH)
    assert set(gap) >= {
        "conv_weight_relative_change",
        "fc1_cosine_max_abs_diff",
        "fc1_row_angle_max_deg",
        "fc1_relative_difference",
    }
    assert all(isinstance(v, float) and math.isfinite(v) for v in gap.values())
    json.dumps(gap)
    assert gap["conv_weight_relative_change"] < 1e-3
    assert gap["fc1_relative_movement"] > 1e-3  # the head did move ...
    assert gap["fc1_relative_difference"] < 0.02 * gap["fc1_relative_movement"]  # ... the same way
    assert gap["fc1_cosine_max_abs_diff"] < 1e-3
    assert gap["fc1_row_angle_max_deg"] < 0.05


def test_fast_path_gap_grows_when_conv_moves(data):
    x, y = data
    small = fast_path_gap(x, y, "tanh", lr=1e-6, epochs=3, n_subset=32, width=16, batch=32, channels=CH)
    large = fast_path_gap(x, y, "tanh", lr=1e-3, epochs=3, n_subset=32, width=16, batch=32, channels=CH)
    assert large["conv_weight_relative_change"] > 100 * small["conv_weight_relative_change"]
    assert large["fc1_relative_difference"] > small["fc1_relative_difference"]


def test_invalid_arguments(data):
    feats, y = _features(data), data[1]
    with pytest.raises(ValueError, match="snapshot"):
        train_head(feats, y, "tanh", lr=1e-3, epochs=2, width=WIDTH, snapshot_epochs=[3])
    with pytest.raises(ValueError, match="labels"):
        train_head(feats, y + 10, "tanh", lr=1e-3, epochs=1, width=WIDTH)
    with pytest.raises(ValueError, match="seed"):
        make_cifar_net("tanh", seed=-1)
    with pytest.raises(ValueError, match="channels"):
        ConvFeatures((8, 8, 16))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(data):
    feats, y = _features(data), data[1]
    kw = dict(lr=1e-3, epochs=2, batch=16, width=WIDTH)
    cpu, gpu = train_head(feats, y, "tanh", **kw), train_head(feats, y, "tanh", device="cuda", **kw)
    np.testing.assert_allclose(cpu.weights["fc1"], gpu.weights["fc1"], rtol=1e-3, atol=1e-6)
    full = train_full(data[0][:32], y[:32], "tanh", channels=CH, device="cuda", **kw)
    assert np.all(np.isfinite(full.loss))

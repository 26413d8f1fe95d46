"""Config validation: every bad value is a one-line error naming it and what is accepted."""

import pytest

import condlab
from condlab import Config, ConfigError
from condlab.training._config import snapshot_epochs, validate


def _error(overrides: list[str], base: Config | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        (base or Config()).with_overrides(overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "override,needles",
    [
        ("train.lrr=1e-3", ["train.lrr", "lr", "epochs"]),
        ("modle.width=3", ["modle", "model"]),
        ("model.width=0", ["model.width=0", "positive"]),
        ("data.n=-5", ["data.n=-5", "positive"]),
        ("model.width=abc", ["model.width='abc'", "integer"]),
        ("model.width=2.5", ["2.5", "integer"]),
        ("train.lr=fast", ["fast", "number"]),
        ("train.lr=-1e-3", ["train.lr=-0.001", "> 0"]),
        ("model.init_std=0", ["init_std=0", "standard deviation"]),
        ("train.optimizer=sgdd", ["sgdd", "adam", "gd"]),
        ("train.dtype=float16", ["float16", "float32", "float64"]),
        ("model.arch=cnn", ["cnn", "fc", "residual"]),
        ("model.activations=[tanhh]", ["tanhh", "xtanh", "relu"]),
        ("data.target=sin(", ["sin(", "sine_sum"]),
        ("data.target=__import__('os')", ["__import__"]),
        ("train.snapshots=sqrt:3", ["sqrt:3", "log:K", "every:K"]),
        ("train.snapshots=[0,5000]", ["5000", "train.epochs"]),
        ("train.epochs=0", ["train.epochs=0"]),
        ("data.low=3", ["low", "high"]),
        ("train.seeds=[1,1]", ["repeated"]),
        ("novalue", ["key=value"]),
    ],
)
def test_bad_values_name_the_value_and_the_accepted_ones(override, needles):
    message = _error([override])
    for needle in needles:
        assert needle in message, (needle, message)


def test_activations_must_match_depth():
    message = _error(["model.depth=3", "model.activations=[tanh,xtanh]"])
    assert "2 entries" in message and "depth=3" in message


def test_single_activation_is_used_for_every_layer():
    cfg = Config().with_overrides(["model.depth=3", "model.activations=xtanh"])
    assert cfg.model.activations == ["xtanh"]  # validate() leaves the config as given
    assert cfg.model.layer_activations() == ["xtanh"] * 3


def test_overrides_chain_without_validate_rewriting_activations():
    # a single activation stays one entry, so a later depth change still fits it
    cfg = Config().with_overrides(["model.depth=2"]).with_overrides(["model.depth=3"])
    assert cfg.model.depth == 3 and cfg.model.layer_activations() == ["tanh"] * 3
    given = Config()
    given.model.depth = 3
    assert validate(given) is given and given.model.activations == ["tanh"]


def test_overrides_coerce_types_and_scalars_to_lists():
    cfg = Config().with_overrides(["train.lr=5e-4", "model.init_std=[0.01, 0.001]",
                                   "train.dtype=float64", "model.output_bias=false"])
    assert cfg.train.lr == [5e-4]
    assert cfg.model.init_std == [0.01, 0.001]
    assert cfg.model.output_bias is False


def test_json_round_trip():
    cfg = condlab.preset("fig4")
    assert Config.from_dict(cfg.to_dict()) == cfg


def test_config_file(tmp_path):
    (tmp_path / "c.yaml").write_text("model:\n  width: 7\ntrain:\n  lr: 1.0e-4\n")
    cfg = Config.from_file(tmp_path / "c.yaml")
    assert cfg.model.width == 7 and cfg.train.lr == [1e-4]
    (tmp_path / "bad.yaml").write_text("model:\n  widht: 7\n")
    with pytest.raises(ConfigError, match="widht"):
        Config.from_file(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="does not exist"):
        Config.from_file(tmp_path / "missing.yaml")


def test_snapshot_specs():
    assert snapshot_epochs("every:25", 100) == [0, 25, 50, 75, 100]
    log = snapshot_epochs("log:5", 1000)
    assert log == [0, 1, 6, 32, 178, 1000]
    assert snapshot_epochs([7, 3], 10) == [0, 3, 7, 10]


def test_presets_have_caption_settings():
    fig3 = condlab.preset("fig3")
    assert (fig3.data.n, fig3.data.d, fig3.model.width, fig3.model.init_std) == (80, 5, 50, [0.005])
    assert condlab.preset("fig3-sigmoid").train.lr == [8e-4]
    assert condlab.preset("fig3-softplus").train.lr == [2.5e-4]
    assert condlab.preset("fig4").model.activations == ["x2tanh", "xtanh", "sigmoid", "tanh", "softplus"]
    with pytest.raises(ConfigError, match="known presets"):
        condlab.preset("fig9")


@pytest.mark.parametrize("preset, overrides", [
    ("fig3", ["train.seeds=[0,1,2]", "train.lr=[0.001,0.002]", "model.init_std=[0.01,0.02]",
              "train.optimizer=sgd", "train.momentum=[0.0,0.9]", "train.weight_decay=[0.0,0.1]",
              "model.dropout=[0.0,0.2]"]),
    ("fig4", ["model.depth=3", "model.activations=[tanh,relu,x2tanh]", "model.d_out=2",
              "data.target=[x1**2,sin(x2)]"]),
])
def test_a_runs_config_is_the_edited_batch_config(preset, overrides):
    # claim: run_config (what condlab.train gives each run) equals Config.from_dict of the batch
    # config's dict with the run's single values and the data set's config, and shares no list
    import dataclasses

    from condlab.records._records import RunSpec
    from condlab.training._api import run_config
    from condlab.training._data import make_dataset

    cfg = condlab.preset(preset).with_overrides(overrides)
    data = make_dataset(cfg.data).config
    spec = RunSpec(seed=cfg.train.seeds[-1], init_std=cfg.model.init_std[-1], lr=cfg.train.lr[-1],
                   weight_decay=cfg.train.weight_decay[-1], momentum=cfg.train.momentum[-1],
                   dropout=cfg.model.dropout[-1])
    raw = cfg.to_dict()
    raw["data"] = dataclasses.asdict(data)
    raw["train"].update(seeds=[spec.seed], lr=[spec.lr], weight_decay=[spec.weight_decay],
                        momentum=[spec.momentum])
    raw["model"].update(init_std=[spec.init_std], dropout=[spec.dropout])
    got = run_config(cfg, data, spec)
    assert got == Config.from_dict(raw) and got.to_dict() == raw
    assert got.model.activations is not cfg.model.activations
    assert got.data.target is not data.target or not isinstance(data.target, list)


def test_from_dict_takes_any_mapping_such_as_an_omegaconf_dictconfig():
    from collections.abc import Mapping

    class Frozen(Mapping):  # not a dict, like OmegaConf's DictConfig; its lists are tuples
        def __init__(self, data):
            self.data = data

        def __getitem__(self, key):
            value = self.data[key]
            if isinstance(value, dict):
                return Frozen(value)
            return tuple(value) if isinstance(value, list) else value

        def __iter__(self):
            return iter(self.data)

        def __len__(self):
            return len(self.data)

    raw = Config().to_dict()
    raw["train"]["lr"] = [0.5, 0.1]
    assert Config.from_dict(Frozen(raw)) == Config.from_dict(raw)
    with pytest.raises(ConfigError, match="unknown key"):
        Config.from_dict(Frozen({"nope": 1}))

"""condlab.lightning_callback in a real lightning.Trainer (a tiny model, few steps), on the GPU where there
is one (benchmarks/device_checks.sh runs these tests on the GPU machine), else on the CPU."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import condlab

pl = pytest.importorskip("lightning.pytorch")
ACCELERATOR = "gpu" if torch.cuda.is_available() else "cpu"


class _Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = ((self.net(x) - y) ** 2).mean()
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class _Collect(pl.loggers.logger.Logger):
    """A logger that keeps what it is given: (step, metrics) per call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, dict]] = []

    name, version = "collect", "0"

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        self.calls.append((step, dict(metrics)))


def _loader() -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    return torch.utils.data.DataLoader(data, batch_size=8)


def _fit(model, callback, logger, steps: int) -> pl.Trainer:
    with warnings.catch_warnings():  # Lightning's own advice (num_workers, ...) is not under test
        warnings.simplefilter("ignore")
        trainer = pl.Trainer(max_steps=steps, accumulate_grad_batches=2, logger=logger, callbacks=[callback],
                             accelerator=ACCELERATOR, devices=1, enable_progress_bar=False,
                             enable_model_summary=False, enable_checkpointing=False, log_every_n_steps=1)
        trainer.fit(model, _loader())
    return trainer


def test_metrics_reach_the_logger_at_optimizer_steps_and_a_second_fit_opens_a_new_record(tmp_path: Path):
    # Claim: with accumulate_grad_batches=2, 6 optimizer steps = 12 batches, and the callback
    # steps its tracker 6 times, measuring global steps 0, 3 and 6 at every=3.
    torch.manual_seed(0)
    model, logger = _Tiny(), _Collect()
    callback = condlab.lightning_callback(every=3, out=tmp_path / "pl", snapshots=True)
    trainer = _fit(model, callback, logger, steps=6)
    assert trainer.global_step == 6
    run = condlab.load_run(tmp_path / "pl")
    assert run.status == "complete" and list(run.epochs) == [0, 3, 6] and len(run.loss) == 6
    measured = [step for step, m in logger.calls if "condlab/net.0/lines" in m]
    assert measured == [0, 3, 6]
    last = next(m for step, m in logger.calls if step == 6 and "condlab/net.2/effective_neurons" in m)
    rows = __import__("pandas").read_csv(tmp_path / "pl" / "condensation.csv").query("step == 6")
    assert last["condlab/net.2/effective_neurons"] == pytest.approx(
        rows.set_index("layer").loc["net.2", "effective_neurons"])
    assert "condlab/net.0/condensed_share" in trainer.callback_metrics

    trainer = _fit(model, callback, logger, steps=4)  # a second fit with the same callback
    assert callback.records == [tmp_path / "pl", tmp_path / "pl-fit2"]
    second = condlab.load_run(tmp_path / "pl-fit2")
    assert second.status == "complete" and list(second.epochs)[0] == 0 and len(second.loss) == 4
    assert condlab.load_run(tmp_path / "pl").status == "complete"  # the first is untouched


def test_only_global_rank_zero_tracks(tmp_path: Path) -> None:
    # Under DDP every rank runs the callback; ranks other than 0 must neither count nor write.
    from types import SimpleNamespace

    callback = condlab.lightning_callback(every=1, out=tmp_path / "pl")
    rank1 = SimpleNamespace(is_global_zero=False, global_step=0, current_epoch=0, loggers=[])
    callback.on_fit_start(rank1, _Tiny())
    rank1.global_step = 1
    callback.on_train_batch_end(rank1, _Tiny(), {"loss": torch.tensor(1.0)}, None, 0)
    callback.on_fit_end(rank1, _Tiny())
    assert callback.tracker is None and callback.records == [] and not (tmp_path / "pl").exists()

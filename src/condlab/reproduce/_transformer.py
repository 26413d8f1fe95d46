"""Condensation in a transformer (issue 12, after the talk's A(X) = Σ_h softmax(X W_Q W_Kᵀ Xᵀ/√d) X W_V W_Oᵀ).

Task (a reconstruction of the two-anchor composition of Zhang et al., NeurIPS 2024,
arXiv:2405.05409): sequences of SEQ tokens; filler and key tokens are drawn from KEYS; one
adjacent anchor pair (a1, a2), anchors 1..4 with shifts +5, +1, -2, -8, sits at a random
position p >= 1, and the key is the token before it. The target is key + s(a1) + s(a2), read
at the last position as a VOCAB-way classification (cross-entropy). A fixed training set of
TRAIN_N sequences per seed, minibatches of BATCH.

Model: token embedding + learned positions, ``nn.TransformerEncoder`` of 2
``nn.TransformerEncoderLayer`` (d_model 32, 4 heads, FFN 64, ReLU, no dropout, no mask), a
linear readout of the last position. Run with LayerNorm (PyTorch's post-norm layer) and without
(norm1/norm2 replaced by identities).

Initialization: "small" (γ = 1) and the γ = 0.5 control draw every weight matrix, bias,
embedding and position table from N(0, d_in^(-2γ)) (d_in = fan-in; d_model for the embedding
and positions) - packed Q/K/V set explicitly; "default" is PyTorch's own init (embedding
N(0, 1), about 6x the linear layers: the γ = 0.5 control separates that from the scale).
Adam lr 1e-3, eps 1e-12 (the default 1e-8 is comparable to the gradients at tiny init).

Measured with ``condlab.Tracker`` (the layer adapter) every STEPS/10 steps on the whole W_Q, W_K,
W_V, W_O (rows of out_proj) and FFN-in (linear1) of both layers, bias folded in. The statistic
c(t) is the share of a matrix's rows on its 3 largest condensed lines (count_orientations at its
defaults). A matrix *condenses* when max over t > 0 of c(t) >= 0.5; it *does not* when
c(t) < 0.2 at every checkpoint. Claims (layer 0, stated before the runs): at small init W_Q and
W_K condense; at default init and γ = 0.5 they do not; W_V, W_O and FFN-in hardly condense at
small init (max c < 0.5; the prototype's finding). A run still on the loss plateau (the best
constant predictor's loss, the targets' entropy) says nothing yet: every claim on it is
inconclusive (PLATEAU_EXIT, issue 25). ``--quick`` (400 steps, one init seed, the LayerNorm variant
only: QUICK_VARIANTS) is CI-sized and provisional; the claims of the variant it does not train are
recorded inconclusive, "not trained by --quick". The default run trains and judges both variants.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..analysis import cosine_order, count_orientations
from ..models import Tracker
from ._claims import ExperimentResult
from ._context import Context

VOCAB, SEQ, KEYS = 100, 9, (20, 90)
SHIFTS = {1: 5, 2: 1, 3: -2, 4: -8}
D_MODEL, HEADS, FFN, LAYERS = 32, 4, 64, 2
TRAIN_N, BATCH, LR, EPS = 2000, 100, 1e-3, 1e-12
INITS = {"small": 1.0, "gamma0.5": 0.5, "default": None}
MATRICES = ("q", "k", "v", "o", "ffn_in")
VARIANTS = {"no-layernorm": False, "layernorm": True}

# --- Pre-registered thresholds: CONDENSED, NOT_CONDENSED and TOP were set with the claims (issue 12)
# before any run; PLATEAU_EXIT (issue 25) before the runs it judges (set after the seed-0 loss curves
# of issue 25's probe showed the 400-step run of --quick still on the plateau). ---
CONDENSED, NOT_CONDENSED, TOP = 0.5, 0.2, 3   # max c >= 0.5: condenses; c < 0.2 everywhere: does not
# The loss plateau is the best constant predictor's loss, the entropy H of the training targets
# (4.40 nats, not ln 100: targets take ~80 values). A run has left it when its mean loss over the
# last checkpoint interval is <= (1 - PLATEAU_EXIT) H; on a run still on it every claim is
# inconclusive ("still on the loss plateau"): the model has learned nothing about the task yet.
PLATEAU_EXIT = 0.1
STEPS, QUICK_STEPS, CHECKPOINTS = 1200, 400, 12   # --quick: one init seed (CI-sized, < ~1 min)
# --quick trains one variant: training is most of its time (~12 ms a step at one thread, framework
# overhead of a model this small), and without LayerNorm the small-init run is still on the loss
# plateau at 400 steps, so its claims would be inconclusive there anyway (issue 25's probe).
QUICK_VARIANTS = ("layernorm",)
THRESHOLDS = {"condensed_max_c_at_least": CONDENSED, "not_condensed_max_c_below": NOT_CONDENSED,
              "lines": TOP, "plateau_exit": PLATEAU_EXIT}


def anchor_task(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, SEQ) int64 tokens and (n,) targets of the two-anchor composition task."""
    g = np.random.default_rng(seed)
    x = g.integers(KEYS[0], KEYS[1], size=(n, SEQ))
    pos = g.integers(1, SEQ - 1, size=n)  # key at pos - 1, anchors at pos, pos + 1
    a = g.integers(1, 5, size=(n, 2))
    rows = np.arange(n)
    x[rows, pos], x[rows, pos + 1] = a[:, 0], a[:, 1]
    shift = np.vectorize(SHIFTS.get)
    y = x[rows, pos - 1] + shift(a[:, 0]) + shift(a[:, 1])
    return torch.as_tensor(x), torch.as_tensor(y)


class SeqModel(nn.Module):
    """Embedding + positions -> nn.TransformerEncoder -> readout of the last position."""

    def __init__(self, layer_norm: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(torch.randn(SEQ, D_MODEL))
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        if not layer_norm:
            for block in self.encoder.layers:
                block.norm1, block.norm2 = nn.Identity(), nn.Identity()
        self.readout = nn.Linear(D_MODEL, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(x) + self.pos)
        return self.readout(h[:, -1])


@torch.no_grad()
def init_gamma(model: SeqModel, gamma: float, gen: torch.Generator) -> None:
    """Every weight, bias, embedding and position ~ N(0, d_in^(-2γ)); LayerNorm left at 1 / 0."""
    def fill(p: torch.Tensor | None, fan_in: int) -> None:
        if p is not None:
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * fan_in ** -gamma)

    fill(model.embed.weight, D_MODEL)
    fill(model.pos, D_MODEL)
    for mod in model.modules():
        if isinstance(mod, nn.MultiheadAttention):  # packed Q/K/V: fan-in embed_dim for each
            fill(mod.in_proj_weight, mod.embed_dim)
            fill(mod.in_proj_bias, mod.embed_dim)
        elif isinstance(mod, nn.Linear):  # FFN, readout and out_proj
            fill(mod.weight, mod.in_features)
            fill(mod.bias, mod.in_features)


def make_model(init: str, layer_norm: bool, seed: int) -> SeqModel:
    """The model for one run; PyTorch's default init forked from the seed (global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = SeqModel(layer_norm)
    if INITS[init] is not None:
        init_gamma(model, INITS[init], torch.Generator().manual_seed(seed + 1000))
    return model


def _patterns() -> list[str]:
    return [f"encoder.layers.*.self_attn.{c}" for c in "qkvo"] + ["encoder.layers.*.linear1"]


def _key(layer: str) -> tuple[int, str]:
    """'encoder.layers.0.self_attn.q' -> (0, 'q'); '...linear1' -> (0, 'ffn_in')."""
    parts = layer.split(".")
    return int(parts[2]), "ffn_in" if parts[-1] == "linear1" else parts[-1]


def train_run(init: str, layer_norm: bool, seed: int, steps: int, out) -> dict:
    """Train one run with a Tracker; returns {(layer, matrix): (steps, c(t), lines(t))} and losses."""
    x, y = anchor_task(TRAIN_N, seed)
    model = make_model(init, layer_norm, seed)
    opt = torch.optim.Adam(model.parameters(), lr=LR, eps=EPS)
    gen = torch.Generator().manual_seed(seed + 2000)
    shutil.rmtree(out, ignore_errors=True)  # this experiment's own record of an earlier call
    tracker = Tracker(model, every=max(1, steps // CHECKPOINTS), layers=_patterns(), out=out,
                      snapshots=True, count_kwargs={"band": True})
    for step in range(steps):
        idx = torch.randint(0, TRAIN_N, (BATCH,), generator=gen)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tracker.step(step // (TRAIN_N // BATCH), loss)
    tracker.close()
    h = tracker.history
    h["c"] = h[[f"share_{i + 1}" for i in range(TOP)]].sum(axis=1)
    curves = {_key(name): (g["step"].to_numpy(), g["c"].to_numpy(), g["lines"].to_numpy())
              for name, g in h.groupby("layer", sort=False)}
    with torch.no_grad():
        acc = float((model(x).argmax(1) == y).float().mean())
    snapshots = Path(out) / "snapshots"  # the Tracker's record holds the snapshots (issue 20)
    snaps = {p.stem: np.load(p) for p in snapshots.glob("*.npy") if p.stem != "epochs"}
    return {"curves": curves, "loss": tracker.losses, "train_accuracy": acc,
            "steps": np.load(snapshots / "epochs.npy").tolist(), "snaps": snaps}


def _verdict(curve: tuple) -> dict:
    """Peak of c(t) over checkpoints after init, where it was reached, lines there."""
    steps, c, lines = curve
    i = 1 + int(np.argmax(c[1:])) if len(c) > 1 else 0
    return {"max_c": round(float(c[i]), 3), "at_step": int(steps[i]), "lines_at_max": int(lines[i]),
            "c_over_training": [round(float(v), 3) for v in c]}


def marginal_entropy(y: torch.Tensor) -> float:
    """Entropy (nats) of the targets' distribution: the cross-entropy of the best constant predictor."""
    p = np.bincount(np.asarray(y), minlength=VOCAB) / len(y)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def final_loss(losses, steps: int) -> float:
    """Mean training loss over the last checkpoint interval (minibatch losses are noisy)."""
    return float(np.mean(np.asarray(losses, dtype=np.float64)[-max(1, steps // CHECKPOINTS):]))


def judge(expected: dict, curve: tuple, loss: float, plateau: float) -> tuple[bool | None, str, dict]:
    """One run's outcome on one claim: (holds / fails / None inconclusive, reason, measured values).

    Inconclusive while the run is still on the loss plateau (loss > (1 - PLATEAU_EXIT) plateau);
    else "condenses" holds when max c >= expected["max_c_at_least"], "does not" when max c <
    expected["max_c_below"] (max over the checkpoints after init).
    """
    v = _verdict(curve)
    if loss > (1 - PLATEAU_EXIT) * plateau:
        return None, (f"still on the loss plateau: final loss {loss:.2f} > {1 - PLATEAU_EXIT:.0%} of the "
                      f"constant predictor's {plateau:.2f}"), v
    if "max_c_at_least" in expected:
        bound = expected["max_c_at_least"]
        return v["max_c"] >= bound, f"max c {v['max_c']} < {bound}", v
    bound = expected["max_c_below"]
    return v["max_c"] < bound, f"max c {v['max_c']} >= {bound} (step {v['at_step']})", v


def _claims(res: ExperimentResult, variant: str) -> dict:
    """The pre-registered claims of one LayerNorm variant, keyed by (init, matrix)."""
    made = {}
    for c in "qk":
        made["small", c] = res.claim(
            f"transformer/{variant}/small/layer0.{c}",
            f"{variant}: at small init (γ = 1) layer-0 W_{c.upper()} condenses: >= {CONDENSED:.0%} "
            f"of rows on <= {TOP} lines at some checkpoint",
            max_c_at_least=CONDENSED)
        for init in ("default", "gamma0.5"):
            made[init, c] = res.claim(
                f"transformer/{variant}/{init}/layer0.{c}", f"{variant}: at {init} init layer-0 "
                f"W_{c.upper()} does not condense: < {NOT_CONDENSED:.0%} of rows on its {TOP} largest lines "
                "at every checkpoint", max_c_below=NOT_CONDENSED)
    for c in ("v", "o", "ffn_in"):
        made["small", c] = res.claim(
            f"transformer/{variant}/small/layer0.{c}", f"{variant}: at small init layer-0 {c} hardly "
            f"condenses (< {CONDENSED:.0%} of rows on <= {TOP} lines at every checkpoint; the prototype's "
            "finding)", max_c_below=CONDENSED)
    return made


def transformer(ctx: Context) -> ExperimentResult:
    """Issue 12: attention projections of a small transformer condense at small init, not at default."""
    source = "issue 12; talk (004): A(X) = Σ_h softmax(X W_Q W_Kᵀ Xᵀ/√d) X W_V W_Oᵀ"
    seeds = ctx.seeds[:1] if ctx.quick else ctx.seeds  # --quick: CI-sized, one init seed
    res = ExperimentResult("transformer", source, seeds)
    steps = QUICK_STEPS if ctx.quick else STEPS
    res.settings = {"task": "two-anchor composition: target = key + s(a1) + s(a2), s = "
                    f"{SHIFTS}, keys/fillers in [{KEYS[0]}, {KEYS[1]}), sequence {SEQ}, vocab {VOCAB}",
                    "train_n": TRAIN_N, "batch": BATCH, "steps": steps,
                    "checkpoints_every": steps // CHECKPOINTS,
                    "model": f"nn.TransformerEncoder: {LAYERS} layers, d_model {D_MODEL}, {HEADS} heads, "
                             f"FFN {FFN}, ReLU, no dropout; learned positions; readout of the last position",
                    "inits": {"small": "N(0, d_in^-2) (γ = 1)", "gamma0.5": "N(0, d_in^-1)",
                              "default": "PyTorch's default init"},
                    "optimizer": f"adam lr {LR}, eps {EPS}", "statistic": f"c = share of rows on the {TOP} "
                    "largest condensed lines (count_orientations defaults), whole matrices, bias folded in"}
    res.choices += [
        "a reconstruction of the group's anchor-function task, not their code; an encoder without a "
        "mask read at the last position instead of the prototype's causal decoder",
        "condensation is judged over training (max of c over checkpoints after init), since the "
        "prototype found it clearest early; 'does not condense' must hold at every checkpoint",
        "LayerNorm variant: PyTorch's post-norm TransformerEncoderLayer; without: norm1/norm2 = identity"]
    res.settings["thresholds"] = THRESHOLDS
    res.choices.append(f"a run still on the loss plateau (final loss > {1 - PLATEAU_EXIT:.0%} of the "
                       "targets' entropy, the best constant predictor's loss) makes every claim on it "
                       "inconclusive: the model has not learned the task yet")
    trained = [v for v in VARIANTS if not ctx.quick or v in QUICK_VARIANTS]
    if ctx.quick:
        res.notes.append(f"--quick: {steps} steps instead of {STEPS}, one init seed and the "
                         f"{', '.join(trained)} variant only (the others' claims are inconclusive, not "
                         "trained); runs still on the loss plateau are inconclusive by the rule above")
    runs: dict = {}
    for variant in VARIANTS:
        claims = _claims(res, variant)
        if variant in trained:
            _train_variant(ctx, res, variant, claims, seeds, steps, runs)
        else:
            _not_trained(claims, seeds)
    ctx.save(res, _curves_figure(runs, seeds, trained), "transformer_condensation")
    return res


def _train_variant(ctx: Context, res: ExperimentResult, variant: str, claims: dict, seeds: list[int],
                   steps: int, runs: dict) -> None:
    """Train every init and seed of one LayerNorm variant into `runs`, judge its claims, save its maps."""
    for init in INITS:
        for seed in seeds:
            out = ctx.out / "runs" / f"{variant}_{init}_seed{seed}"
            r = runs[variant, init, seed] = train_run(init, VARIANTS[variant], seed, steps, out)
            loss, plateau = final_loss(r["loss"], steps), marginal_entropy(anchor_task(TRAIN_N, seed)[1])
            for (i, c), claim in claims.items():
                if i == init:
                    ok, why, v = judge(claim.expected, r["curves"][0, c], loss, plateau)
                    claim.record(ok, pair=(seed, seed), reason=why, **v, final_loss=round(loss, 4),
                                 plateau_loss=round(plateau, 4))
    for init in INITS:
        res.settings[f"layer1/{variant}/{init}"] = {
            c: [_verdict(runs[variant, init, s]["curves"][1, c])["max_c"] for s in seeds] for c in MATRICES}
    ctx.save(res, _heatmaps(runs, variant, seeds[0]), f"transformer_cosine_{variant}")


def _not_trained(claims: dict, seeds: list[int]) -> None:
    """Record every claim of a variant --quick does not train as inconclusive, saying why."""
    for claim in claims.values():
        for seed in seeds:
            claim.record(None, pair=(seed, seed), reason="not trained by --quick (one variant only); "
                         "the default run trains it")


def _heatmaps(runs: dict, variant: str, seed: int):
    """Layer-0 Q, K, V, O, FFN-in: small init where W_Q peaks, default init at the end."""
    from ..plotting import cosine_panels
    panels = []
    for init in ("small", "default"):
        r = runs[variant, init, seed]
        steps, c, _ = r["curves"][0, "q"]
        i = 1 + int(np.argmax(c[1:])) if init == "small" else len(steps) - 1
        for m in MATRICES:
            name = f"encoder.layers.0.{'linear1' if m == 'ffn_in' else 'self_attn.' + m}"
            W = r["snaps"][name][i].astype(np.float64)
            panels.append((f"{init}, {m}, step {r['steps'][i]}", W, cosine_order(W, count_orientations(W))))
    return cosine_panels(panels, ncols=len(MATRICES), suptitle=f"{variant}: layer 0, seed {seed}")


def _curves_figure(runs: dict, seeds: list[int], variants: list[str]):
    """c(t) of layer-0 matrices: rows = LayerNorm variant, columns = matrix, lines = init scale."""
    from ..plotting import styled  # plotting (matplotlib) when a figure is drawn, not at import

    return styled(_draw_curves)(runs, seeds, variants)


def _draw_curves(runs: dict, seeds: list[int], variants: list[str]):
    """_curves_figure's body (drawn under the house style)."""
    from ..plotting import new_figure
    fig = new_figure(2.3 * len(MATRICES), 2.2 * len(variants))
    axes = fig.subplots(len(variants), len(MATRICES), squeeze=False, sharey=True)
    styles = {"small": "-", "gamma0.5": ":", "default": "--"}
    for r, variant in enumerate(variants):
        for col, m in enumerate(MATRICES):
            ax = axes[r, col]
            for init, style in styles.items():
                curves = [runs[variant, init, s]["curves"][0, m] for s in seeds]
                steps = curves[0][0]
                ax.plot(steps, np.mean([cv[1] for cv in curves], 0), style, label=init)
            ax.set_title(f"{variant}: {m}", fontsize=8)
            ax.set_ylim(-0.02, 1.02)
            if col == 0:
                ax.set_ylabel(f"share on {TOP} largest lines")
            if r == len(variants) - 1:
                ax.set_xlabel("step")
    axes[0, 0].legend()
    return fig

"""``condlab.inspect`` on real architectures: rows and time, beside WeightWatcher's ``analyze()``.

Models are built from their configs with random weights (nothing is downloaded): Hugging Face
GPT-2, BERT, a LLaMA-style model (grouped K/V heads), ViT and ResNet, and timm's resnet18 and
vit_tiny_patch16_224 where timm imports (it needs a working torchvision). `--size tiny`: 2
layers of width 64, 4 heads; `--size base`: the usual base sizes (GPT-2 124M, BERT-base, a
LLaMA-style 12 x 768 with 4 K/V heads, ViT-B/16). Each model is inspected once after a warm-up
on the smallest; WeightWatcher (if installed) runs ``WeightWatcher(model=m).analyze()`` at its
defaults on the same module.

    python benchmarks/bench_models.py [--size tiny|base] [--no-weightwatcher]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import torch
from _machine import machine_line

import condlab

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _hf_models(size: str) -> dict:
    import transformers as T

    T.logging.set_verbosity_error()
    e, n, h = (64, 2, 4) if size == "tiny" else (768, 12, 12)
    kv = 2 if size == "tiny" else 4
    common = dict(num_hidden_layers=n, num_attention_heads=h, intermediate_size=4 * e)
    return {
        "GPT-2": lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=e, n_layer=n, n_head=h, vocab_size=1000 if
                                                         size == "tiny" else 50257, bos_token_id=0,
                                                         eos_token_id=0)),
        "BERT": lambda: T.BertModel(T.BertConfig(hidden_size=e, vocab_size=1000 if size == "tiny" else 30522,
                                                 **common)),
        "LLaMA-style": lambda: T.LlamaForCausalLM(T.LlamaConfig(hidden_size=e, num_key_value_heads=kv,
                                                                vocab_size=1000 if size == "tiny" else 32000,
                                                                bos_token_id=0, eos_token_id=0, **common)),
        "ViT (HF)": lambda: T.ViTModel(T.ViTConfig(hidden_size=e, image_size=32 if size == "tiny" else 224,
                                                   patch_size=8 if size == "tiny" else 16, **common)),
        "ResNet (HF)": lambda: T.ResNetModel(T.ResNetConfig(
            **(dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1]) if size == "tiny" else {}))),
    }


def _timm_models(size: str) -> dict:
    try:
        import timm
    except Exception as err:  # noqa: BLE001 - no timm, or timm without a working torchvision
        print(f"timm not available here ({type(err).__name__}: {str(err).splitlines()[0][:80]})")
        return {}
    vit = "vit_tiny_patch16_224" if size == "tiny" else "vit_base_patch16_224"
    return {"resnet18 (timm)": lambda: timm.create_model("resnet18", pretrained=False),
            f"{vit} (timm)": lambda: timm.create_model(vit, pretrained=False)}


def _weightwatcher(model) -> tuple[int, float] | str:
    try:
        import weightwatcher as ww
    except ImportError:
        return "not installed"
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        details = ww.WeightWatcher(model=model).analyze()
    return len(details), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=["tiny", "base"], default="tiny")
    ap.add_argument("--no-weightwatcher", action="store_true")
    args = ap.parse_args()
    print(machine_line(threads=torch.get_num_threads(), dtype="float32"))
    models = {**_hf_models(args.size), **_timm_models(args.size)}
    torch.manual_seed(0)
    condlab.inspect(torch.nn.Linear(8, 8))  # warm-up: imports, compiled kernels
    print(f"threads: torch {torch.get_num_threads()}; size {args.size}")
    print(f"{'model':<28} {'params':>8} {'rows':>5} {'heads':>5} {'skipped':>7} {'inspect s':>9}  "
          f"{'WW layers':>9} {'WW s':>7}")
    for name, build in models.items():
        model = build().eval()
        params = sum(p.numel() for p in model.parameters())
        t0 = time.perf_counter()
        table = condlab.inspect(model)
        took = time.perf_counter() - t0
        heads = int(table["layer"].str.contains(r"\.h\d+$").sum())
        ww = "-" if args.no_weightwatcher else _weightwatcher(model)
        ww_cells = f"{ww:>17}" if isinstance(ww, str) else f"{ww[0]:>9} {ww[1]:>7.2f}"
        print(f"{name:<28} {params / 1e6:>7.2f}M {len(table):>5} {heads:>5} "
              f"{len(table.attrs['skipped']):>7} {took:>9.2f}  {ww_cells}", flush=True)


if __name__ == "__main__":
    main()

"""The weight matrices of a network of eqs. (1)-(2): their names and (rows, columns), bias
column included (docs/conventions.md). No torch: records are read, and reports drawn, without it;
``Architecture.names`` and ``.shapes`` are these."""

from __future__ import annotations


def layer_names(depth: int) -> list[str]:
    """'layer1' .. 'layer<depth>', then 'output'."""
    return [f"layer{i + 1}" for i in range(depth)] + ["output"]


def layer_shapes(d: int, width: int, depth: int, d_out: int, output_bias: bool) -> list[tuple[int, int]]:
    """(rows, columns) of each weight matrix of a d-width-...-width-d_out network."""
    fan_in = [d] + [width] * depth
    hidden = [(width, fan_in[i] + 1) for i in range(depth)]
    return hidden + [(d_out, width + int(output_bias))]

"""The line every speed figure of benchmarks/ is printed with: CPU model, vector ISA, threads, dtype.

A speed ratio measured on one CPU does not carry to another (issue 24): numpy's float64 tanh,
for one, is fast only with AVX-512, so a figure is only meaningful next to the machine it was
measured on. Benchmarks print ``machine_line(...)`` before their figures:

    from _machine import machine_line   # benchmarks/ is on sys.path when a script there runs
    print(machine_line(threads=1))

    machine: Intel(R) Xeon(R) Processor @ 2.50GHz | ISA AVX-512 (torch: AVX512, numpy: AVX-512) | ...
"""

from __future__ import annotations

import os
import platform
import sys

CPUINFO = "/proc/cpuinfo"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what the platform module says)."""
    for key, value in _cpuinfo():
        if key in ("model name", "Processor", "cpu model"):
            return value
    return platform.processor() or platform.machine() or "unknown CPU"


def vector_isa() -> str:
    """The widest x86 vector extension the CPU has: 'AVX-512', 'AVX2', 'AVX', 'SSE' or, off
    x86 or without /proc/cpuinfo, the machine name; with torch's own choice where torch is
    already imported (``torch.backends.cpu.get_cpu_capability()``: what its kernels use)."""
    flags = next((set(value.split()) for key, value in _cpuinfo() if key == "flags"), set())
    if "avx512f" in flags:
        isa = "AVX-512"
    elif "avx2" in flags:
        isa = "AVX2"
    elif "avx" in flags:
        isa = "AVX"
    elif flags:
        isa = "SSE"
    else:
        isa = platform.machine() or "unknown ISA"
    # what the libraries' kernels dispatch to: less than the CPU has where restricted
    # (ATEN_CPU_CAPABILITY=avx2, NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR")
    kernels = []
    torch = _imported("torch")
    if torch is not None:
        try:
            kernels.append(f"torch: {torch.backends.cpu.get_cpu_capability()}")
        except (AttributeError, RuntimeError):   # older torch: no such query
            pass
    if _imported("numpy") is not None:
        kernels.append(f"numpy: {_numpy_isa()}")
    return isa + (f" ({', '.join(kernels)})" if kernels else "")


def _numpy_isa() -> str:
    """The widest x86 extension numpy's SIMD loops dispatch to here (its private feature table)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:   # numpy 1.x keeps it in numpy.core
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            return "unknown"
    if features.get("X86_V4", features.get("AVX512_SKX")):
        return "AVX-512"
    return "AVX2" if features.get("X86_V3", features.get("AVX2")) else "below AVX2"


def machine_line(*, threads: int | str | None = None, dtype: str | None = None, **more: object) -> str:
    """One line naming the machine and the settings a figure was measured with."""
    parts = [cpu_model(), f"ISA {vector_isa()}", f"{os.cpu_count()} cores"]
    if threads is not None:
        parts.append(f"{threads} thread{'s' if str(threads) != '1' else ''}")
    if dtype is not None:
        parts.append(str(dtype).removeprefix("torch."))
    parts += [f"{key} {value}" for key, value in more.items()]
    return "machine: " + " | ".join(parts)


def _cpuinfo() -> list[tuple[str, str]]:
    """(key, value) lines of /proc/cpuinfo for the first CPU; [] where there is none."""
    try:
        with open(CPUINFO) as f:
            text = f.read().split("\n\n")[0]
    except OSError:
        return []
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return [(key.strip(), value.strip()) for key, value in pairs]


def _imported(name: str):
    """The module if this process already imported it (a machine line never imports torch)."""
    return sys.modules.get(name)


if __name__ == "__main__":
    print(machine_line())

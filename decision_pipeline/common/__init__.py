"""Shared helpers: config loading, atomic I/O, hashing, stats, logging.

Importing the package pins PyTorch's CPU kernels to AVX2 before any tensor operation runs, so
every x86 machine computes the same results (common/cpu.py)."""
from decision_pipeline.common.cpu import pin_cpu_kernels

pin_cpu_kernels()

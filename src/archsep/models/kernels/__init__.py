"""Mamba-1's selective scan, in PyTorch (`selective_scan`) and in C (`selective_scan.c`, compiled
and loaded by `native`, wrapped by `native_scan`). models/mamba.py picks one per call."""
from __future__ import annotations

from .native_scan import NativeConvSiLU, NativeScan, native_available, native_conv_silu, native_scan
from .selective_scan import (CHUNK_ELEMS, MAX_CHUNK, ChunkedScan, FusedScan, chunked_scan, default_chunk,
                             fused_scan, scan_parallel, scan_sequential)

__all__ = ["CHUNK_ELEMS", "MAX_CHUNK", "ChunkedScan", "FusedScan", "NativeConvSiLU", "NativeScan", "chunked_scan",
           "default_chunk", "fused_scan", "native_available", "native_conv_silu", "native_scan", "scan_parallel",
           "scan_sequential"]

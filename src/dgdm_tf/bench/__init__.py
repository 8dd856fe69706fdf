"""Benchmarks: each sampler step against its convolution floor, MCEM, batched pretraining."""

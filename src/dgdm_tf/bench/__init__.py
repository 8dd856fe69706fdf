"""Benchmarks: each sampler step against its convolution floor, MCEM, streamed pretraining."""

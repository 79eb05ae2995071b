"""Benchmarks: the proxy against calling the upstream directly, in the same run."""

"""Benchmarks and measurements that print figures; run as modules, never collected by pytest.

* ``python -m tests.bench.bench_plan``: parse + chunk-plan time and memory on a large synthetic
  merge request (the generator is reused by ``tests/test_bench_smoke.py`` at a tiny size).
* ``python -m tests.bench.measure_tokens``: bytes per token of the local Qwen BPE and the
  byte-estimate fallback's error on real code (the figures in ``docs/tokens.md``).
"""

"""Application: the bench — the same tasks as tiny agents and as one all-tools agent, measured."""

from tiny_cli.bench.run import BenchOptions, BenchReport, bench_from_settings

__all__ = ["BenchOptions", "BenchReport", "bench_from_settings"]

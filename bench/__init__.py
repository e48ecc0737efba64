"""The benchmark's scripts (`python bench/run_bench.py`, README.md); a package so that the tests import
them (`tests/bench/`) as `bench.<module>`."""

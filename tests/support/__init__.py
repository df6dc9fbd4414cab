"""tests/support: what the integration tests and the benchmarks share (free ports, starting `sipp
serve`, synthetic models, bounded waiting) and the timed, sharded test runner (runner.py)."""

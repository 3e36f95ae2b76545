"""Benchmarks: each prints absolute numbers and ratios against baselines measured in the same run.

    python -m bench                 every benchmark in this folder, each with its defaults
    python -m bench engine          only the named ones
    python -m bench.engine --help   one benchmark, with its own options

A benchmark is a module here with a ``main()`` that parses ``sys.argv`` itself. They are never
timed assertions in the test suite (docs/architecture.md); ``make bench`` runs them.
"""

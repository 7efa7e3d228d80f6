"""Benchmarks of the sgt library against River (and CapyMOA when installed); not part of the pytest run.

Run them with ``python -m tests.bench`` (``--quick`` for a short smoke run); the figures and the
commands that produced them are recorded in BENCHMARKS.md.
"""

"""Runs the cache conformance suite (tests/cache_conformance.py) against TFP's own cache
("upstream" mode) and this package's ("fixed" mode), in every global-era substrate here."""
from cache_conformance import *  # noqa: F401,F403  (tests and fixtures)

"""Hypothesis profiles: ``default`` for CI, ``long`` (MYSQL_CDC_HYPOTHESIS_PROFILE=long) for a deeper run,
``mutate`` for property_tests/mutate.py (no shrinking)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

# the private servers of the integration tests (started once per run, stopped at its end)
from tests.conftest import _stop_servers, server  # noqa: F401

settings.register_profile("default", deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("mutate", deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow],
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # property_tests/mutate.py
settings.register_profile("long", deadline=None, max_examples=20000, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("MYSQL_CDC_HYPOTHESIS_PROFILE", "default"))

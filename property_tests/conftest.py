"""Hypothesis profiles: ``default`` for CI, ``long`` (MYSQL_CDC_HYPOTHESIS_PROFILE=long) for a deeper run."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", deadline=None, max_examples=20000, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("MYSQL_CDC_HYPOTHESIS_PROFILE", "default"))

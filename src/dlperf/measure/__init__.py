"""Measurement: the one timer, statistics, system readings (standard library only: workers import these)."""

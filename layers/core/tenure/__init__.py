"""Tenure: fenced, time-limited leases on units of work."""

__version__ = "0.1.0"

"""Entry point shared by the sweeper Lambda and the local stack's loop."""

from tenure.core.sweeper import SweepReport, sweep_once

__all__ = ["SweepReport", "sweep_once"]

"""The benches behind `tenure bench …`: cost per lease, claim contention, cold start."""

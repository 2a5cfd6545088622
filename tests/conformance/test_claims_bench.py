"""`tenure bench claims` runs end to end on DynamoDB Local: its table made, its leases filed and
claimed by racing claimers, and its audit of the table finding each lease claimed once. (Its
full run, 2,000 leases under 32 claimers, takes minutes; a small one proves the command works.)"""

from __future__ import annotations

from tenure_cli.bench import claims
from tenure_cli.local.engines import DynamoDBLocal


def test_the_claims_bench_claims_every_lease_once(ddb_local: DynamoDBLocal) -> None:
    result = claims.run(claimers=4, leases=24, endpoint=ddb_local.endpoint)
    assert result["claims"] == 24
    assert result["double_claims"] == 0 and result["left_unclaimed"] == 0
    assert result["write_units_per_claim"] > 0 and result["read_units_per_claim"] > 0

"""The detail store contract (tests/conformance/contract_detail.py) on the in-memory fake."""

from __future__ import annotations

from tests.conformance.contract_detail import DetailContract
from tests.unit.test_store_contract_fake import make_rig

__all__ = ["make_rig"]


class TestDetailContractOnTheFake(DetailContract):
    pass

"""The detail store contract (tests/conformance/contract_detail.py) on moto."""

from __future__ import annotations

from tests.aws.test_store_contract_moto import make_rig
from tests.conformance.contract_detail import DetailContract

__all__ = ["make_rig"]


class TestDetailContractOnMoto(DetailContract):
    pass

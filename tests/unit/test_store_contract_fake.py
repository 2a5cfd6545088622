"""The store contract (tests/conformance/contract.py) on the in-memory fake the unit tier uses."""

from __future__ import annotations

import pytest
from tenure.app.rows import Rows
from tenure.app.tenure import compose
from tenure.wiring import ManualClock, RandomIds, SystemClock

from tests.conformance.autonomy_contract import AutonomyContract
from tests.conformance.contract import ContractRig, MakeRig, StoreContract
from tests.conformance.flow_contract import FlowContract
from tests.conformance.graph_contract import GraphContract
from tests.conformance.pool_contract import PoolStoreContract, RequestStoreContract
from tests.conformance.task_list_contract import TaskListContract
from tests.unit.fake_store import FakeStore


@pytest.fixture
def make_rig() -> MakeRig:
    def make() -> ContractRig:
        clock = ManualClock(SystemClock().now_ms())
        store = FakeStore(clock)
        svc = compose(Rows.of(store, store), clock, RandomIds())
        store.reactor = svc.reactions.react_to_rows  # the stream's reactions, inside commit
        return ContractRig(
            store=store,
            clock=clock,
            svc=svc,
            drain=lambda: 0,  # the fake plays the reactor inside commit
            records=None,
        )

    return make


class TestStoreContractOnTheFake(StoreContract):
    pass


class TestPoolStoreContractOnTheFake(PoolStoreContract):
    pass


class TestGraphContractOnTheFake(GraphContract):
    pass


class TestAutonomyContractOnTheFake(AutonomyContract):
    pass


class TestTaskListContractOnTheFake(TaskListContract):
    pass


class TestRequestStoreContractOnTheFake(RequestStoreContract):
    pass


class TestFlowContractOnTheFake(FlowContract):
    pass

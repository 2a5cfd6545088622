"""The store contract (contract.py) on DynamoDB Local, through the shared `rig` fixture, and
the sweeper row as an earlier release wrote it."""

from __future__ import annotations

import boto3
import pytest
from tenure.app.ports import SweeperState
from tenure.store import codec, keys
from tenure_cli.local.engines import DynamoDBLocal

from tests.conformance.autonomy_contract import AutonomyContract
from tests.conformance.contract import ContractRig, MakeRig, StoreContract, read_stream
from tests.conformance.flow_contract import FlowContract
from tests.conformance.graph_contract import GraphContract
from tests.conformance.pool_contract import PoolStoreContract, RequestStoreContract
from tests.conformance.task_list_contract import TaskListContract
from tests.conftest import Rig


@pytest.fixture
def make_rig(rig: Rig, ddb_local: DynamoDBLocal) -> MakeRig:
    ddb = boto3.client("dynamodb", endpoint_url=ddb_local.endpoint, region_name="us-east-1")
    streams = boto3.client(
        "dynamodbstreams", endpoint_url=ddb_local.endpoint, region_name="us-east-1"
    )

    def make() -> ContractRig:  # one rig per test: the fixture's fresh table
        return ContractRig(
            store=rig.store,
            clock=rig.clock,
            svc=rig.svc,
            drain=rig.pump.drain,
            records=lambda: read_stream(ddb, streams, rig.store.table),
        )

    return make


class TestStoreContractOnDynamoDBLocal(StoreContract):
    pass


class TestPoolStoreContractOnDynamoDBLocal(PoolStoreContract):
    pass


class TestGraphContractOnDynamoDBLocal(GraphContract):
    pass


class TestAutonomyContractOnDynamoDBLocal(AutonomyContract):
    pass


class TestTaskListContractOnDynamoDBLocal(TaskListContract):
    pass


class TestRequestStoreContractOnDynamoDBLocal(RequestStoreContract):
    pass


class TestFlowContractOnDynamoDBLocal(FlowContract):
    pass


def test_a_sweeper_row_kept_before_absence_pushes_reads_with_none_pending(rig: Rig) -> None:
    row = {**keys.SWEEPER_KEY, "last_pass_at": 1_000, "holds": {"alpha": 9_000}}
    rig.store.client.put_item(TableName=rig.store.table, Item=codec.dump(row))
    assert rig.store.get_sweeper_state() == SweeperState(1_000, {"alpha": 9_000})

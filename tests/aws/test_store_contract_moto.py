"""The store contract (tests/conformance/contract.py) on moto, in-process and single-threaded."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3
import pytest
from tenure.app.rows import Rows
from tenure.app.tenure import compose
from tenure.store.dynamo import OneTable
from tenure.wiring import ManualClock, RandomIds, SystemClock
from tenure_cli.local.streams import StreamPump

from tests.aws.mocked import mocked_aws
from tests.conformance.autonomy_contract import AutonomyContract
from tests.conformance.contract import ContractRig, MakeRig, StoreContract, read_stream
from tests.conformance.flow_contract import FlowContract
from tests.conformance.graph_contract import GraphContract
from tests.conformance.pool_contract import PoolStoreContract
from tests.conformance.task_list_contract import TaskListContract

REGION = "us-east-1"


@pytest.fixture
def make_rig(monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeRig]:
    # botocore sends DynamoDB Streams calls that name a stream ARN to the account-based host
    # (<account>.streams-ddb.<region>...), which moto does not route; the classic host works,
    # so the StreamPump (and with it the reactor) runs unchanged under mock_aws.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mocked_aws():

        def make() -> ContractRig:
            table = f"t{uuid.uuid4().hex[:12]}"
            ddb = boto3.client("dynamodb", region_name=REGION)
            store = OneTable(ddb, table)
            store.create_table()
            clock = ManualClock(SystemClock().now_ms())
            pump = StreamPump(None, table, store, region=REGION)  # type: ignore[arg-type]
            streams = boto3.client("dynamodbstreams", region_name=REGION)
            return ContractRig(
                store=store,
                clock=clock,
                svc=compose(Rows.of(store, store), clock, RandomIds()),
                drain=pump.drain,
                records=lambda: read_stream(ddb, streams, table),
            )

        yield make


class TestStoreContractOnMoto(StoreContract):
    pass


class TestPoolStoreContractOnMoto(PoolStoreContract):
    pass


class TestGraphContractOnMoto(GraphContract):
    # The largest filing and the patches that swap all its blockers write some 300 items
    # through moto's one thread: 26 s alone, 50 s beside the other tiers. What it proves is
    # the table's own transaction limit, which DynamoDB Local enforces and moto need not.
    test_as_many_open_blockers_as_a_task_may_have_fit_its_filing_and_a_patch = None


class TestAutonomyContractOnMoto(AutonomyContract):
    pass


class TestTaskListContractOnMoto(TaskListContract):
    pass


class TestFlowContractOnMoto(FlowContract):
    pass

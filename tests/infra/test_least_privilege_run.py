"""The whole run's AWS calls against the template's roles, once every tier has run.

The end-to-end and browser tiers drive the local stack, whose processes the in-pytest check
(test_least_privilege.py) never sees; `make test` has every process of each of its pytest runs
append the calls it notes to a file under TENURE_AWS_CALLS_RUN (tests/infra/stack_calls), and
runs this module last. Two things are held here:

* every call the stack's processes made is granted by its function's role, as the in-pytest
  check holds the calls made inside pytest; and every call of the other tiers' processes too,
  since those run in several pytest processes at once and the in-pytest check sees only its own;
* every grant of a function's own statements is used by some call of the whole run, or is in
  UNUSED_GRANTS with the reason it stays: a role grants what its code calls and nothing else.

Outside `make test` (no TENURE_AWS_CALLS_RUN) there is nothing to judge and the module skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.infra import aws_calls, least_privilege
from tests.infra.aws_calls import Call
from tests.infra.least_privilege import Stack
from tests.infra.test_least_privilege import NOT_NEEDED, simulator, stack

__all__ = ["simulator", "stack"]

RUN = os.environ.get("TENURE_AWS_CALLS_RUN")
pytestmark = pytest.mark.skipif(not RUN, reason="judges a whole `make test` run's calls")

# The functions the stack tiers drive through the local stack: a recording that misses one
# has stopped recording, which must fail rather than pass on nothing.
DRIVEN_BY_THE_STACK = {
    "ApiFunction",
    "AuthorizerFunction",
    "ClaimFunction",
    "ReactorFunction",
    "SweeperFunction",
    "WorkerFunction",
}

# "Function: action on resource pattern" (resolved in the check's fake account) -> why the grant
# stays though no call of a whole run uses it.
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/tenure-LeaseTable"
SHARED_COMMIT = (
    "the store's one commit path puts a ConditionCheck in a transaction whenever a change "
    "checks a job's lease or a graph row (store/dynamo/commit.py); this function's code commits "
    "changes, and none the run drove carried such a check"
)
UNTESTED_READ = (
    "the function's code reads through the shared store, whose reads of several rows are "
    "one BatchGetItem and whose listings Query the table or an index; no path of it the run "
    "drove did, and refusing it would fail that path only on AWS"
)
UNUSED_GRANTS: dict[str, str] = {
    "ApiFunction: s3:DeleteObject on arn:aws:s3:::tenure-AttachmentsBucket/leases/*": (
        "the attachments store deletes what a refused or replaced upload left under leases/; "
        "no test of the run reaches a refusal after the copy"
    ),
    f"ClaimFunction: dynamodb:ConditionCheckItem on {TABLE}": SHARED_COMMIT,
    f"InboundFunction: dynamodb:ConditionCheckItem on {TABLE}": SHARED_COMMIT,
    f"ReactorFunction: dynamodb:ConditionCheckItem on {TABLE}": SHARED_COMMIT,
    f"SchedulerFunction: dynamodb:ConditionCheckItem on {TABLE}": SHARED_COMMIT,
    f"SweeperFunction: dynamodb:ConditionCheckItem on {TABLE}": SHARED_COMMIT,
    f"InboundFunction: dynamodb:Query on {TABLE}/index/*": UNTESTED_READ,
    f"ReactorFunction: dynamodb:BatchGetItem on {TABLE}": UNTESTED_READ,
    f"ReactorFunction: dynamodb:Query on {TABLE}/index/*": UNTESTED_READ,
    f"SchedulerFunction: dynamodb:BatchGetItem on {TABLE}": UNTESTED_READ,
    f"SchedulerFunction: dynamodb:Query on {TABLE}": UNTESTED_READ,
    f"SchedulerFunction: dynamodb:Query on {TABLE}/index/*": UNTESTED_READ,
    # Lambda's on-failure destination sends a failed batch's record to the dead-letter queue
    # with the function's own role: the function's code never calls it, Lambda does.
    "ReactorFunction: sqs:SendMessage on "
    "arn:aws:sqs:us-east-1:123456789012:tenure-ReactorDeadLetterQueue": (
        "Lambda's on-failure destination sends with the function's role"
    ),
    "ReactorFunction: sqs:SendMessage* on "
    "arn:aws:sqs:us-east-1:123456789012:tenure-ReactorDeadLetterQueue": (
        "SAM's SQSSendMessagePolicy grants the batch form with it, for the same destination"
    ),
}


def _calls(name: str) -> dict[Call, str]:
    path = Path(str(RUN)) / name
    return aws_calls.read(path) if path.exists() else {}


def _refused(simulator: Path, stack: Stack, made: dict[Call, str]) -> list[str]:
    verdicts = least_privilege.decide(simulator, stack, made)
    return [
        f"{call.describe()} -> {request.resource}: {decision.result} {decision.why or ''}"
        f" (first in {made[call]})"
        for call, request, decision in verdicts.refused()
        if f"{call.function}: {call.action}" not in NOT_NEEDED
    ]


def test_every_call_the_local_stack_made_is_granted_by_its_role(
    simulator: Path, stack: Stack
) -> None:
    made = _calls("stack.jsonl")
    driven = {call.function for call in made}
    assert driven >= DRIVEN_BY_THE_STACK, f"no call noted of {DRIVEN_BY_THE_STACK - driven}"
    refused = _refused(simulator, stack, made)
    assert not refused, "calls the template's roles would refuse on AWS:\n" + "\n".join(refused)


def test_every_call_the_other_tiers_made_is_granted_by_its_role(
    simulator: Path, stack: Stack
) -> None:
    """The other tiers run in several pytest processes at once (pytest-xdist), and the
    in-pytest check judges only the calls of the process it runs in: the file holds them all."""
    made = _calls("rest.jsonl")
    assert made, "the other tiers noted no call: the recording stopped"
    refused = _refused(simulator, stack, made)
    assert not refused, "calls the template's roles would refuse on AWS:\n" + "\n".join(refused)


def test_every_grant_is_used_by_a_call_of_the_run_or_listed_with_its_reason(
    simulator: Path, stack: Stack
) -> None:
    made = {**_calls("rest.jsonl"), **_calls("stack.jsonl")}
    verdicts = least_privilege.decide(simulator, stack, made)
    unused = {
        f"{g.function}: {g.action} on {g.resource}" for g in least_privilege.unused(stack, verdicts)
    }
    assert not unused - set(UNUSED_GRANTS), "grants no call of the run used:\n" + "\n".join(
        sorted(unused - set(UNUSED_GRANTS))
    )
    assert not set(UNUSED_GRANTS) - unused, "listed as unused, but a call used them: " + str(
        sorted(set(UNUSED_GRANTS) - unused)
    )

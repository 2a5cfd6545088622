"""A refusal names only what the caller sent and the caller's own space: never which space a
pool, a task or a lease it named belongs to. Otherwise a member of one space learns the other
spaces' names, and which of their ids exist, from error messages."""

from __future__ import annotations

import pytest
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Pool
from tenure.domain.states import PoolKind

from tests.unit.support import ADMIN, MEMBER, SPACE, Rig, as_lease

OTHER = "SECRETSPACE"


@pytest.fixture
def other(rig: Rig) -> Rig:
    rig.svc.spaces.create_space(ADMIN, OTHER, "Not yours", None)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="their-pool", space=OTHER, kind=PoolKind.COMMAND, created_at=0)
    )
    return rig


def _file(rig: Rig, **kw: object) -> None:
    rig.svc.filing.create_task(MEMBER, SPACE, "t", None, None, {}, **kw)  # type: ignore[arg-type]


def test_a_pool_of_another_space_is_refused_without_naming_that_space(other: Rig) -> None:
    with pytest.raises(ValidationFailed) as refused:
        _file(other, pool="their-pool", max_attempts=None)
    assert OTHER not in str(refused.value)
    assert str(refused.value) == "pool: 'their-pool' is not a pool of space 'OPS'"


def test_a_task_of_another_space_reads_as_one_that_does_not_exist(other: Rig) -> None:
    theirs, _ = other.svc.filing.create_task(
        ADMIN, OTHER, "theirs", None, None, {}, "their-pool", None
    )
    answers = []
    for task_id in (theirs.id, "task_nowhere"):
        with pytest.raises(ValidationFailed) as refused:
            _file(other, pool=None, max_attempts=None, links=TaskLinks(depends_on=(task_id,)))
        answers.append(str(refused.value).replace(task_id, "ID"))
    assert OTHER not in answers[0]
    assert answers[0] == answers[1], "another space's task is not told apart from none"


def test_a_lease_token_forcing_another_spaces_lease_is_not_told_that_space(other: Rig) -> None:
    other.svc.instance.update_instance(ADMIN, {"allow_agent_force": True})
    mine = other.claimed("w1")
    other.svc.filing.create_task(ADMIN, OTHER, "theirs", None, None, {}, "their-pool", None)
    theirs = other.claim("w2", pool="their-pool")
    rows = other.svc.force.bulk_release(as_lease(mine.lease.id), [theirs.lease.id], "x")
    assert not rows[0].ok and rows[0].code == "forbidden"
    assert OTHER not in (rows[0].message or "")

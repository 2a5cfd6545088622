"""End-to-end fixtures: one session stack (tests/conftest.py), a recording client, own spaces."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import LocalStack
from tests.e2e.support import Api, Recorder, World, suffix

# Held leases that stay healthy all session. The sweeper holds back a pass that would expire
# most of the held leases at once (it looks like the service's own fault, not the workers'),
# so the expiry tests run beside a healthy fleet, as they would in production.
BALLAST_LEASES = 6


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "run_last: runs after the other e2e tests")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable sort: tests that read what the whole session left behind go last.
    items.sort(key=lambda item: item.get_closest_marker("run_last") is not None)


@pytest.fixture(scope="session")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="session")
def api(local_stack: LocalStack, recorder: Recorder) -> Iterator[Api]:
    api = Api(local_stack.base, local_stack.admin_token, recorder)
    with api.admin() as admin:
        world = World(api, admin, f"BALLAST_{suffix()}")
        r = admin.post("/spaces", json={"key": world.space, "name": "healthy fleet"})
        assert r.status_code == 201, r.text
        pool = world.pool(toleration_seconds=3600)["name"]
        with api.client(world.worker_token([pool])) as worker:
            for n in range(BALLAST_LEASES):
                world.task(pool=pool)
                world.claim(worker, pool, worker_id=f"ballast-{n}")
    yield api


@pytest.fixture
def world(api: Api) -> Iterator[World]:
    with api.admin() as admin:
        key = f"E{suffix()}"
        r = admin.post("/spaces", json={"key": key, "name": f"e2e {key}"})
        assert r.status_code == 201, r.text
        yield World(api, admin, key)

"""On the local stack, which migrates its table at every start: GET /tokens says nothing about
an old schema, and a token made over HTTP is on the instance's timeline with who made it."""

from __future__ import annotations

from tests.e2e.support import World, suffix


def test_a_started_stack_is_at_this_releases_schema_and_records_who_made_a_token(
    world: World,
) -> None:
    r = world.admin.get("/tokens")
    assert r.status_code == 200, r.text
    assert "tenure-schema" not in {h.lower() for h in r.headers}
    name = f"tok-{suffix().lower()}"
    made = world.admin.post("/tokens", json={"name": name, "kind": "operator"})
    assert made.status_code == 201, made.text
    events = world.admin.get("/instance/activity", params={"limit": 500}).json()["events"]
    mine = [e for e in events if e["data"].get("token_id") == made.json()["id"]]
    assert [e["type"] for e in mine] == ["token.created"]
    assert made.json()["token"] not in str(events)

"""The route table's matcher (api/routes.py:match) compiles a rule's pattern only when a
request could match it (same method, as many slashes), so a function compiles the patterns
of the routes it serves and no others (the worker function serves ten of ~80). It must route
every path exactly as matching every compiled pattern in order did: literal routes before
parameterised ones, a parameter one non-empty segment, a trailing newline as `$` admits it,
and nothing else."""

from __future__ import annotations

import re

import pytest
from tenure.api import routes
from tenure.api.routes import ROUTES, Match, match

# The matcher as it was: every rule's pattern compiled, tried in the table's order.
EVERYWHERE = [
    (method, rule, re.compile("^" + re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", re.escape(rule)) + "$"))
    for method, rule in sorted(ROUTES, key=lambda key: "<" in key[1])
]


def _everywhere(method: str, path: str) -> Match | None:
    for route_method, rule, pattern in EVERYWHERE:
        found = pattern.match(path)
        if route_method == method and found:
            return Match(method, rule, ROUTES[(method, rule)], found.groupdict())
    return None


def _paths() -> list[str]:
    """Each rule with its parameters filled in several ways, and paths near each."""
    fills = ["x", "bulk", "%2F", "x\n"]
    found = {"", "/", "/api", "/api/v1", "/api/v1/", "//", "/api/v1//heartbeat", "/board/"}
    for _, rule in ROUTES:
        for fill in fills:
            path = re.sub(r"<\w+>", fill, rule)
            found |= {path, path + "/", path + "\n", path[:-1], "/prod" + path, path + "/x"}
        found.add(re.sub(r"<\w+>", "", rule))  # an empty parameter
    return sorted(found)


METHODS = ("GET", "POST", "PATCH", "DELETE", "PUT")


def test_every_path_routes_as_every_pattern_compiled_did() -> None:
    differ = [
        (method, path)
        for path in _paths()
        for method in METHODS
        if match(method, path) != _everywhere(method, path)
    ]
    assert differ == []
    assert match("POST", "/api/v1/leases/bulk/release") == Match(
        "POST", "/api/v1/leases/bulk/release", ROUTES[("POST", "/api/v1/leases/bulk/release")], {}
    ), "a literal route before the release of a lease called bulk"


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/api/v1/leases/l1/heartbeat"), ("POST", "/api/v1/pools/p/claim")],
)
def test_a_worker_request_compiles_only_the_patterns_it_could_match(method: str, path: str) -> None:
    routes._pattern.cache_clear()
    assert match(method, path) is not None
    compiled = routes._pattern.cache_info().currsize
    # Same method, as many slashes: a handful, not the table's ~80.
    assert 0 < compiled <= 12 < len(ROUTES)

"""Dependencies point one way: `triggers | api → wiring → store → app → domain`, config,
tracing and records at the side; the worker SDK stands on the standard library alone; nothing in the
service imports the CLI or the SDK; and no module imports itself back through others.

Read from the source (tests/infra/imports.py), imports inside functions included: a lazy
import the wrong way is still a dependency the wrong way."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.infra.imports import STDLIB, Import, all_imports, cycles

# The service's rooms: the tenure modules each room's modules may import. config and tracing
# read the environment and import nothing of the service; records (how a frozen class is
# made) imports nothing of it either, and every room may use it; `tenure` is the empty package.
MAY_IMPORT: dict[str, set[str]] = {
    "domain": {"domain", "records"},
    "app": {"app", "domain", "records"},
    "store": {"store", "app", "domain", "config", "records"},
    "wiring": {"store", "app", "domain", "config", "records"},
    "api": {"api", "wiring", "store", "app", "domain", "config", "tracing", "records"},
    "triggers": {"triggers", "wiring", "store", "app", "domain", "config", "tracing", "records"},
    "config": {"records"},
    "tracing": set(),
    "records": set(),
}
# What the pure core (domain, app) never imports: AWS and its adapters, the network, the
# environment, and the clock and randomness, which are injected.
NOT_IN_THE_CORE = {
    "boto3",
    "botocore",
    "aws_lambda_powertools",
    "mcp",
    "anyio",
    "socket",
    "urllib",
    "http",
    "os",
    "time",
    "random",
    "secrets",
    "uuid",
}
# Violations inside app/ and domain/, which are being rewritten elsewhere: each is a line as
# the tests below print it, so that whoever fixes one deletes its line. Empty is the goal; a
# line that no longer matches anything fails too, so the list can only shrink.
KNOWN_INSIDE_APP_AND_DOMAIN: set[str] = set()


def room(module: str) -> str | None:
    """`tenure.app.leases.claims` → "app"; None outside the service."""
    parts = module.split(".")
    if parts[0] != "tenure":
        return None
    return parts[1] if len(parts) > 1 else "tenure"


def _line(imp: Import) -> str:
    # No line number: the allow-list must not go stale when a file above the import changes.
    return f"{imp.source} imports {imp.target}"


def _where(found: list[str], imports: list[Import]) -> str:
    lines = {_line(imp): imp.line for imp in imports}
    return "\n".join(f"{f} (line {lines[f]})" if f in lines else f for f in sorted(found))


def _inside_app_and_domain(line: str) -> bool:
    """An import line whose importer is in app/ or domain/, or a cycle all of whose modules
    are."""
    modules = line.removeprefix("cycle: ").split(" ↔ ") if line.startswith("cycle: ") else []
    return all(room(m) in ("app", "domain") for m in modules or [line.split()[0]])


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports()


def _strict(found: list[str]) -> list[str]:
    """The violations the allow-list does not name."""
    return [f for f in found if f not in KNOWN_INSIDE_APP_AND_DOMAIN]


def _direction_violations(imports: list[Import]) -> list[str]:
    found = []
    for imp in imports:
        source, target = room(imp.source), room(imp.target)
        if source is None or source == "tenure":
            continue
        assert source in MAY_IMPORT, f"{imp.source}: a room the table does not name"
        wrong_room = target not in (None, "tenure") and target not in MAY_IMPORT[source]
        impure = source in ("app", "domain") and imp.top in NOT_IN_THE_CORE
        if wrong_room or impure:
            found.append(_line(imp))
    return sorted(set(found))


def _cycle_violations(imports: list[Import]) -> list[str]:
    """Cycles of imports that run when a module loads, within one group: each room of the
    service, the SDK, the CLI."""
    edges: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for imp in imports:
        if not imp.at_load:
            continue
        group = f"tenure.{room(imp.source)}" if room(imp.source) else imp.source.split(".")[0]
        target_group = (
            f"tenure.{room(imp.target)}" if room(imp.target) else imp.target.split(".")[0]
        )
        if group == target_group:
            edges[group].add((imp.source, imp.target))
    return [
        "cycle: " + " ↔ ".join(members)
        for group in sorted(edges)
        for members in cycles(edges[group])
    ]


def test_each_room_of_the_service_imports_only_the_rooms_beneath_it(
    imports: list[Import],
) -> None:
    strict = _strict(_direction_violations(imports))
    assert not strict, "imports running the wrong way:\n" + _where(strict, imports)


def test_no_module_imports_itself_back_through_others(imports: list[Import]) -> None:
    strict = _strict(_cycle_violations(imports))
    assert not strict, "import cycles:\n" + "\n".join(strict)


def test_the_allow_list_names_only_violations_inside_app_and_domain_that_still_exist(
    imports: list[Import],
) -> None:
    found = set(_direction_violations(imports)) | set(_cycle_violations(imports))
    stale = KNOWN_INSIDE_APP_AND_DOMAIN - found
    assert not stale, "fixed: delete these lines from KNOWN_INSIDE_APP_AND_DOMAIN:\n" + "\n".join(
        sorted(stale)
    )
    outside = [line for line in KNOWN_INSIDE_APP_AND_DOMAIN if not _inside_app_and_domain(line)]
    assert not outside, f"only app/ and domain/ may be listed: {outside}"


def test_a_function_entry_point_imports_only_the_driving_adapters(imports: list[Import]) -> None:
    wrong = [
        _line(imp)
        for imp in imports
        if imp.source.startswith("functions.")
        and imp.top == "tenure"
        and room(imp.target) not in ("api", "triggers", "tracing")
    ]
    assert not wrong, wrong


def test_the_service_never_imports_the_cli_or_the_worker_sdk(imports: list[Import]) -> None:
    wrong = [
        _line(imp)
        for imp in imports
        if imp.source.split(".")[0] in ("tenure", "functions")
        and imp.top in ("tenure_cli", "tenure_worker")
    ]
    assert not wrong, wrong


def test_the_worker_sdk_imports_the_standard_library_and_itself_only(
    imports: list[Import],
) -> None:
    wrong = [
        _line(imp)
        for imp in imports
        if imp.source.split(".")[0] == "tenure_worker"
        and imp.top != "tenure_worker"
        and imp.top not in STDLIB
    ]
    assert not wrong, wrong


# What a CLI command module may import of the CLI: what every command shares (errors, output,
# clients), what every list shares (paging), and how a profile and a running local stack's
# record are read. Never another command module, the local stack or the benches.
CLI_SHARED = (
    "tenure_cli.common",
    "tenure_cli.listing",
    "tenure_cli.profiles",
    "tenure_cli.stack_record",
)


def test_a_cli_command_module_imports_only_the_shared_helpers_and_the_sdk(
    imports: list[Import],
) -> None:
    wrong = [
        _line(imp)
        for imp in imports
        if imp.source.startswith("tenure_cli.commands.")
        and imp.top not in STDLIB
        and imp.top != "tenure_worker"
        and imp.target not in CLI_SHARED
    ]
    assert not wrong, wrong


def test_the_cli_has_no_import_cycle_even_through_imports_inside_functions(
    imports: list[Import],
) -> None:
    edges = {
        (imp.source, imp.target)
        for imp in imports
        if not imp.typing_only
        and imp.source.split(".")[0] in ("tenure_cli", "tenure_worker")
        and imp.top == imp.source.split(".")[0]
    }
    assert not cycles(edges), cycles(edges)


def test_the_checks_see_the_imports_they_judge(imports: list[Import]) -> None:
    # A reader that missed imports would pass everything: it must find known edges.
    seen = {(imp.source, imp.target) for imp in imports}
    assert ("tenure.wiring", "tenure.store.dynamo") in seen
    assert ("tenure_cli.commands.worker", "tenure_cli.common") in seen
    lazy = {(imp.source, imp.target) for imp in imports if not imp.at_load}
    assert ("tenure_cli.main", "tenure_cli.local.stack") in lazy
    assert cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]

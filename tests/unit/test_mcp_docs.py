"""The MCP tools as the docs tell them, against the tools the server registers: every tool in
docs/mcp.md's table with its audience and inputs, and in docs/api.md's table under each kind
of token offered it, so neither table can leave a tool out or keep one that is gone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tenure.api.mcp import tools as t

DOCS = Path(__file__).resolve().parents[2] / "docs"
# A tool named in a code span, with its inputs when the span shows them: `name {a, b?}`.
NAMED = re.compile(r"`([a-z_]+)(?: \{([^`]*)\})?`")
# Names shaped like a tool's (`leases_…`, `lease_…`, `task_…`, `events_…`), registered or not.
TOOL_SHAPED = re.compile(r"^(?:leases?|task|events)_[a-z_]+$")
# api.md's rows, by how each starts, and the audiences each covers.
API_ROWS = {
    "| operator, `read` |": "operator:read",
    "| operator, `member`/`admin` |": "operator:member",
    "| lease token |": "lease",
    "| worker (pool) token |": "worker",
}


def _section(path: Path, heading: str) -> list[str]:
    """The lines of `heading`'s section, up to the next heading of its level or higher."""
    lines = path.read_text().splitlines()
    start = lines.index(heading)
    level = heading.split(" ")[0]
    rest = lines[start + 1 :]
    end = next(
        (i for i, x in enumerate(rest) if x.startswith("#") and x.split(" ")[0] <= level),
        len(rest),
    )
    return rest[:end]


def inputs_of(tool: t.Tool) -> set[str]:
    """The tool's inputs as the docs write them: a name, `?` when it is optional."""
    schema = tool.input_schema()
    required = set(schema.get("required", []))
    return {name + ("" if name in required else "?") for name in schema["properties"]}


def written(inputs: str) -> set[str]:
    """`space_key, state?, limit?=50 (≤200)` → {space_key, state?, limit?}."""
    found = (re.match(r"([a-z_]+\??)", item.strip()) for item in inputs.split(","))
    return {m.group(1) for m in found if m}


def offered_to(audience: str) -> set[str]:
    return {tool.name for tool in t.TOOLS if audience in tool.audience}


def mcp_rows() -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in _section(DOCS / "mcp.md", "## The tools"):
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            name = cells[0].strip("`")
            assert name not in rows, f"{name} twice in mcp.md's table"
            rows[name] = cells
    return rows


def api_rows() -> dict[str, str]:
    section = _section(DOCS / "api.md", "## MCP: the lease tools for agents")
    rows = {}
    for start, audience in API_ROWS.items():
        (row,) = [x for x in section if x.startswith(start)]
        rows[audience] = row
    return rows


def test_mcp_md_has_one_row_for_every_registered_tool_and_no_other() -> None:
    assert set(mcp_rows()) == set(t.BY_NAME)


@pytest.mark.parametrize("name", sorted(t.BY_NAME))
def test_mcp_md_tells_each_tools_audience_inputs_and_purpose(name: str) -> None:
    tool = t.BY_NAME[name]
    who, inputs, does = mcp_rows()[name][1:]
    assert set(re.findall(r"`([a-z:]+)`", who)) == set(tool.audience)
    assert inputs.startswith("`{") and inputs.endswith("}`"), inputs
    assert written(inputs.strip("`")[1:-1]) == inputs_of(tool)
    assert len(does.split()) >= 3, does


@pytest.mark.parametrize("audience", sorted(API_ROWS.values()))
def test_api_md_names_each_tool_under_every_token_offered_it(audience: str) -> None:
    rows = api_rows()
    row = rows[audience]
    if audience == "operator:member":  # "the same plus …": what a reader sees, and more
        row += rows["operator:read"]
    # A tool a row says the token never gets ("never `leases_cancel`") must not be offered.
    never = set(re.findall(r"never `([a-z_]+)`", row))
    assert not never & offered_to(audience), never
    named = {m.group(1) for m in NAMED.finditer(row)} - never
    tools = {name for name in named if TOOL_SHAPED.match(name)}
    expected = offered_to(audience)
    if audience == "operator:member":
        expected |= offered_to("operator:read")
    assert tools == expected


def test_api_md_shows_every_tools_inputs_as_registered() -> None:
    shown: dict[str, list[set[str]]] = {}
    for row in api_rows().values():
        for m in NAMED.finditer(row):
            if m.group(2) is not None:
                shown.setdefault(m.group(1), []).append(written(m.group(2)))
    assert set(shown) == set(t.BY_NAME)
    for name, each in shown.items():
        for inputs in each:
            assert inputs == inputs_of(t.BY_NAME[name]), name

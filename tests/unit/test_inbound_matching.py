"""An inbound rule's match against event data, and {subject}/{from} templating."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.domain.rules.matching import InvalidMatch, Match, match_holds, render_template

MAIL: dict[str, Any] = {
    "from": "Maria.Okafor@Partners.Example.com",
    "to": ["ops@inbound.tenure.example", "accounts@tenure.example"],
    "cc": ["oncall@tenure.example"],
    "subject": "Nightly EXPORT failed on host db-7",
}


@pytest.mark.parametrize(
    ("match", "holds"),
    [
        (None, True),
        ({}, True),
        ({"to": "ops@inbound.tenure.example"}, True),
        ({"to": "OPS@Inbound.Tenure.Example"}, True),
        ({"to": "oncall@tenure.example"}, True),  # any recipient: cc counts
        ({"to": "ops@inbound.tenure"}, False),  # exact, not a prefix
        ({"to": "ops"}, False),
        ({"to": "inbound.tenure.example"}, False),
        ({"from": "maria.okafor@partners.example.com"}, True),
        ({"from": "MARIA.OKAFOR@PARTNERS.EXAMPLE.COM"}, True),
        ({"from": "okafor@partners.example.com"}, False),
        ({"from": "@partners.example.com"}, True),
        ({"from": "@PARTNERS.example.com"}, True),
        ({"from": "@example.com"}, False),  # the domain exactly, not a parent domain
        ({"from": "@Partners"}, False),
        ({"subject_contains": "export failed"}, True),
        ({"subject_contains": "EXPORT FAILED ON"}, True),
        ({"subject_contains": "import"}, False),
        ({"to": "ops@inbound.tenure.example", "from": "@partners.example.com"}, True),
        ({"to": "ops@inbound.tenure.example", "from": "@other.example"}, False),
        (
            {
                "to": "accounts@tenure.example",
                "from": "maria.okafor@partners.example.com",
                "subject_contains": "db-7",
            },
            True,
        ),
        ({"to": "accounts@tenure.example", "subject_contains": "db-8"}, False),
    ],
)
def test_match_table(match: dict[str, str] | None, holds: bool) -> None:
    assert match_holds(match, MAIL) is holds


def test_envelope_recipients_count_for_to_so_a_bcc_copy_matches() -> None:
    data = {**MAIL, "to": ["someone@else.example"], "cc": []}
    rule = {"to": "ops@inbound.tenure.example"}
    assert not match_holds(rule, data)
    assert match_holds(rule, data, recipients=["Ops@Inbound.Tenure.Example"])


def test_sender_with_a_display_name_is_read_as_its_address() -> None:
    data = {**MAIL, "from": "Maria Okafor <maria.okafor@partners.example.com>"}
    assert match_holds({"from": "@partners.example.com"}, data)


def test_a_single_to_string_is_a_one_recipient_list() -> None:
    assert match_holds({"to": "a@b.example"}, {"to": "A@B.example"})


@pytest.mark.parametrize(
    "match",
    [
        {"to": "a@b.example"},
        {"from": "a@b.example"},
        {"from": "@b.example"},
        {"subject_contains": "x"},
    ],
)
def test_a_key_whose_field_is_absent_from_the_data_does_not_hold(match: dict[str, str]) -> None:
    assert not match_holds(match, {})


@pytest.mark.parametrize(
    ("match", "field"),
    [
        ("to=a@b", "trigger.match"),
        (["to"], "trigger.match"),
        ({"cc": "a@b.example"}, "trigger.match"),
        ({"to": ""}, "trigger.match.to"),
        ({"to": "   "}, "trigger.match.to"),
        ({"from": 5}, "trigger.match.from"),
        ({"from": "@"}, "trigger.match.from"),
        ({"subject_contains": ["x"]}, "trigger.match.subject_contains"),
    ],
)
def test_an_invalid_match_is_refused_naming_the_field(match: Any, field: str) -> None:
    with pytest.raises(InvalidMatch) as refused:
        Match.from_dict(match)
    assert refused.value.field == field
    assert isinstance(refused.value, ValueError)


def test_null_keys_are_absent_keys() -> None:
    assert Match.from_dict({"to": None, "from": None}) == Match()


@pytest.mark.parametrize(
    ("template", "rendered"),
    [
        ("Mail: {subject}", "Mail: Invoice {from} due"),  # a substituted value is not re-read
        ("{from} wrote", "billing@supplier.example.org wrote"),
        ("{subject} / {subject}", "Invoice {from} due / Invoice {from} due"),
        (
            "{foo} and {0} and {subject!r} and {{subject}}",
            "{foo} and {0} and {subject!r} and {Invoice {from} due}",
        ),
        ("{0.__class__.__mro__} {from.__class__}", "{0.__class__.__mro__} {from.__class__}"),
        ("no placeholders", "no placeholders"),
        ("{Subject} {FROM}", "{Subject} {FROM}"),
        ("", ""),
    ],
)
def test_render_template_replaces_only_subject_and_from(template: str, rendered: str) -> None:
    subject, sender = "Invoice {from} due", "billing@supplier.example.org"
    assert render_template(template, subject=subject, sender=sender) == rendered


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("subject_contains", "s" * 1001),  # a subject is kept to 1,000 characters
        ("from", "a" * 321 + "@x.example"),  # no address is longer than 320 bytes
        ("from", "@" + "d" * 320),
    ],
)
def test_a_match_value_no_mail_or_event_could_hold_is_refused_naming_it(
    key: str, value: str
) -> None:
    # Accepted, it would never match (and a long enough one passed the rule row's 400 KB).
    with pytest.raises(InvalidMatch) as refused:
        Match.from_dict({key: value}).check_bounds()
    assert refused.value.field == f"trigger.match.{key}"
    Match.from_dict({key: value[: 1000 if key == "subject_contains" else 300]}).check_bounds()
    # A rule stored before the bound still reads, and matches nothing it could not before.
    assert Match.from_dict({key: value}).holds({"subject": "x", "from": "a@x.example"}, []) is False

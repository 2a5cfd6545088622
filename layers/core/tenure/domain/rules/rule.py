"""Rules (what mints leases without a person): the entity, its validation, and the ids that
make a firing idempotent."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tenure.domain import documents, fencing
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import MAX_PRIORITY, MIN_PRIORITY
from tenure.domain.rules import schedules
from tenure.domain.rules.addresses import check_address
from tenure.domain.rules.matching import InvalidMatch, Match, render_template
from tenure.domain.rules.occasions import DEFAULT_OVERLAP, latest_missed
from tenure.records import record

EMAIL_TOPIC = "email.received"
# A space holds at most this many rules: listing them is one bounded Query, and an event's
# rules are read from that list (no request reads an unbounded number of items).
MAX_RULES_PER_SPACE = 200
# An inbound event mints at most this many leases (one per matching rule).
MAX_RULES_PER_EVENT = 100
# A page of rules ends before its rules, as JSON, weigh more than this: a Lambda answer carries
# 6 MB, and one rule's row (at most 400 KB) weighs up to about 2.4 MB once each control
# character in it is written as `\u00XX`.
MAX_RULE_PAGE_BYTES = 4 * 1024 * 1024

TOPIC = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")
RULE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,63}$")
SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_TITLE = 500
MAX_TEXT = 65536
MAX_HOURLY_CAP = 100_000
# The scheduling controls a subject may name for what it mints (a task's own: POST /tasks).
CONTROLS = ("priority", "concurrency_key", "max_run_seconds", "expires_in_seconds", "max_attempts")
MAX_CONCURRENCY_KEY = 128
MAX_RUN_SECONDS = 30 * 86_400
MAX_QUEUE_SECONDS = 366 * 86_400
MAX_ATTEMPTS = 100
# Also accepted inside an inbound trigger, beside topic and match.
INBOUND_LIMITS = ("accept_spam", "max_firings_per_hour")


@record
class Rule:
    id: str
    space: str
    name: str
    pool: str
    subject: dict[str, Any]
    trigger: dict[str, Any]
    enabled: bool
    created_at: int
    version: int = 1
    updated_at: int | None = None
    # An email SES judged spam (spamVerdict FAIL) fires this rule only when it accepts spam.
    accept_spam: bool = False
    # Firings past this many in one clock hour mint nothing (None: no limit).
    max_firings_per_hour: int | None = None
    # A scheduled rule's: what an occasion does while the rule's previous lease is open
    # (None: the default, skip), and how far back a resumed service catches up (None: 0).
    overlap: str | None = None
    catchup_window_seconds: int | None = None
    # Written by firings, not by a person: the lease the rule minted last (the previous lease
    # an occasion's overlap is judged against: one read) and the latest scheduled time an
    # invocation handled (epoch ms), where catching up missed occasions starts.
    last_lease_id: str | None = None
    fired_through: int | None = None

    @property
    def kind(self) -> str:
        return "scheduled" if "schedule" in self.trigger else "inbound"

    @property
    def schedule_name(self) -> str | None:
        # The schedule lives in the stack's own group, so the rule id alone names it.
        return self.id if self.kind == "scheduled" else None

    @property
    def overlap_mode(self) -> str:
        return self.overlap or DEFAULT_OVERLAP

    @property
    def catchup_window(self) -> int:
        return self.catchup_window_seconds or 0

    @property
    def topic(self) -> str | None:
        return self.trigger.get("topic") if self.kind == "inbound" else None

    @property
    def match(self) -> Match:
        return Match.from_dict(self.trigger.get("match"))

    @property
    def inbound_tos(self) -> tuple[str | None, ...]:
        """The recipients the rule's match names (lowercased), each indexing it; (None,) for a
        rule that names none."""
        return self.match.to or (None,)

    @property
    def spam_accepted(self) -> bool:
        return self.accept_spam or self.trigger.get("accept_spam") is True

    @property
    def hourly_cap(self) -> int | None:
        cap = self.max_firings_per_hour
        return cap if cap is not None else self.trigger.get("max_firings_per_hour")


# ----------------------------------------------------------------------------- validation


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not RULE_NAME.match(name):
        raise ValidationFailed(
            "name: 1-64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def check_subject(subject: Any) -> dict[str, Any]:
    """The subject as stored: a task (title, body…), a workflow (slug) or the space."""
    if not isinstance(subject, Mapping):
        raise ValidationFailed("subject: must be an object with a kind")
    kind = subject.get("kind")
    # Every kind may say the scheduling controls of the runs it mints (CONTROLS); only a task
    # can wait for approval (the task is what waits).
    allowed = {
        "task": {"kind", "title", "body", "properties", "workflow", *CONTROLS, "requires_approval"},
        "workflow": {"kind", "slug", *CONTROLS},
        "space": {"kind", *CONTROLS},
    }
    if kind not in allowed:
        raise ValidationFailed("subject.kind: must be one of task, workflow, space")
    unknown = sorted(set(subject) - allowed[kind])
    if unknown:
        raise ValidationFailed(f"subject.{unknown[0]}: is not a known field for a {kind} subject")
    out: dict[str, Any] = {"kind": kind}
    priority = subject.get("priority")
    if priority is not None:
        if (
            isinstance(priority, bool)
            or not isinstance(priority, int)
            or not MIN_PRIORITY <= priority <= MAX_PRIORITY
        ):
            raise ValidationFailed(
                f"subject.priority: must be an integer from {MIN_PRIORITY} to {MAX_PRIORITY}"
            )
        out["priority"] = priority
    out.update(_check_controls(subject))
    if "requires_approval" in subject:
        if not isinstance(subject["requires_approval"], bool):
            raise ValidationFailed("subject.requires_approval: must be true or false")
        if subject["requires_approval"]:
            out["requires_approval"] = True
    if kind == "workflow":
        slug = subject.get("slug")
        if not isinstance(slug, str) or not SLUG.match(slug):
            raise ValidationFailed("subject.slug: must be a workflow slug")
        out["slug"] = slug
    if kind == "task":
        title = subject.get("title")
        if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
            raise ValidationFailed(f"subject.title: must be a string of 1-{MAX_TITLE} characters")
        out["title"] = title.strip()
        body = subject.get("body")
        if body is not None:
            if not isinstance(body, str) or len(body) > MAX_TEXT:
                raise ValidationFailed(f"subject.body: must be a string of at most {MAX_TEXT}")
            out["body"] = body
        properties = subject.get("properties")
        if properties is not None:
            if not isinstance(properties, dict):
                raise ValidationFailed("subject.properties: must be an object")
            # As a task's own properties are judged: what a firing copies into the task's row
            # must be what the table keeps (no NaN, no infinity, at most 38 digits).
            wrong = documents.unstorable(properties, "subject.properties")
            if wrong:
                raise ValidationFailed(f"subject.properties: {wrong}")
            out["properties"] = properties
        workflow = subject.get("workflow")
        if workflow is not None:
            if not isinstance(workflow, str) or not SLUG.match(workflow):
                raise ValidationFailed("subject.workflow: must be a workflow slug")
            out["workflow"] = workflow
    fencing.refuse_tokens(out, "subject")
    return out


def _check_controls(subject: Mapping[str, Any]) -> dict[str, Any]:
    """The run controls a subject names, beside priority, as stored (absent: the default)."""
    out: dict[str, Any] = {}
    key = subject.get("concurrency_key")
    if "concurrency_key" in subject:
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_CONCURRENCY_KEY:
            raise ValidationFailed(
                f"subject.concurrency_key: must be a string of 1-{MAX_CONCURRENCY_KEY} characters"
            )
        if _has_control_characters(key):
            raise ValidationFailed("subject.concurrency_key: must not contain control characters")
        out["concurrency_key"] = key
    for name, high in (
        ("max_run_seconds", MAX_RUN_SECONDS),
        ("expires_in_seconds", MAX_QUEUE_SECONDS),
        ("max_attempts", MAX_ATTEMPTS),
    ):
        if name not in subject:
            continue
        value = subject[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise ValidationFailed(f"subject.{name}: must be an integer from 1 to {high}")
        out[name] = value
    return out


def _has_control_characters(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


def render_key(template: str | None, subject: str, sender: str) -> str | None:
    """A minted run's concurrency key: the template with the title's placeholders replaced,
    cut to the key's length; None when nothing is left (an event that carried neither)."""
    if template is None:
        return None
    key = render_template(template, subject=subject, sender=sender).strip()
    key = "".join(" " if _has_control_characters(c) else c for c in key)[:MAX_CONCURRENCY_KEY]
    return key or None


def check_trigger(trigger: Any) -> dict[str, Any]:
    """An inbound `{topic, match?}` or a scheduled `{schedule, timezone?}` trigger, as stored."""
    if not isinstance(trigger, Mapping):
        raise ValidationFailed("trigger: must be an object with a topic or a schedule")
    if "schedule" in trigger:
        unknown = sorted(set(trigger) - {"schedule", "timezone"})
        if unknown:
            raise ValidationFailed(f"trigger.{unknown[0]}: is not a known field of a schedule")
        timezone = trigger.get("timezone", "UTC")
        try:
            schedules.validate(trigger["schedule"], timezone)
        except schedules.InvalidSchedule as bad:
            raise ValidationFailed(f"trigger.{bad.field}: {bad.message}") from None
        return {"schedule": str(trigger["schedule"]).strip(), "timezone": timezone}
    if "topic" not in trigger:
        raise ValidationFailed("trigger: needs a topic (inbound) or a schedule (scheduled)")
    unknown = sorted(set(trigger) - {"topic", "match", *INBOUND_LIMITS})
    if unknown:
        raise ValidationFailed(f"trigger.{unknown[0]}: is not a known field of an inbound trigger")
    topic = trigger["topic"]
    if not isinstance(topic, str) or not TOPIC.match(topic):
        raise ValidationFailed("trigger.topic: 1-128 letters, digits, '.', '_', ':', '/' or '-'")
    out: dict[str, Any] = {"topic": topic}
    raw_match = trigger.get("match")
    try:
        match = Match.from_dict(raw_match)
        match.check_bounds()
    except InvalidMatch as bad:
        raise ValidationFailed(f"{bad.field}: {bad.message}") from None
    if topic == EMAIL_TOPIC and not match.to:
        raise ValidationFailed(
            "trigger.match.to: an email.received rule must name the inbound address(es) of "
            "its space it receives for"
        )
    to: str | list[str] | None = None
    if match.to is not None:
        for address in match.to:
            check_address(address, "trigger.match.to")
        written = raw_match.get("to") if isinstance(raw_match, Mapping) else None
        to = match.to[0] if isinstance(written, str) else list(match.to)
    given = {
        key: value
        for key, value in (
            ("to", to),
            ("from", match.sender),
            ("subject_contains", match.subject_contains),
        )
        if value is not None
    }
    if given:
        out["match"] = given
    if "accept_spam" in trigger:
        out["accept_spam"] = check_accept_spam(trigger["accept_spam"], "trigger.accept_spam")
    if "max_firings_per_hour" in trigger:
        out["max_firings_per_hour"] = check_hourly_cap(
            trigger["max_firings_per_hour"], "trigger.max_firings_per_hour"
        )
    return out


def check_accept_spam(value: Any, field: str = "accept_spam") -> bool:
    if not isinstance(value, bool):
        raise ValidationFailed(f"{field}: must be true or false")
    return value


def check_hourly_cap(value: Any, field: str = "max_firings_per_hour") -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HOURLY_CAP:
        raise ValidationFailed(f"{field}: must be an integer from 1 to {MAX_HOURLY_CAP}")
    return value


def missed_occasion(rule: Rule, now_ms: int) -> datetime | None:
    """The latest occasion of `rule` missed within its catch-up window (`latest_missed`), or
    None. InvalidSchedule when its stored schedule cannot be computed any more: one an earlier
    release stored past today's bounds, or a zone the time zone database has since dropped."""
    try:
        return latest_missed(
            rule.trigger["schedule"],
            rule.trigger.get("timezone", "UTC"),
            now_ms,
            rule.catchup_window,
            rule.fired_through,
            rule.created_at,
        )
    except OverflowError as err:
        raise schedules.InvalidSchedule(f"past the calendar: {err}") from None


def hour_of(ms: int) -> str:
    """The clock hour a firing counts in (UTC), e.g. 2025-01-31T09."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H")


# ------------------------------------------------------------------------ firing identity
def iso_utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def workflow_subject_id(space: str, slug: str) -> str:
    """A workflow's timeline id: slugs are unique only within their space."""
    return f"{space}/{slug}"


def email_occasion(message_id: str) -> str:
    """The occasion of an inbound email: its SES messageId (SQS redelivers, SES does not)."""
    return f"ses:{message_id}"


def firing_job_id(rule_id: str, occasion: str) -> str:
    """The job id of a rule's firing on one occasion (a scheduled time, an SES message id, an
    event id). The job row is created with a condition that it is new, in the same transaction
    as the lease, so one occasion mints at most one lease however often it is delivered."""
    digest = hashlib.sha256(f"{rule_id}\x00{occasion}".encode()).hexdigest()[:32]
    return f"job_f{digest}"


def successor_job_id(job_id: str) -> str:
    """The job id under which an occasion is minted again when its mint under `job_id` was
    taken for dead: no delivery wrote its task within the hour, so a claim voided the task's
    id and ended the lease (app/leases/orphans.py). Derived, so concurrent later deliveries
    (a dead-letter queue redriven) race for one job row and mint one lease between them."""
    digest = hashlib.sha256(f"again\x00{job_id}".encode()).hexdigest()[:32]
    return f"job_f{digest}"


def approval_task_id(job_id: str) -> str:
    """The id of the task a firing files to wait for approval (it has no job or lease yet):
    derived from the firing's job id, so one occasion files one task however often it is
    delivered. Its own prefix keeps it from ever naming a task's implied first job."""
    digest = hashlib.sha256(f"approval\x00{job_id}".encode()).hexdigest()[:32]
    return f"task_a{digest}"


def within_answer(rules: Sequence[Rule], budget: int = MAX_RULE_PAGE_BYTES) -> list[Rule]:
    """The first of `rules` whose JSON together stays within `budget` (the first one always:
    a page is never empty while rules remain). The weight is the rule's fields as JSON with
    every non-ASCII character escaped, more than any answer writes them."""
    kept: list[Rule] = []
    total = 0
    for rule in rules:
        weight = len(json.dumps(dataclasses.asdict(rule), default=str))
        if kept and total + weight > budget:
            break
        kept.append(rule)
        total += weight
    return kept

"""Rules firing: fire now, a scheduled time, an event, an inbound email.

A firing on an *occasion* (a scheduled time, an SES message id, an event id) mints its job
under an id derived from (rule, occasion); the job row is written only if new, in the same
transaction as the lease (and the task, for a task subject). A redelivered occasion loses
that condition and answers the lease the first delivery minted: at most one lease per
occasion, however often and however concurrently it arrives.
"""

from __future__ import annotations

import email.utils
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tenure.app.ports import Change, JobWrite, LeaseWrite, TaskWrite
from tenure.app.runs import stored_priority
from tenure.app.tasks.keys import task_id_of_key
from tenure.domain import authz
from tenure.domain import fencing as r
from tenure.domain.errors import AlreadyExists, Conflict, ValidationFailed
from tenure.domain.model import (
    DEFAULT_MAX_ATTEMPTS,
    Event,
    Job,
    Lease,
    Principal,
    Task,
)
from tenure.domain.rules.matching import render_template
from tenure.domain.rules.rule import (
    EMAIL_TOPIC,
    MAX_RULES_PER_EVENT,
    MAX_TITLE,
    Rule,
    email_occasion,
    firing_job_id,
    hour_of,
    iso_utc,
    workflow_subject_id,
)
from tenure.domain.states import LeaseState, SubjectKind

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.rules.rules import Rules

# Addresses looked up in the inbound index per event (SES delivers to at most 50 recipients).
MAX_RECIPIENTS = 100
# The service counter of firings left out because the rule's space is archived (an archived
# space takes no new work).
ARCHIVED_SKIPS = "archived_rule_skips"
# Firings a rule's max_firings_per_hour left out; emails refused for SES's verdicts.
RATE_LIMITED = "rule_rate_limited"
SPAM_SKIPS = "email_spam_skips"
VIRUS_REFUSALS = "email_virus_refusals"
# Emails minted without their attachments, SES not having scanned them clean.
ATTACHMENTS_WITHHELD = "email_attachments_withheld"
FAIL = "FAIL"
PASS = "PASS"
# Why an email's trigger data lists no attachments though the mail had some: SES's virus
# verdict is not PASS (GRAY, PROCESSING_FAILED, DISABLED, or none at all).
VIRUS_UNSCANNED = "virus_unscanned"
# An hour's firing counter is kept this long past its hour (DynamoDB's TTL deletes it).
HOUR_COUNTER_KEEP_S = 2 * 86_400
# How long `POST /events` remembers an event_id's leases: a repeat within it answers them
# again and mints nothing (its record then expires, as every row nobody needs any more does).
EVENT_ID_KEPT_S = 7 * 86_400


@dataclass(frozen=True)
class Fired:
    """What an inbound occasion minted, and the matching rules it minted nothing for: their
    space is archived (an archived space takes no new work), their hourly cap is reached, or
    (an email) SES judged the mail spam and the rule does not accept spam."""

    leases: list[Lease]
    skipped_archived: list[str]
    rate_limited: list[str] = field(default_factory=list)
    skipped_spam: list[str] = field(default_factory=list)
    # Why nothing at all was minted for the occasion ("virus"), or None.
    refused: str | None = None
    # Why an email's leases carry none of its attachments ("virus_unscanned"), or None.
    attachments_withheld: str | None = None


@dataclass(frozen=True)
class EmailCandidates:
    """What SES's envelope alone decides of an email: the enabled email rules that name in
    `match.to` an address SES received the mail for and the rule's own space owns, each with
    the recipients its space owns. Empty (false) when no rule can fire whatever the mail
    says: then the mail need not be read."""

    rules: tuple[tuple[Rule, tuple[str, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules)


class Firings:
    def __init__(self, kernel: Kernel, rules: Rules) -> None:
        self.kernel = kernel
        self.rules = rules

    def fire_rule(self, actor: Principal, rule_id: str) -> Lease:
        """Fire now, whatever the rule's kind or state; the lease carries no trigger, even
        for an inbound rule."""
        authz.require_role(actor, "member")
        rule = self.rules.rule(rule_id)
        authz.require_operator(actor, "member", rule.space)
        self.kernel.refuse_archived(rule.space)
        # An inbound rule fired by hand reads as an event that carried no data: `{subject}`
        # and `{from}` become empty, as in POST /events without them.
        data: dict[str, Any] | None = {} if rule.kind == "inbound" else None
        return self._mint(rule, self.kernel.ids.new_id("job"), None, data)

    def fire_scheduled(self, rule_id: str, scheduled_at: datetime) -> Lease | None:
        """The scheduler function's one call: mint the firing of (rule, scheduled time) once.

        None when there is nothing to fire: the rule is gone, disabled or no longer scheduled
        (a schedule that was being changed can still deliver one late invocation).
        """
        rule = self.rules.rule_store.get_rule(rule_id) if len(rule_id) <= r.MAX_ID_LENGTH else None
        if rule is None or not rule.enabled or rule.kind != "scheduled":
            return None
        if self.kernel.fresh_space(rule.space).archived:
            self.kernel.counters[ARCHIVED_SKIPS] += 1
            return None
        occasion = "schedule:" + scheduled_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._once(rule, firing_job_id(rule.id, occasion), None, None)

    def post_event(
        self,
        actor: Principal,
        space: str,
        topic: str,
        data: dict[str, Any],
        occurred_at: int | None,
        event_id: str | None,
    ) -> list[Lease]:
        """One lease per enabled inbound rule of (space, topic) whose match holds; the same
        event_id again answers the same leases and mints nothing."""
        authz.require_operator(actor, "member", space)
        if topic == EMAIL_TOPIC:
            # Only the inbound function fires it, from what SES received: a posted one could
            # claim any mail's recipients, verdicts and attachments.
            raise ValidationFailed(
                f"topic: {EMAIL_TOPIC} is fired only by inbound email; post another topic"
            )
        self.kernel.space(space)
        r.refuse_tokens(data, "the event's data")
        now_s = self.kernel.clock.now_ms() // 1000
        if event_id is not None:
            seen = self.rules.rule_store.get_event_record(space, event_id, now_s)
            if seen is not None:
                return self._leases_in_order(seen)
        occasion = f"event:{space}:{event_id}" if event_id is not None else None
        leases = self.fire_inbound(
            topic, occasion, occurred_at or self.kernel.clock.now_ms(), data, [], space
        ).leases
        if event_id is None:
            return leases
        minted = [lease.id for lease in leases]
        try:
            self.rules.rule_store.put_event_record(
                space, event_id, minted, now_s + EVENT_ID_KEPT_S, now_s
            )
        except AlreadyExists:
            seen = self.rules.rule_store.get_event_record(space, event_id, now_s) or []
            return self._leases_in_order(seen)
        return leases

    def fire_inbound(
        self,
        topic: str,
        occasion: str | None,
        occurred_at: int,
        data: dict[str, Any],
        recipients: list[str],
        space: str | None,
    ) -> Fired:
        """Mint one lease per enabled inbound rule of `topic` (of `space`, or of every space
        when None) whose match holds on `data`; per `occasion`, at most once per rule. A rule
        of an archived space (read fresh, once per space) is skipped and named."""
        if topic == EMAIL_TOPIC:
            raise ValueError("an email is fired with fire_email, from what SES reported")
        addresses = _recipients(data, recipients)
        candidates = self.rules.rule_store.inbound_rules(
            topic, addresses, space, MAX_RULES_PER_EVENT
        )
        matching = [
            rule for rule in candidates if rule.enabled and rule.match.holds(data, recipients)
        ]
        return self._fire_all(matching, topic, occasion, occurred_at, data)

    def email_candidates(self, recipients: Iterable[str]) -> EmailCandidates:
        """The rules an email to `recipients` (SES's `receipt.recipients`) could fire: one batch
        read of the recipients' owners, then, only when a space owns one of them, the inbound
        index of the owned addresses (rule_store.inbound_rules)."""
        addresses = _recipients({}, list(recipients))
        owners = self.rules.rule_store.address_owners(addresses)
        owned = [a for a in addresses if a in owners]
        if not owned:
            return EmailCandidates()
        found: list[tuple[Rule, tuple[str, ...]]] = []
        for rule in self.rules.rule_store.inbound_rules(
            EMAIL_TOPIC, owned, None, MAX_RULES_PER_EVENT
        ):
            theirs = tuple(a for a in owned if owners[a] == rule.space)
            if rule.enabled and rule.match.to and any(a in rule.match.to for a in theirs):
                found.append((rule, theirs))
        return EmailCandidates(tuple(found))

    def fire_email(
        self,
        occurred_at: int,
        data: dict[str, Any],
        candidates: EmailCandidates | None = None,
        store_attachments: Callable[[], None] | None = None,
    ) -> Fired:
        """Mint one lease per enabled email rule whose match holds on an inbound email, at
        most once per (SES messageId, rule). `data` is the trigger data the inbound function
        built from SES's notification: its `recipients` are the ones SES received the mail
        for, and a rule receives only those its own space owns (`candidates`, read from them
        when not given); its `verdicts` are SES's. A virus mints nothing; a mail SES did not
        scan clean (a virus verdict other than PASS, or none) mints without its attachments,
        which are neither listed nor stored (`attachments_withheld: "virus_unscanned"`); spam
        mints only for rules that accept it; `from` counts only under a DMARC PASS
        (Match.holds_email).

        `store_attachments` puts the mail's attachments where its trigger data says they are.
        It is called once, after every judgement (owners, match, spam, archived space, hourly
        cap) and before the first lease is committed, and never when nothing new is minted: a
        mail no rule fires for, and a redelivery whose leases already exist, store nothing."""
        verdicts = data.get("verdicts") or {}
        if verdicts.get("virus") == FAIL:
            self.kernel.counters[VIRUS_REFUSALS] += 1
            return Fired([], [], refused="virus")
        withheld: str | None = None
        if verdicts.get("virus") != PASS:
            store_attachments = None
            if data.get("attachments"):
                withheld = VIRUS_UNSCANNED
                data = {**data, "attachments": [], "attachments_withheld": withheld}
        if candidates is None:
            candidates = self.email_candidates(data.get("recipients") or [])
        spam = verdicts.get("spam") == FAIL
        matching: list[Rule] = []
        skipped_spam: list[str] = []
        for rule, theirs in candidates.rules:
            if not rule.match.holds_email(data, theirs, verdicts.get("dmarc")):
                continue
            if spam and not rule.spam_accepted:
                self.kernel.counters[SPAM_SKIPS] += 1
                skipped_spam.append(rule.id)
                continue
            matching.append(rule)
        message_id = str(data["message_id"])
        fired = self._fire_all(
            matching,
            EMAIL_TOPIC,
            email_occasion(message_id),
            occurred_at,
            data,
            store_attachments,
        )
        if withheld is not None and fired.leases:
            self.kernel.counters[ATTACHMENTS_WITHHELD] += 1
        return Fired(
            fired.leases,
            fired.skipped_archived,
            fired.rate_limited,
            skipped_spam,
            attachments_withheld=withheld if fired.leases else None,
        )

    def _fire_all(
        self,
        matching: list[Rule],
        topic: str,
        occasion: str | None,
        occurred_at: int,
        data: dict[str, Any],
        before_mint: Callable[[], None] | None = None,
    ) -> Fired:
        trigger = {"topic": topic, "occurred_at": iso_utc(occurred_at), "data": data}
        prepare = _AtMostOnce(before_mint)
        leases: list[Lease] = []
        archived: dict[str, bool] = {}
        skipped: list[str] = []
        limited: list[str] = []
        for rule in sorted(matching, key=lambda x: (x.space, x.name)):
            if rule.space not in archived:
                archived[rule.space] = self.kernel.fresh_space(rule.space).archived
            if archived[rule.space]:
                self.kernel.counters[ARCHIVED_SKIPS] += 1
                skipped.append(rule.id)
                continue
            job_id = (
                firing_job_id(rule.id, occasion)
                if occasion is not None
                else self.kernel.ids.new_id("job")
            )
            lease = self._once(rule, job_id, trigger, data, prepare)
            if lease is None:
                limited.append(rule.id)
            else:
                leases.append(lease)
        return Fired(leases, skipped, limited)

    def _once(
        self,
        rule: Rule,
        job_id: str,
        trigger: dict[str, Any] | None,
        data: dict[str, Any] | None,
        prepare: Callable[[], None] | None = None,
    ) -> Lease | None:
        """The lease already minted under `job_id` (a redelivery, not counted again), else a
        new one unless the rule's hourly cap is reached (None). `prepare` runs just before a
        new lease is minted, once the firing has been counted: if it fails, the firing stays
        counted and the redelivery that mints counts it again."""
        existing = self.kernel.store.get_job(job_id)
        if existing is not None:
            return self.kernel.lease(existing.lease_id)
        if not self._within_cap(rule):
            return None
        if prepare is not None:
            prepare()
        return self._mint(rule, job_id, trigger, data)

    def _within_cap(self, rule: Rule) -> bool:
        """Count this firing against the rule's max_firings_per_hour (one conditional update
        of the hour's counter row, so concurrent firings cannot pass the cap together); the
        hour's first refusal records `rule.rate_limited` on the space's timeline."""
        cap = rule.hourly_cap
        if cap is None:
            return True
        now = self.kernel.clock.now_ms()
        hour = hour_of(now)
        outcome = self.rules.rule_store.count_firing(
            rule.id, hour, cap, now // 1000 + HOUR_COUNTER_KEEP_S
        )
        if outcome == "counted":
            return True
        self.kernel.counters[RATE_LIMITED] += 1
        if outcome == "limited_first":
            self.kernel.store.put_event(
                Event(
                    id=self.kernel.ids.new_id("ev"),
                    subject_kind=SubjectKind.SPACE.value,
                    subject_id=rule.space,
                    type="rule.rate_limited",
                    at=now,
                    data={
                        "rule_id": rule.id,
                        "rule": rule.name,
                        "hour": hour,
                        "max_firings_per_hour": cap,
                    },
                )
            )
        return False

    def _leases_in_order(self, lease_ids: list[str]) -> list[Lease]:
        found = self.kernel.store.get_leases(lease_ids)
        return [found[i] for i in lease_ids if i in found]

    def _mint(
        self,
        rule: Rule,
        job_id: str,
        trigger: dict[str, Any] | None,
        data: dict[str, Any] | None,
    ) -> Lease:
        """A new pending lease (and task, for a task subject) of `rule`, under `job_id`; the
        lease a concurrent delivery minted under that job id when it got there first."""
        pool = self.kernel.pool_in_space(rule.pool, rule.space)
        now = self.kernel.clock.now_ms()
        kind = SubjectKind(rule.subject["kind"])
        task: Task | None = None
        workflow: str | None = None
        if kind is SubjectKind.TASK:
            workflow = rule.subject.get("workflow")
            number = self.kernel.store.next_task_number(rule.space)
            task = Task(
                id=task_id_of_key(f"{rule.space}-{number}"),
                key=f"{rule.space}-{number}",
                space=rule.space,
                title=_render(rule.subject["title"], data, MAX_TITLE) or rule.name,
                body=_render(rule.subject.get("body"), data, None),
                properties=dict(rule.subject.get("properties") or {}),
                workflow=workflow,
                created_at=now,
                job_id=job_id,
                priority=stored_priority(rule.subject.get("priority")),
            )
            subject_id = task.id
        elif kind is SubjectKind.WORKFLOW:
            workflow = rule.subject["slug"]
            subject_id = workflow_subject_id(rule.space, rule.subject["slug"])
        else:
            subject_id = rule.space
        lease = Lease(
            event_type="lease.created",
            tl=self.kernel.first_stamps(kind),
            event_data={"pool": pool.name, "rule_id": rule.id, "rule": rule.name},
            updated_at=now,
            id=self.kernel.ids.new_id("lease"),
            job_id=job_id,
            space=rule.space,
            pool=pool.name,
            subject_kind=kind,
            subject_id=subject_id,
            task_id=task.id if task else None,
            task_key=task.key if task else None,
            workflow=workflow,
            state=LeaseState.PENDING,
            fence=1,
            attempt=1,
            created_at=now,
            priority=stored_priority(rule.subject.get("priority")),
        )
        job = Job(
            id=job_id,
            space=rule.space,
            pool=pool.name,
            subject_kind=kind,
            subject_id=subject_id,
            task_id=task.id if task else None,
            lease_id=lease.id,
            max_attempts=task.max_attempts if task else DEFAULT_MAX_ATTEMPTS,
            created_at=now,
            rule_id=rule.id,
            trigger=trigger,
        )
        change = Change(
            leases=[LeaseWrite(lease)],
            jobs=[JobWrite(job)],
            tasks=[TaskWrite(task, create=True)] if task else [],
        )
        try:
            self.kernel.commit(change)
        except Conflict:
            # Another delivery of the same occasion got there first: answer its lease.
            won = self.kernel.store.get_job(job_id)
            if won is None:
                raise
            self.kernel.counters["duplicate_firings"] += 1
            return self.kernel.lease(won.lease_id)
        self.kernel.counters["rule_firings"] += 1
        return lease


class _AtMostOnce:
    """Calls `action` the first time it is called, and does nothing after."""

    def __init__(self, action: Callable[[], None] | None) -> None:
        self.action = action

    def __call__(self) -> None:
        action, self.action = self.action, None
        if action is not None:
            action()


def _render(template: str | None, data: dict[str, Any] | None, limit: int | None) -> str | None:
    """A task subject's title or body: `{subject}` and `{from}` from the event's data; a
    firing without data (a schedule's) keeps the template as written."""
    if template is None or data is None:
        return template
    subject = data.get("subject")
    sender = data.get("from")
    text = render_template(
        template,
        subject=subject if isinstance(subject, str) else "",
        sender=sender if isinstance(sender, str) else "",
    ).strip()
    return text[:limit] if limit is not None else text


def _recipients(data: dict[str, Any], extra: list[str]) -> list[str]:
    """Every address an event names (to, cc, envelope recipients), lowercased, bounded."""
    found: list[str] = []
    for value in (data.get("to"), data.get("cc"), extra):
        items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for item in items:
            if isinstance(item, str):
                address = email.utils.parseaddr(item)[1].strip().lower()
                if address and address not in found:
                    found.append(address)
    return found[:MAX_RECIPIENTS]

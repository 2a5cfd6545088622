"""Rules firing: fire now, a scheduled time, an event, an inbound email.

A firing on an *occasion* (a scheduled time, an SES message id, an event id) mints its job
under an id derived from (rule, occasion); the job row is written only if new, on its own
before the lease and the task (app/rules/job_first.py), or on a table an earlier release may
still serve, in one transaction with them. A redelivered occasion loses that condition and
answers the lease the first delivery minted (finishing it, when that delivery stopped before
its lease or task): at most one live lease per occasion, however often and however
concurrently it arrives. A mint no delivery finished within the hour is taken for dead and
ended, its task's id voided (app/leases/orphans.py); a delivery after that (a dead-letter
queue redriven a day later) mints the occasion again under the next job id of its chain
(`successor_job_id`), so a mail or an event is never answered with a run that never ran.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tenure.app.ports import Change, JobWrite, LeaseWrite, TaskWrite
from tenure.app.rows import LeaseRows, TaskRows, TimelineRows
from tenure.app.rules.job_first import JobFirst
from tenure.app.rules.minting import Controls, MintTerms
from tenure.domain import authz, fencing
from tenure.domain.errors import AlreadyExists, Conflict, Unavailable, ValidationFailed
from tenure.domain.events import RULE_RATE_LIMITED
from tenure.domain.model import (
    Event,
    Job,
    Lease,
    Principal,
    Task,
)
from tenure.domain.outbound import ends_orphan
from tenure.domain.rules.addresses import addresses_named
from tenure.domain.rules.occasions import (
    ALLOW,
    SKIP,
    occasion_key,
    occasions_to_handle,
)
from tenure.domain.rules.rule import (
    EMAIL_TOPIC,
    MAX_RULES_PER_EVENT,
    MAX_RULES_PER_SPACE,
    Rule,
    approval_task_id,
    email_occasion,
    firing_job_id,
    hour_of,
    iso_utc,
    missed_occasion,
    successor_job_id,
)
from tenure.domain.rules.schedules import InvalidSchedule
from tenure.domain.states import SubjectKind
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.operator import Operator
    from tenure.app.rules.rules import Rules

_log = logging.getLogger(__name__)
# The service counter of firings left out because the rule's space is archived (an archived
# space takes no new work).
ARCHIVED_SKIPS = "archived_rule_skips"
# Deliveries of an instant still ahead of the clock by more than AHEAD_MS: a schedule delivers
# at its time or after, so only a hand-made invocation is early. Firing it would also mark the
# rule fired through that instant and silence every real occasion before it.
AHEAD_SKIPS, AHEAD_MS = "scheduled_ahead_skips", 60_000
# Firings a rule's max_firings_per_hour left out; emails refused for SES's verdicts.
RATE_LIMITED = "rule_rate_limited"
SPAM_SKIPS = "email_spam_skips"
VIRUS_REFUSALS = "email_virus_refusals"
# Scheduled occasions a rule's overlap left out (its previous lease still open), and missed
# occasions minted when the service came back.
OVERLAP_SKIPS = "schedule_overlap_skips"
CAUGHT_UP = "schedule_caught_up"
# Scheduled rules left out of a resume's catch-up because their stored schedule cannot be
# computed any more (past today's bounds, or its zone gone from the time zone database).
UNREADABLE_SCHEDULE_SKIPS = "schedule_unreadable_skips"
# Emails minted without their attachments, SES not having scanned them clean.
ATTACHMENTS_WITHHELD = "email_attachments_withheld"
FAIL = "FAIL"
PASS = "PASS"
# Why an email's trigger data lists no attachments though the mail had some: SES's virus
# verdict is not PASS (GRAY, PROCESSING_FAILED, DISABLED, or none at all).
VIRUS_UNSCANNED = "virus_unscanned"
# An hour's firing counter is kept this long past its hour (DynamoDB's TTL deletes it).
HOUR_COUNTER_KEEP_S = 2 * 86_400
# How many times one occasion is minted again after a mint taken for dead: each needs a
# delivery more than an hour after the last mint, so this is never reached by AWS's own
# redeliveries; past it, a delivery answers the last mint's ended lease and files nothing.
MAX_REMINTS = 8
# How long `POST /events` remembers an event_id's leases: a repeat within it answers them
# again and mints nothing (its record then expires, as every row nobody needs any more does).
EVENT_ID_KEPT_S = 7 * 86_400


@record
class TakenForDead:
    """An occasion's mint that no delivery finished within the hour: a claim voided its
    task's id and ended (or is ending) `lease`. The occasion is minted again."""

    lease: Lease


@record
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


@record
class EmailCandidates:
    """What SES's envelope alone decides of an email: the enabled email rules that name in
    `match.to` an address SES received the mail for and the rule's own space owns, each with
    the recipients its space owns. Empty (false) when no rule can fire whatever the mail
    says: then the mail need not be read."""

    rules: tuple[tuple[Rule, tuple[str, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules)


class Firings:
    """`operator` cancels a scheduled rule's previous lease when its overlap says so (the
    operator's own cancel: a held lease is asked to stop)."""

    def __init__(
        self,
        kernel: Kernel,
        rules: Rules,
        operator: Operator,
        job_first: JobFirst,
        *,
        leases: LeaseRows,
        tasks: TaskRows,
        timeline: TimelineRows,
    ) -> None:
        self.kernel = kernel
        self.job_first = job_first
        self.leases = leases
        self.tasks = tasks
        self.timeline = timeline
        self.rules = rules
        self.operator = operator

    def fire_rule(self, actor: Principal, rule_id: str) -> Lease | Task:
        """Fire now, whatever the rule's kind or state; the lease carries no trigger, even
        for an inbound rule. A task subject that requires approval answers its waiting task
        (no lease)."""
        authz.require_role(actor, "member")
        rule = self.rules.rule(rule_id)
        authz.require_operator(actor, "member", rule.space)
        self.kernel.catalog.refuse_archived(rule.space)
        # An inbound rule fired by hand reads as an event that carried no data: `{subject}`
        # and `{from}` become empty, as in POST /events without them.
        data: dict[str, Any] | None = {} if rule.kind == "inbound" else None
        fired = self._mint(rule, self.kernel.ids.new_id("job"), None, data)
        if rule.kind == "scheduled" and isinstance(fired, Lease):
            # Never skipped, and the lease the next occasion's overlap is judged against.
            self.rules.rule_store.note_firing(rule.id, fired.id, None)
        return fired

    def fire_scheduled(self, rule_id: str, scheduled_at: datetime) -> Lease | Task | None:
        """The scheduler function's one call: mint the firing of (rule, scheduled time) once.

        None when there is nothing to fire: the rule is gone, disabled or no longer scheduled
        (a schedule that was being changed can still deliver one late invocation).
        """
        at, now = scheduled_at.astimezone(UTC), self.kernel.clock.now_ms()
        at_ms = int(at.timestamp() * 1000)
        if at_ms > now + AHEAD_MS:
            self.kernel.counters[AHEAD_SKIPS] += 1
            return None
        fits = len(rule_id) <= fencing.MAX_ID_LENGTH
        rule = self.rules.rule_store.get_rule(rule_id) if fits else None
        if rule is None or not rule.enabled or rule.kind != "scheduled":
            return None
        if self.kernel.catalog.fresh_space(rule.space).archived:
            self.kernel.counters[ARCHIVED_SKIPS] += 1
            return None
        minted, delivered = self._current(rule, firing_job_id(rule.id, occasion_key(at)))
        if minted is not None:
            # A redelivery: its firing may not have been noted (the invocation that minted it
            # stopped before); noting it again changes nothing when it was.
            if rule.fired_through is None or rule.fired_through < at_ms:
                self._note(rule, minted, at_ms)
            return minted
        if rule.fired_through is not None and at_ms <= rule.fired_through:
            return None  # judged already: skipped by its overlap, or missed out of the window
        plan = occasions_to_handle(
            rule.trigger["schedule"],
            rule.trigger.get("timezone", "UTC"),
            at,
            now,
            rule.catchup_window,
            rule.fired_through,
            rule.created_at,
        )
        previous = rule.last_lease_id
        answer: Lease | Task | None = None
        for occasion in plan:
            if not self._overlap_allows(rule, previous):
                self.kernel.counters[OVERLAP_SKIPS] += 1
                continue
            job_id = firing_job_id(rule.id, occasion_key(occasion))
            # The delivered occasion's chain was read above: mint it under the id it found
            # free, without reading it again.
            fired = (
                self._once(rule, job_id, None, None)
                if occasion != at
                else self._mint_within_cap(rule, delivered, None, None)
            )
            if isinstance(fired, Lease):
                previous = fired.id
            if occasion == at:
                answer = fired
            elif fired is not None:
                self.kernel.counters[CAUGHT_UP] += 1
        self.rules.rule_store.note_firing(
            rule.id, previous if previous != rule.last_lease_id else None, at_ms
        )
        return answer

    def catch_up(self) -> int:
        """What a service that was away does when it resumes: each enabled scheduled rule with
        a catch-up window is fired for its latest occasion missed within the window, which
        mints it and the missed ones before it (fire_scheduled: oldest first, each subject to
        the rule's overlap). The rules a page at a time, then per such rule what one invocation
        reads. Answers how many rules had a missed occasion."""
        now = self.kernel.clock.now_ms()
        count = 0
        for rule in self.rules.every_scheduled_rule():
            if not rule.enabled or rule.catchup_window <= 0:
                continue
            try:
                missed = missed_occasion(rule, now)
            except InvalidSchedule as bad:  # skipped: one rule must not stop every other's
                self.kernel.counters[UNREADABLE_SCHEDULE_SKIPS] += 1
                _log.warning(
                    "scheduled rule skipped: its occasions cannot be computed",
                    extra={"rule_id": rule.id, "reason": str(bad)},
                )
                continue
            if missed is not None:
                self.fire_scheduled(rule.id, missed)
                count += 1
        return count

    def _minted(
        self, rule: Rule, job_id: str, data: dict[str, Any] | None = None
    ) -> Lease | Task | TakenForDead | None:
        """What an occasion already minted under `job_id`, or None: two reads (the job, its
        lease), a third for a lease that may still wait for its task. A mint whose writer
        stopped after its job is finished here, from the job (`data`: the occasion's); a
        mint taken for dead is told as such."""
        if rule.subject.get("requires_approval"):
            return self.tasks.get_task(approval_task_id(job_id))
        existing = self.leases.get_job(job_id)
        if existing is None:
            return None
        found = self.leases.get_lease(existing.lease_id)
        if found is not None and ends_orphan(found):
            return TakenForDead(found)  # its task's id is voided: nothing to finish
        if found is not None and (
            not found.tp or found.task_id is None or self.tasks.get_task(found.task_id)
        ):
            return found  # whole: claimed (a claim clears the mark), or its task is there
        lease, task = self._rows_of(rule, existing, data)
        finished = self.job_first.finish(found, lease, task)
        if task is not None and finished.tp and self.tasks.get_task(task.id) is None:
            # Its task's write lost to a void: a claim took the mint for dead a moment ago
            # and is ending the lease (one consistent read, on this rare path only).
            return TakenForDead(finished)
        return finished

    def _current(
        self, rule: Rule, job_id: str, data: dict[str, Any] | None = None
    ) -> tuple[Lease | Task | None, str]:
        """What the occasion whose first job id is `job_id` has minted (as `_minted`), and the
        job id a new mint of it takes: down the occasion's chain past each mint taken for
        dead (`successor_job_id`), at most MAX_REMINTS links; past them, the last dead
        mint's lease."""
        minted = self._minted(rule, job_id, data)
        for _ in range(MAX_REMINTS):
            if not isinstance(minted, TakenForDead):
                return minted, job_id
            job_id = successor_job_id(job_id)
            minted = self._minted(rule, job_id, data)
        return (minted.lease if isinstance(minted, TakenForDead) else minted), job_id

    def _rows_of(
        self, rule: Rule, job: Job, data: dict[str, Any] | None
    ) -> tuple[Lease, Task | None]:
        """The lease and task a firing's job names, as its writer made them: under the job's
        ids, time, pool and task key, from the rule and the occasion's data."""
        terms = MintTerms(rule, job.id, job.pool, job.created_at, Controls.of(rule, data))
        if terms.kind is not job.subject_kind or (job.task_key is None) != (job.task_id is None):
            # Changed since the job was written: what its lease was to be is not known.
            raise Unavailable(f"rule {rule.id} changed its subject; its firing cannot finish")
        task = None
        if job.task_key is not None:
            task = terms.task(int(job.task_key.rpartition("-")[2]), data)
        return terms.lease(job.lease_id, task, self.kernel.gates.first_stamps(terms.kind)), task

    def _note(self, rule: Rule, minted: Lease | Task, at_ms: int) -> None:
        lease_id = minted.id if isinstance(minted, Lease) else None
        self.rules.rule_store.note_firing(rule.id, lease_id, at_ms)

    def _overlap_allows(self, rule: Rule, previous_id: str | None) -> bool:
        """Whether an occasion mints, given the rule's previous lease: always with `allow` or
        when there is none open; never with `skip` while it is open; with `cancel_previous`
        after cancelling it (a held lease is asked to stop). Open means its run is: a lease
        that expired and was requeued counts by its successor. Bounded: at most three reads
        (the lease, its job, the job's newest lease)."""
        if rule.overlap_mode == ALLOW or previous_id is None:
            return True
        current = self._open_run_lease(previous_id)
        if current is None:
            return True
        if rule.overlap_mode == SKIP:
            return False
        by = Principal(
            kind="operator", token_id=f"rule:{rule.id}", role="member", spaces=(rule.space,)
        )
        self.operator.cancel(by, current.id)
        return True

    def _open_run_lease(self, lease_id: str) -> Lease | None:
        lease = self.leases.get_lease(lease_id)
        if lease is None:
            return None
        if not lease.state.active:
            job = self.leases.get_job(lease.job_id)
            if job is None or job.lease_id == lease.id:
                return None
            lease = self.leases.get_lease(job.lease_id)
            if lease is None or not lease.state.active:
                return None
        return lease

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
        self.kernel.catalog.space(space)
        fencing.refuse_tokens(data, "the event's data")
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
        addresses = addresses_named(data, recipients)
        # Of one space, every rule of the topic (a space holds at most MAX_RULES_PER_SPACE),
        # so rules whose match does not hold cannot take the places of those whose does.
        read = MAX_RULES_PER_SPACE if space is not None else MAX_RULES_PER_EVENT
        candidates = self.rules.rule_store.inbound_rules(topic, addresses, space, read)
        matching = [
            rule for rule in candidates if rule.enabled and rule.match.holds(data, recipients)
        ]
        return self._fire_all(matching[:MAX_RULES_PER_EVENT], topic, occasion, occurred_at, data)

    def email_candidates(self, recipients: Iterable[str]) -> EmailCandidates:
        """The rules an email to `recipients` (SES's `receipt.recipients`) could fire: one batch
        read of the recipients' owners, then, only when a space owns one of them, the inbound
        index of the owned addresses (rule_store.inbound_rules)."""
        addresses = addresses_named({}, list(recipients))
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
                archived[rule.space] = self.kernel.catalog.fresh_space(rule.space).archived
            if archived[rule.space]:
                self.kernel.counters[ARCHIVED_SKIPS] += 1
                skipped.append(rule.id)
                continue
            job_id = (
                firing_job_id(rule.id, occasion)
                if occasion is not None
                else self.kernel.ids.new_id("job")
            )
            minted = self._once(rule, job_id, trigger, data, prepare)
            if minted is None:
                limited.append(rule.id)
            elif isinstance(minted, Lease):
                leases.append(minted)
        return Fired(leases, skipped, limited)

    def _once(
        self,
        rule: Rule,
        job_id: str,
        trigger: dict[str, Any] | None,
        data: dict[str, Any] | None,
        prepare: Callable[[], None] | None = None,
    ) -> Lease | Task | None:
        """The lease already minted under `job_id` (a redelivery, not counted again), else a
        new one unless the rule's hourly cap is reached (None); for a rule whose task waits
        for approval, that task instead of a lease. `prepare` runs just before a
        new lease is minted, once the firing has been counted: if it fails, the firing stays
        counted and the redelivery that mints counts it again."""
        minted, job_id = self._current(rule, job_id, data)
        if minted is not None:
            return minted
        return self._mint_within_cap(rule, job_id, trigger, data, prepare)

    def _mint_within_cap(
        self,
        rule: Rule,
        job_id: str,
        trigger: dict[str, Any] | None,
        data: dict[str, Any] | None,
        prepare: Callable[[], None] | None = None,
    ) -> Lease | Task | None:
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
            self.timeline.put_event(
                Event(
                    id=self.kernel.ids.new_id("ev"),
                    subject_kind=SubjectKind.SPACE.value,
                    subject_id=rule.space,
                    type=RULE_RATE_LIMITED,
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
        found = self.leases.get_leases(lease_ids)
        return [found[i] for i in lease_ids if i in found]

    def _mint(
        self,
        rule: Rule,
        job_id: str,
        trigger: dict[str, Any] | None,
        data: dict[str, Any] | None,
    ) -> Lease | Task:
        """A new pending lease (and task, for a task subject) of `rule`, under `job_id`; the
        lease a concurrent delivery minted under that job id when it got there first. A task
        subject that requires approval files its task alone (_file_for_approval)."""
        pool = self.kernel.catalog.pool_in_space(rule.pool, rule.space)
        now = self.kernel.clock.now_ms()
        terms = MintTerms(rule, job_id, pool.name, now, Controls.of(rule, data))
        task: Task | None = None
        if terms.kind is SubjectKind.TASK:
            task = terms.task(self.tasks.next_task_number(rule.space), data)
            if rule.subject.get("requires_approval"):
                return self._file_for_approval(rule, task, job_id, pool.name)
        lease = terms.lease(
            self.kernel.ids.new_id("lease"), task, self.kernel.gates.first_stamps(terms.kind)
        )
        job = terms.job(lease, task, trigger)
        if self.kernel.gates.rule_mints_untransacted():
            if not self.job_first.lock(job):
                # Another delivery of the occasion wrote its job first: answer its lease.
                self.kernel.counters["duplicate_firings"] += 1
                first = self._minted(rule, job_id, data)
                if isinstance(first, TakenForDead):
                    return first.lease  # taken for dead already: it stays the answer
                if first is None:
                    raise Unavailable(f"job {job_id} was written and then not found; try again")
                return first
            self.kernel.counters["rule_firings"] += 1
            return self.job_first.write(lease, task)
        change = Change(
            leases=[LeaseWrite(lease)],
            jobs=[JobWrite(job)],
            tasks=[TaskWrite(task, create=True)] if task else [],
        )
        try:
            self.kernel.commit(change)
        except Conflict:
            # Another delivery of the same occasion got there first: answer its lease.
            won = self.leases.get_job(job_id)
            if won is None:
                raise
            self.kernel.counters["duplicate_firings"] += 1
            return self.kernel.lease(won.lease_id)
        self.kernel.counters["rule_firings"] += 1
        return lease

    def _file_for_approval(self, rule: Rule, task: Task, job_id: str, pool: str) -> Task:
        """A task subject that requires approval files its task waiting for a person, with no
        run (as POST /tasks does); approval enqueues it on the rule's pool. Its id derives from
        the firing's job id, so a redelivered occasion finds the task instead of filing
        another; so it is not the id its key derives, and its key row (written after the task,
        and again by any redelivery, should the first writer stop in between) is what finds
        it by key."""
        waiting = replace(
            task,
            id=approval_task_id(job_id),
            job_id=None,
            approval={"state": "requested", "requested_at": task.created_at, "pool": pool},
        )
        try:
            self.kernel.commit(Change(tasks=[TaskWrite(waiting, create=True)]))
        except Conflict:
            won = self.tasks.get_task(waiting.id)
            if won is None:
                raise
            self.tasks.key_task(won)
            self.kernel.counters["duplicate_firings"] += 1
            return won
        self.tasks.key_task(waiting)
        self.kernel.counters["rule_firings"] += 1
        return waiting


class _AtMostOnce:
    """Calls `action` the first time it is called, and does nothing after."""

    def __init__(self, action: Callable[[], None] | None) -> None:
        self.action = action

    def __call__(self) -> None:
        action, self.action = self.action, None
        if action is not None:
            action()

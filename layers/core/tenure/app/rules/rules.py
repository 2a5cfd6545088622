"""Rules: creating, reading, changing and deleting them, with their schedules.

A scheduled rule's schedule follows the rule in the same request (the Schedules port,
app/rules/ports.py); what a rule does when it fires is in Firings (app/rules/firings.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tenure.app.kernel import MAX_WRITE_TRIES, RETRY_AFTER_SECONDS
from tenure.app.rows import SpaceRows
from tenure.app.rules.ports import RulePage, RuleStore, Schedules
from tenure.domain import authz, fencing
from tenure.domain.errors import (
    Conflict,
    NotFound,
    Unavailable,
    ValidationFailed,
)
from tenure.domain.model import Principal
from tenure.domain.rules.occasions import (
    DEFAULT_OVERLAP,
    check_catchup_window,
    check_overlap,
)
from tenure.domain.rules.rule import (
    EMAIL_TOPIC,
    MAX_RULES_PER_SPACE,
    Rule,
    check_accept_spam,
    check_hourly_cap,
    check_name,
    check_subject,
    check_trigger,
    iso_utc,
)
from tenure.domain.rules.schedules import next_fire_times

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

PATCHABLE = (
    "name",
    "pool",
    "subject",
    "trigger",
    "enabled",
    "accept_spam",
    "max_firings_per_hour",
    "overlap",
    "catchup_window_seconds",
)
# Settings only a scheduled rule has.
SCHEDULE_SETTINGS = ("overlap", "catchup_window_seconds")
# Scheduled rules are read a page at a time by a resync and by a resume's catch-up (one
# Query of their small index rows, then the rules)...
SCHEDULED_PAGE = 1000
# ...and at most this many pages: a million scheduled rules, past what any group holds.
MAX_SCHEDULED_PAGES = 1000


class Rules:
    """Creating, reading, changing and deleting rules, each with its schedule. `schedules` is
    None in functions that only fire rules (scheduler, inbound): they never change one."""

    def __init__(
        self,
        kernel: Kernel,
        rule_store: RuleStore,
        schedules: Schedules | None = None,
        *,
        spaces: SpaceRows,
    ) -> None:
        self.kernel = kernel
        self.spaces = spaces
        self.rule_store = rule_store
        self.schedules = schedules

    # ------------------------------------------------------------------------- manage

    def create_rule(
        self,
        actor: Principal,
        space: str,
        name: str,
        pool: str,
        subject: Any,
        trigger: Any,
        enabled: bool = True,
        accept_spam: bool = False,
        max_firings_per_hour: int | None = None,
        overlap: Any = None,
        catchup_window_seconds: Any = None,
    ) -> Rule:
        authz.require_operator(actor, "admin", space)
        self.kernel.catalog.space(space)
        now = self.kernel.clock.now_ms()
        checked_trigger = check_trigger(trigger)
        settings = _schedule_settings(
            "schedule" in checked_trigger,
            {"overlap": overlap, "catchup_window_seconds": catchup_window_seconds},
        )
        if "schedule" in checked_trigger:
            settings = {"overlap": DEFAULT_OVERLAP, "catchup_window_seconds": 0, **settings}
        rule = Rule(
            id=self.kernel.ids.new_id("rule"),
            space=space,
            name=check_name(name),
            pool=pool,
            subject=check_subject(subject),
            trigger=checked_trigger,
            enabled=enabled,
            created_at=now,
            updated_at=now,
            accept_spam=check_accept_spam(accept_spam),
            max_firings_per_hour=check_hourly_cap(max_firings_per_hour),
            **settings,
        )
        self._check_targets(rule)
        self._check_fires(rule)
        self._put_counted(rule)
        if rule.schedule_name is not None:
            try:
                self._sync_schedule(rule)
            except Exception:
                # The rule must not outlive a schedule that could not be made (nothing half done).
                self.rule_store.delete_rule(rule)
                raise
        return rule

    def _put_counted(self, rule: Rule) -> None:
        """Write a new rule within its space's cap. Creates in one space race on its count
        row: a create that loses to another counts again (MAX_WRITE_TRIES in all)."""
        space = rule.space
        full = ValidationFailed(f"space: {space!r} already has {MAX_RULES_PER_SPACE} rules")
        for _ in range(MAX_WRITE_TRIES):
            counted = self.rule_store.count_rules(space, MAX_RULES_PER_SPACE)
            if counted >= MAX_RULES_PER_SPACE:
                raise full
            try:
                self.rule_store.put_rule(rule, counted, MAX_RULES_PER_SPACE)
                return
            except Conflict as lost:
                if lost.details.get("over_cap"):
                    raise full from lost
                self.kernel.counters["lost_writes"] += 1
        raise Unavailable(
            f"rules kept being made in space {space!r} during this request; try again",
            retry_after=RETRY_AFTER_SECONDS,
        )

    def list_rules(
        self,
        actor: Principal,
        space: str,
        limit: int = MAX_RULES_PER_SPACE,
        cursor: str | None = None,
    ) -> RulePage:
        """One page of the space's rules by name: every one, unless `limit` asks for fewer or
        they weigh past what one answer carries (then `next_cursor` goes on)."""
        authz.require_operator(actor, "read", space)
        limit = max(1, min(limit, MAX_RULES_PER_SPACE))
        return self.rule_store.list_rules(space, limit, cursor)

    def get_rule(self, actor: Principal, rule_id: str) -> Rule:
        authz.require_role(actor, "read")
        rule = self.rule(rule_id)
        authz.require_operator(actor, "read", rule.space)
        return rule

    def update_rule(self, actor: Principal, rule_id: str, changes: dict[str, Any]) -> Rule:
        authz.require_role(actor, "admin")
        unknown = sorted(set(changes) - set(PATCHABLE))
        if unknown:
            raise ValidationFailed(f"{unknown[0]}: is not a field a rule can change")
        fields: dict[str, Any] = {}
        if "name" in changes:
            fields["name"] = check_name(changes["name"])
        if "pool" in changes:
            if not isinstance(changes["pool"], str):
                raise ValidationFailed("pool: must be a pool name")
            fields["pool"] = changes["pool"]
        if "subject" in changes:
            fields["subject"] = check_subject(changes["subject"])
        if "trigger" in changes:
            fields["trigger"] = check_trigger(changes["trigger"])
            self._check_fires(replace(self.rule(rule_id), trigger=fields["trigger"]))
        if "enabled" in changes:
            if not isinstance(changes["enabled"], bool):
                raise ValidationFailed("enabled: must be true or false")
            fields["enabled"] = changes["enabled"]
        if "accept_spam" in changes:
            fields["accept_spam"] = check_accept_spam(changes["accept_spam"])
        if "max_firings_per_hour" in changes:
            fields["max_firings_per_hour"] = check_hourly_cap(changes["max_firings_per_hour"])
        asked = {name: changes[name] for name in SCHEDULE_SETTINGS if name in changes}
        for attempt in range(MAX_WRITE_TRIES):
            if attempt:
                self.kernel.back_off(attempt - 1)
            old = self.rule(rule_id)
            authz.require_operator(actor, "admin", old.space)
            scheduled = "schedule" in fields.get("trigger", old.trigger)
            now = self.kernel.clock.now_ms()
            new = replace(
                old,
                **fields,
                **_schedule_settings(scheduled, asked),
                **_resumed_from(old, fields, now),
                version=old.version + 1,
                updated_at=now,
            )
            self._check_targets(new)
            try:
                self.rule_store.replace_rule(old, new)
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
                continue
            self._after_change(old, new)
            return new
        raise Unavailable(
            f"rule {rule_id} kept changing during this request; try again",
            retry_after=RETRY_AFTER_SECONDS,
        )

    def delete_rule(self, actor: Principal, rule_id: str) -> None:
        authz.require_role(actor, "admin")
        for attempt in range(MAX_WRITE_TRIES):
            if attempt:
                self.kernel.back_off(attempt - 1)
            rule = (
                self.rule_store.get_rule(rule_id) if len(rule_id) <= fencing.MAX_ID_LENGTH else None
            )
            if rule is None:
                if attempt == 0:
                    raise NotFound(f"rule {rule_id} does not exist")
                return  # a concurrent delete got there first
            authz.require_operator(actor, "admin", rule.space)
            # The schedule goes first: a schedule that outlived its rule would fire at nothing.
            if rule.schedule_name is not None:
                self._require_schedules().delete(rule.schedule_name)
            try:
                self.rule_store.delete_rule(rule)
                return
            except Conflict:
                # Changed meanwhile (and perhaps rescheduled): delete what it is now.
                self.kernel.counters["lost_writes"] += 1
        raise Unavailable(
            f"rule {rule_id} kept changing during this request; try again",
            retry_after=RETRY_AFTER_SECONDS,
        )

    def resync_schedules(self) -> int:
        """Put every scheduled rule's schedule as the rule says (create, update or disable):
        what a restarted local stack needs, and a repair after a schedule was lost."""
        count = 0
        for rule in self.every_scheduled_rule():
            self._sync_schedule(rule)
            count += 1
        return count

    def every_scheduled_rule(self) -> Iterator[Rule]:
        """Every scheduled rule, enabled or not, a page at a time (MAX_SCHEDULED_PAGES)."""
        after: Rule | None = None
        for _ in range(MAX_SCHEDULED_PAGES):
            page = self.rule_store.scheduled_rules(SCHEDULED_PAGE, after)
            yield from page
            if len(page) < SCHEDULED_PAGE:
                return
            after = page[-1]

    def _after_change(self, old: Rule, new: Rule) -> None:
        """Bring the schedule in line with the rule just written; undo the write if it can't."""
        try:
            if new.schedule_name is not None:
                self._sync_schedule(new)
            elif old.schedule_name is not None:
                self._require_schedules().delete(old.schedule_name)
        except Exception:
            self.rule_store.replace_rule(new, replace(old, version=new.version + 1))
            raise

    def _sync_schedule(self, rule: Rule) -> None:
        assert rule.schedule_name is not None
        self._require_schedules().put(
            rule.schedule_name,
            rule.trigger["schedule"],
            rule.trigger.get("timezone", "UTC"),
            rule.id,
            rule.enabled,
        )

    def _require_schedules(self) -> Schedules:
        if self.schedules is None:
            raise RuntimeError("this service was built without a schedules adapter")
        return self.schedules

    def _check_targets(self, rule: Rule) -> None:
        """The pool and any workflow a rule names must exist in the rule's space (422)."""
        try:
            self.kernel.catalog.pool_in_space(rule.pool, rule.space)
        except NotFound:
            raise ValidationFailed(f"pool: {rule.pool!r} does not exist") from None
        slug = rule.subject.get("slug") or rule.subject.get("workflow")
        if slug is not None and self.spaces.get_workflow(rule.space, slug) is None:
            where = "subject.slug" if rule.subject["kind"] == "workflow" else "subject.workflow"
            raise ValidationFailed(f"{where}: workflow {slug!r} does not exist in {rule.space!r}")
        self._check_addresses(rule)

    def _check_addresses(self, rule: Rule) -> None:
        """An email rule receives only mail to its own space's addresses: each address its
        `match.to` names must belong to the rule's space (one batch read). The message never
        says whether another space owns it."""
        if rule.topic != EMAIL_TOPIC:
            return
        addresses = rule.match.to or ()
        if not addresses:
            raise ValidationFailed("trigger.match.to: an email.received rule must name one")
        owners = self.rule_store.address_owners(list(addresses))
        foreign = [a for a in addresses if owners.get(a) != rule.space]
        if foreign:
            raise ValidationFailed(
                f"trigger.match.to: {foreign[0]} is not an inbound address of space "
                f"{rule.space!r} (POST /spaces/{rule.space}/addresses gives it one)"
            )

    def _check_fires(self, rule: Rule) -> None:
        """A schedule that can never fire again (an at() in the past, a cron whose years have
        run out) is refused: Scheduler would keep it, silently idle, forever."""
        if rule.kind != "scheduled":
            return
        now = datetime.fromtimestamp(self.kernel.clock.now_ms() / 1000, tz=UTC)
        trigger = rule.trigger
        if not next_fire_times(trigger["schedule"], trigger.get("timezone", "UTC"), now, 1):
            after = iso_utc(self.kernel.clock.now_ms())
            raise ValidationFailed(
                f"trigger.schedule: {trigger['schedule']} never fires after {after}"
            )

    def rule(self, rule_id: str) -> Rule:
        rule = self.rule_store.get_rule(rule_id) if len(rule_id) <= fencing.MAX_ID_LENGTH else None
        if rule is None:
            raise NotFound(f"rule {rule_id} does not exist")
        return rule


def _schedule_settings(scheduled: bool, given: dict[str, Any]) -> dict[str, Any]:
    """A rule's `overlap` and `catchup_window_seconds` as stored (None given: left as they
    are); only a scheduled rule takes them (422 naming the field otherwise)."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        if not scheduled:
            raise ValidationFailed(
                f"{name}: only a scheduled rule (a trigger with a schedule) has it"
            )
        out[name] = check_overlap(value) if name == "overlap" else check_catchup_window(value)
    return out


def _resumed_from(old: Rule, fields: dict[str, Any], now: int) -> dict[str, Any]:
    """A scheduled rule enabled again, or given another trigger, starts from `now`: catching
    up makes good the occasions the service missed while it was away, never those an operator
    disabled, nor those a new schedule would have had before it was given."""
    enabled = fields.get("enabled") is True and not old.enabled
    retriggered = "trigger" in fields and fields["trigger"] != old.trigger
    if old.schedule_name is None and "schedule" not in fields.get("trigger", {}):
        return {}
    if not (enabled or retriggered) or (old.fired_through or 0) >= now:
        return {}
    return {"fired_through": now}

"""What a rule's firing mints, as pure terms: the task (for a task subject), the lease and
the job, from the rule, the occasion's job id, the pool and the time. The firing itself
(app/rules/firings.py) reads, numbers and commits them."""

from __future__ import annotations

from typing import Any

from tenure.app.runs import queue_expiry, stored_priority
from tenure.domain.events import LEASE_CREATED
from tenure.domain.model import DEFAULT_MAX_ATTEMPTS, Job, Lease, Task
from tenure.domain.rules.matching import render_template
from tenure.domain.rules.rule import MAX_TITLE, Rule, render_key, workflow_subject_id
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.task_keys import task_id_of_key
from tenure.records import record


@record
class Controls:
    """The run controls a rule's subject names, its concurrency key rendered like its title."""

    concurrency_key: str | None = None
    max_run_seconds: int | None = None
    expires_in_seconds: int | None = None
    max_attempts: int | None = None

    @classmethod
    def of(cls, rule: Rule, data: dict[str, Any] | None) -> Controls:
        subject = rule.subject
        key = subject.get("concurrency_key")
        if key is not None and data is not None:
            said, sender = data.get("subject"), data.get("from")
            key = render_key(
                key,
                said if isinstance(said, str) else "",
                sender if isinstance(sender, str) else "",
            )
        return cls(
            concurrency_key=key,
            max_run_seconds=subject.get("max_run_seconds"),
            expires_in_seconds=subject.get("expires_in_seconds"),
            max_attempts=subject.get("max_attempts"),
        )


@record
class MintTerms:
    """One firing's terms: the rule, the occasion's job id, the pool, the time, the controls."""

    rule: Rule
    job_id: str
    pool: str
    now: int
    controls: Controls

    @property
    def kind(self) -> SubjectKind:
        return SubjectKind(self.rule.subject["kind"])

    def task(self, number: int, data: dict[str, Any] | None) -> Task:
        """A task subject's task, numbered `number` in the rule's space; its title and body
        rendered from the event's data."""
        rule, controls = self.rule, self.controls
        key = f"{rule.space}-{number}"
        return Task(
            id=task_id_of_key(key),
            key=key,
            space=rule.space,
            title=render(rule.subject["title"], data, MAX_TITLE) or rule.name,
            body=render(rule.subject.get("body"), data, None),
            properties=dict(rule.subject.get("properties") or {}),
            workflow=rule.subject.get("workflow"),
            created_at=self.now,
            job_id=self.job_id,
            priority=stored_priority(rule.subject.get("priority")),
            max_attempts=controls.max_attempts or DEFAULT_MAX_ATTEMPTS,
            concurrency_key=controls.concurrency_key,
            expires_in_seconds=controls.expires_in_seconds,
            max_run_seconds=controls.max_run_seconds,
        )

    def subject(self, task: Task | None) -> tuple[str, str | None]:
        """The lease's subject id and workflow: the task, the workflow, or the space."""
        if task is not None:
            return task.id, task.workflow
        if self.kind is SubjectKind.WORKFLOW:
            slug = self.rule.subject["slug"]
            return workflow_subject_id(self.rule.space, slug), slug
        return self.rule.space, None

    def lease(self, lease_id: str, task: Task | None, stamps: dict[str, Any] | None) -> Lease:
        """The firing's first lease, pending on the pool (`stamps`: the schema's first-lease
        timeline stamps for this subject kind)."""
        rule, controls, now = self.rule, self.controls, self.now
        subject_id, workflow = self.subject(task)
        return Lease(
            event_type=LEASE_CREATED,
            tl=stamps,
            event_data={"pool": self.pool, "rule_id": rule.id, "rule": rule.name},
            updated_at=now,
            id=lease_id,
            job_id=self.job_id,
            space=rule.space,
            pool=self.pool,
            subject_kind=self.kind,
            subject_id=subject_id,
            task_id=task.id if task else None,
            task_key=task.key if task else None,
            workflow=workflow,
            state=LeaseState.PENDING,
            fence=1,
            attempt=1,
            created_at=now,
            priority=stored_priority(rule.subject.get("priority")),
            concurrency_key=controls.concurrency_key,
            queue_expires_at=queue_expiry(now, None, controls.expires_in_seconds),
            expires_in_seconds=controls.expires_in_seconds,
            max_run_seconds=controls.max_run_seconds,
        )

    def job(self, lease: Lease, task: Task | None, trigger: dict[str, Any] | None) -> Job:
        """The firing's job, under the occasion's id (written only if new: at most once)."""
        return Job(
            id=self.job_id,
            space=self.rule.space,
            pool=self.pool,
            subject_kind=self.kind,
            subject_id=lease.subject_id,
            task_id=task.id if task else None,
            task_key=task.key if task else None,
            lease_id=lease.id,
            max_attempts=self.controls.max_attempts or DEFAULT_MAX_ATTEMPTS,
            created_at=self.now,
            rule_id=self.rule.id,
            trigger=trigger,
        )


def render(template: str | None, data: dict[str, Any] | None, limit: int | None) -> str | None:
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

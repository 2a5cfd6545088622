"""The schema versions of the table's data: the version this release writes, the version from
which each change of the data model holds (below it, the service keeps serving as the release
before it did), and the meta row's state. The migrations that move the data from one version
to the next (app/migrations.py, `tenure admin migrate`) are apart: no request runs them, so
a request reads these without loading them (the worker function's cold start, `tenure bench
coldstart`)."""

from __future__ import annotations

from tenure.records import record

# The schema version this release writes and understands.
SCHEMA_VERSION = 16
# From this version on, a task lease's routine transitions are stamps on its row instead of
# timeline rows of their own (domain/timeline.py). A table an earlier release migrated stays
# below it until `tenure admin migrate` runs after this release is deployed everywhere: an
# instance of that earlier release, which knows neither stamps nor anchors (it would write a
# stamped lease back without them, and cannot read a lease row without `subject_id`), must
# not share the table with leases made that way. A table no release has migrated (a new
# stack) stamps from the start.
STAMPS_FROM_SCHEMA = 2
# From this version on, a claim may start its lease in the same write (claimed and started,
# two stamps on one row change). A reactor of an earlier release tells one event per row
# change, so it would put the start on the event bus and not the claim: such a claim waits
# until `tenure admin migrate` runs after this release is deployed everywhere (until then the
# claim is made alone and the first heartbeat starts the lease).
CLAIM_START_FROM_SCHEMA = 3
# From this version on, a task's first lease keeps its `lease.created` as a stamp and has no
# anchor row: a timeline read finds it by its id, derived from the task's. A timeline read of
# an earlier release finds leases by their anchors only, so it would miss that lease's events:
# such leases wait until `tenure admin migrate` runs after this release is deployed everywhere.
CREATED_STAMPS_FROM_SCHEMA = 4
# From this version on, a task's first job, opened with the task, has no row until it moves
# on (domain/model.py first_job_id): its first lease and its task imply it. An earlier
# release finds a task's lease through its job's row, so it would read such a task as
# having no run: such jobs wait until `tenure admin migrate` runs after this release is
# deployed everywhere.
IMPLIED_JOBS_FROM_SCHEMA = 5
# From this version on, every space has its list row (GET /spaces); spaces made before it
# are listed by the migration.
SPACE_LIST_FROM_SCHEMA = 6
# From this version on, every task is found by its key: a task filed since has an id derived
# from its key, and one filed before has a key row, written by the migration.
TASK_KEYS_FROM_SCHEMA = 7
# From this version on, a task's first lease made with its task has no entry in the space's
# lease list: the list finds it through its task's entry. A list of an earlier release reads
# the lease entries only, so it would miss such leases: they wait until `tenure admin migrate`
# runs after this release is deployed everywhere. Leases made before keep their entries (the
# list reads each lease through one of the two, never both).
LISTED_BY_TASK_FROM_SCHEMA = 8
# From this version on, every task with a child carries `has_children` on its row: filing
# sets it at a task's first child, and the migration sets it on tasks whose children were
# filed before the mark existed. A payload lists a task's children only when it is there.
CHILDREN_MARKED_FROM_SCHEMA = 9
# From this version on, filing writes a task's first lease and then the task, each on its
# own, instead of both in one transaction (which bills each item twice): the lease carries a
# "task pending" mark that a claim must honour (it reads the task before it writes, and ends
# the lease of a filing that died between its writes). A claim of an earlier release does
# not know the mark and would hand out such a lease before its task exists: filing waits for
# `tenure admin migrate` after this release is deployed everywhere.
UNTRANSACTED_FILING_FROM_SCHEMA = 10
# From this version on, a task no other task is linked to (no parent, no children, no
# dependents) gets no graph row for its success: its success is its newest lease's, and a
# filing that links to it later copies that success or waits for it, conditional on the
# lease. An earlier release reads a task's success only from its graph row, so it would take
# such a task's success for none (a dependent filed on it would wait forever), and its filing
# links to a task without the condition on its lease: the reactor writes every success to the
# graph row until `tenure admin migrate` runs after this release is deployed everywhere.
SUCCESSES_DERIVED_FROM_SCHEMA = 11
# From this version on, a lease that ended with no logs and no attachments stays out of the
# ended index: it has nothing to delete, and reads reclaimed once its pool's retention has
# passed since its end, with no write (domain/model.py derived_reclaimed_at). An earlier
# release reads a lease as reclaimed only once its sweeper has marked it, and its sweeper
# finds leases only in that index, so it would show such leases unreclaimed for ever: they
# wait until `tenure admin migrate` runs after this release is deployed everywhere. A lease
# marks itself as keeping detail with its first log stream or attachment, at any version;
# an earlier release did not (its ending wrote the mark), so a lease still held when the data
# reaches this version may have logs or attachments and no mark: the migration marks every
# held lease (a pending one has no lease token yet, so nothing of its own to keep), else its
# ending would leave its objects undeleted and its views would call it reclaimed.
DERIVED_RECLAIMS_FROM_SCHEMA = 12
# From this version on, a claim and a filing read their pool's row alone, fresh, for what its
# space and the instance say (the space archived; the space, the instance has a ceiling):
# every write that changes one of those copies it onto each pool row concerned before it
# answers (domain/model.py Pool.space_archived). An earlier release's archive or ceiling does
# not, and pools made before carry no copy: the migration writes each pool's copy from its
# space and the instance, and until the data is there a claim and a filing read the three
# rows fresh, as before.
POOL_GATES_FROM_SCHEMA = 13
# From this version on, every write that a worker heartbeat must report for a held lease
# raises its worker's signal epoch in the same transaction (domain/signals.py), so that a
# heartbeat may trust the epoch to say that nothing happened to the worker's leases. An
# earlier release's writers do not raise it: until `tenure admin migrate` runs after this
# release is deployed everywhere, heartbeats read every lease they name, as before.
WORKER_SIGNALS_FROM_SCHEMA = 14
# From this version on, a final report that claims the worker's next lease keeps that claim's
# intent on the lease it ends (`next_lease`, the lease the claim is taking) instead of in a
# claim_id record of its own. An earlier release's resent report looks for the record: until
# `tenure admin migrate` runs after this release is deployed everywhere, such a report writes
# the record, as before.
HANDOVER_INTENTS_FROM_SCHEMA = 15
# From this version on, a rule's firing writes its job (the occasion's lock, naming the lease
# and task to come) on its own, then the lease, then the task, instead of the three in one
# transaction. An earlier release that meets such a job before its lease (a concurrent or a
# later delivery of the occasion) answers a lease that does not exist yet and cannot finish
# the mint: until `tenure admin migrate` runs after this release is deployed everywhere,
# firings commit the three together, as before.
RULE_MINTS_FROM_SCHEMA = 16
# What an answer built on older data says about it.
BEHIND_NOTICE = "the table's data is older than this release: run `tenure admin migrate`"


@record
class SchemaState:
    """The meta row: the version the data is at, and, while a migration is under way, its
    name and where its next page starts. `step` counts the row's writes: each write expects
    the step it read, so two migrates at once cannot both move it."""

    version: int = 0
    migration: str | None = None
    cursor: str | None = None
    step: int = 0

"""Settings, parsed from the environment once (every variable but TENURE_TRACING, which
tracing.py reads at a handler's import)."""

from __future__ import annotations

import os
from dataclasses import field
from functools import lru_cache

from tenure.records import record

# Frozen dataclasses, not pydantic models: every value is a string or None as read below (the
# one number is converted where it is read), so a validating model checked nothing, and it
# made every function load pydantic before its first request, the worker function included,
# whose routes could otherwise run without it (`tenure bench coldstart`).


@record
class Settings:
    """What every function needs; `ENVIRONMENT` names where each field comes from."""

    table_name: str = "tenure"  # the single DynamoDB table
    region: str = "us-east-1"
    dynamodb_endpoint: str | None = None
    log_level: str = "INFO"
    # How often the sweeper is scheduled; a gap beyond this is the service's own absence.
    sweep_interval_seconds: float = 60.0
    # Rules' schedules: the group they live in, the function they invoke and the
    # role Scheduler assumes to invoke it. Only the API function creates schedules.
    schedule_group: str = "default"
    scheduler_target_arn: str | None = None
    scheduler_role_arn: str | None = None
    # Where attachments' bytes and lease logs live (None: this deployment has none).
    attachments_bucket: str | None = None
    log_group: str | None = None
    # The bucket SES stores inbound mail in: a notification naming another is refused (None:
    # not checked).
    inbound_bucket: str | None = None
    # The local stack's moto server, standing in for S3 and CloudWatch Logs.
    aws_endpoint: str | None = None
    # The local stack's: the access key id the S3 client signs with, so the one its presigned
    # URLs name, instead of the process's own. DynamoDB Local checks no signature and files
    # the stack's tables under that own id, which no URL may therefore show.
    s3_access_key_id: str | None = None
    # The bus the reactor publishes task.wake_creator on (None: not published).
    event_bus: str | None = None
    # Which lease and task transitions the reactor publishes there: endings, all or none.
    outbound_events: str = "endings"
    # The claim function's own URL (its base, /api/v1 included), which the worker function
    # names on its claim answers so that clients long-poll there (None: there is none).
    claim_url: str | None = None


# Field -> (variable, who sets it). "template": infra/template.yaml must set it for every
# function (a test checks); "runtime": Lambda sets it; "local": only the local stack does.
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "table_name": ("TENURE_TABLE", "template"),
    "region": ("AWS_REGION", "runtime"),
    "dynamodb_endpoint": ("TENURE_DYNAMODB_ENDPOINT", "local"),
    "log_level": ("POWERTOOLS_LOG_LEVEL", "template"),
    "sweep_interval_seconds": ("TENURE_SWEEP_INTERVAL_SECONDS", "template"),
    # "template:<Function>": the template sets it on that function (tests/infra checks).
    "schedule_group": ("TENURE_SCHEDULE_GROUP", "template:ApiFunction"),
    "scheduler_target_arn": ("TENURE_SCHEDULER_TARGET_ARN", "template:ApiFunction"),
    "scheduler_role_arn": ("TENURE_SCHEDULER_ROLE_ARN", "template:ApiFunction"),
    "attachments_bucket": ("TENURE_ATTACHMENTS_BUCKET", "template"),
    "log_group": ("TENURE_LOG_GROUP", "template"),
    "inbound_bucket": ("TENURE_INBOUND_BUCKET", "template:InboundFunction"),
    "aws_endpoint": ("TENURE_AWS_ENDPOINT", "local"),
    "s3_access_key_id": ("TENURE_S3_ACCESS_KEY_ID", "local"),
    "event_bus": ("TENURE_EVENT_BUS", "template:ReactorFunction"),
    "outbound_events": ("TENURE_OUTBOUND_EVENTS", "template:ReactorFunction"),
    "claim_url": ("TENURE_CLAIM_URL", "template:WorkerFunction"),
}


@record
class LocalSettings:
    port: int = 8787
    admin_token: str | None = None
    cache_dir: str = field(default_factory=lambda: os.path.expanduser("~/.cache/tenure"))
    require_engines: bool = False
    # Test-only fault hooks (tests/reliability): a JSON file the local stack's processes read
    # for injected DynamoDB throttling and a paused sweeper. Unset (always, under `make local`):
    # no hook is installed at all.
    test_faults_file: str | None = None


@lru_cache(maxsize=1)
def settings() -> Settings:
    env = os.environ
    return Settings(
        table_name=env.get("TENURE_TABLE", "tenure"),
        region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
        dynamodb_endpoint=env.get("TENURE_DYNAMODB_ENDPOINT") or None,
        log_level=env.get("POWERTOOLS_LOG_LEVEL", "INFO"),
        sweep_interval_seconds=float(env.get("TENURE_SWEEP_INTERVAL_SECONDS", "60")),
        schedule_group=env.get("TENURE_SCHEDULE_GROUP") or "default",
        scheduler_target_arn=env.get("TENURE_SCHEDULER_TARGET_ARN") or None,
        scheduler_role_arn=env.get("TENURE_SCHEDULER_ROLE_ARN") or None,
        attachments_bucket=env.get("TENURE_ATTACHMENTS_BUCKET") or None,
        log_group=env.get("TENURE_LOG_GROUP") or None,
        inbound_bucket=env.get("TENURE_INBOUND_BUCKET") or None,
        aws_endpoint=env.get("TENURE_AWS_ENDPOINT") or None,
        s3_access_key_id=env.get("TENURE_S3_ACCESS_KEY_ID") or None,
        event_bus=env.get("TENURE_EVENT_BUS") or None,
        outbound_events=env.get("TENURE_OUTBOUND_EVENTS") or "endings",
        claim_url=env.get("TENURE_CLAIM_URL") or None,
    )


def local_settings() -> LocalSettings:
    env = os.environ
    return LocalSettings(
        port=int(env.get("TENURE_PORT", "8787")),
        admin_token=env.get("TENURE_ADMIN_TOKEN") or None,
        cache_dir=env.get("TENURE_CACHE_DIR") or os.path.expanduser("~/.cache/tenure"),
        require_engines=env.get("TENURE_REQUIRE_ENGINES", "") not in ("", "0"),
        test_faults_file=env.get("TENURE_TEST_FAULTS_FILE") or None,
    )


def export(name: str, value: str) -> None:
    """Set a variable for this process and the processes it starts (local stack only)."""
    os.environ[name] = value
    settings.cache_clear()

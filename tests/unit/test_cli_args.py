"""`tenure local`'s flags: a value that cannot work is refused by argparse (exit 2, one line
naming the flag) before anything starts."""

from __future__ import annotations

import pytest
from tenure_cli.main import parser


@pytest.mark.parametrize("value", ["0", "-1", "-0.5", "abc", "nan", "inf"])
def test_a_sweep_interval_that_is_not_a_positive_number_is_refused(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        parser().parse_args(["local", f"--sweep-interval={value}"])
    assert ended.value.code == 2
    (error,) = [x for x in capsys.readouterr().err.splitlines() if "error:" in x]
    assert "argument --sweep-interval" in error


def test_a_positive_sweep_interval_and_the_default_are_kept() -> None:
    assert parser().parse_args(["local", "--sweep-interval", "0.5"]).sweep_interval == 0.5
    assert parser().parse_args(["local"]).sweep_interval == 60.0


def test_a_port_that_is_not_a_number_is_refused_the_same_way(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        parser().parse_args(["local", "--port", "abc"])
    assert ended.value.code == 2 and "argument --port" in capsys.readouterr().err


def test_pools_create_carries_the_agent_or_classifier_settings_a_pool_of_that_kind_needs() -> None:
    from tenure_cli.commands.pools import kind_settings

    args = parser().parse_args(
        ["pools", "create", "--name", "a", "--space", "OPS", "--kind", "agent", "--model", "m-1"]
    )
    assert kind_settings(args) == {"agent": {"model": "m-1"}}
    args = parser().parse_args(
        ["pools", "create", "--name", "c", "--space", "OPS", "--kind", "classifier",
         "--classifier", '{"input": {"q": 1}}']
    )  # fmt: skip
    assert kind_settings(args) == {"classifier": {"input": {"q": 1}}}


def test_pools_create_carries_the_retry_policy_only_when_asked() -> None:
    from tenure.api import models as m
    from tenure_cli.commands.pools import retry_settings

    base = ["pools", "create", "--name", "p", "--space", "OPS"]
    assert retry_settings(parser().parse_args(base)) == {}
    asked = parser().parse_args(
        [*base, "--retry-on-failure", "--retry-max-seconds", "60", "--retry-jitter", "no"]
    )
    body = retry_settings(asked)
    assert body == {"retry": {"on_failure": True, "backoff": {"max_seconds": 60, "jitter": False}}}
    # The body the CLI sends is one the API takes.
    settings = m.RetrySettings.model_validate(body["retry"])
    assert (settings.backoff.initial_seconds, settings.backoff.max_seconds) == (10, 60)


def test_pools_create_and_update_carry_the_key_and_rate_controls_only_when_asked() -> None:
    from tenure.api import models as m
    from tenure_cli.commands.pools import control_settings

    base = ["pools", "create", "--name", "p", "--space", "OPS"]
    assert control_settings(parser().parse_args(base)) == {}
    asked = parser().parse_args(
        [*base, "--max-active-per-key", "2", "--max-claims-per-minute", "30"]
    )
    body = control_settings(asked)
    assert body == {"max_active_per_key": 2, "max_claims_per_minute": 30}
    m.PoolCreate.model_validate({"name": "p", "space": "OPS", "kind": "command", **body})
    lifted = parser().parse_args(
        ["pools", "update", "p", "--per-key-unlimited", "--rate-unlimited"]
    )
    assert control_settings(lifted) == {"max_active_per_key": None, "max_claims_per_minute": None}
    m.PoolPatch.model_validate(control_settings(lifted))


def test_worker_delegate_takes_a_concurrency_key() -> None:
    args = parser().parse_args(["worker", "delegate", "--title", "t", "--concurrency-key", "k"])
    assert args.concurrency_key == "k"


def test_tasks_create_sends_priority_and_the_queue_timeout_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tenure_cli.commands import worker

    sent: list[dict[str, object]] = []

    class _Client:
        def call(self, method: str, path: str, body: dict[str, object]) -> tuple[int, dict]:
            sent.append(body)
            return 201, {"task": {}, "lease": None}

    monkeypatch.setattr(worker, "operator_client", lambda args: _Client())
    monkeypatch.setattr(worker, "show", lambda answer, args: 0)
    base = ["tasks", "create", "--space", "OPS", "--title", "t"]
    asked = [*base, "--priority", "8", "--expires-in", "10m", "--concurrency-key", "acme"]
    worker.tasks_create(parser().parse_args(asked))
    worker.tasks_create(parser().parse_args(base))
    assert sent[0]["priority"] == 8 and sent[0]["expires_in_seconds"] == 600
    assert sent[0]["concurrency_key"] == "acme"
    assert not {"priority", "expires_in_seconds", "concurrency_key"} & set(sent[1])

"""A failed job's `error` says why: its exit status and its last stderr lines, bounded."""

from __future__ import annotations

from tenure_worker.jobs import ERROR_CHARS, failure_error


def test_the_error_names_the_status_and_the_last_non_empty_stderr_lines() -> None:
    tail = "warming up\nloading shards\n\nerror: index shard 3 is corrupt\n\n  \n"
    assert failure_error(3, tail) == (
        "exit status 3: warming up | loading shards | error: index shard 3 is corrupt"
    )


def test_only_the_last_three_lines_are_kept() -> None:
    tail = "".join(f"line {n}\n" for n in range(10))
    assert failure_error(1, tail) == "exit status 1: line 7 | line 8 | line 9"


def test_no_stderr_leaves_the_status_alone() -> None:
    assert failure_error(2, "") == "exit status 2"
    assert failure_error(2, "\n \n") == "exit status 2"


def test_the_error_is_bounded_and_keeps_the_newest_words() -> None:
    earlier = "x" * 300
    last = "y" * 300 + " the real reason"
    error = failure_error(7, f"{earlier}\n{last}\n")
    assert len(error) <= ERROR_CHARS
    assert error.startswith("exit status 7: ") and "xx" not in error  # no room for the earlier
    assert error.endswith("y the real reason")
    huge = failure_error(7, "z" * 10_000 + " end\n")
    assert len(huge) <= ERROR_CHARS and huge.endswith("z end") and "…" in huge

"""Ratchets on the traced path of a `complete` and of a claim (tests/unit/paths.py says what
counts): a change that lengthens either path, or adds a read to it, fails here."""

from __future__ import annotations

import inspect

from tests.unit.fake_store import FakeStore
from tests.unit.paths import WRITES, Trace, trace_claim, trace_complete, trace_fail_retrying
from tests.unit.support import Rig

# Today's figures. When a change shortens a path (fewer files, fewer reads), move the
# constant down to the new figure in the same commit, so the gain cannot be lost again.
# Never move one up to make a change pass: shorten the change's path instead. (The claim's
# went from 31 to 35 once, when its one 727-line module became a package of one module per
# part - the long poll, the candidates, the try, the record's states - and the pure terms
# moved to domain: the same calls, read in smaller rooms. Both went up once more, by five
# and two, when the kernel's catalog, schema gates, stale reports and lease-token reads became
# classes of their own and the successor lease a pure domain function. The claim's reads
# went from 10 to 8 when its pool row came to say what its space and the instance say.)
COMPLETE_FILES = 18
COMPLETE_READS = 1
CLAIM_FILES = 33
CLAIM_READS = 8


def _shown(trace: Trace) -> str:
    return "\n".join(trace.lines("traced"))


def test_a_complete_goes_through_no_more_files_and_reads_than_today() -> None:
    traced = trace_complete()
    assert traced.status == 200, _shown(traced)
    assert len(traced.files) <= COMPLETE_FILES, _shown(traced)
    assert len(traced.reads) <= COMPLETE_READS, _shown(traced)
    assert traced.writes == ["commit"], _shown(traced)  # the one conditional write


def test_a_claim_goes_through_no_more_files_and_reads_than_today() -> None:
    traced = trace_claim()
    assert traced.status == 200, _shown(traced)
    assert len(traced.files) <= CLAIM_FILES, _shown(traced)
    assert len(traced.reads) <= CLAIM_READS, _shown(traced)
    assert "commit" in traced.writes, _shown(traced)


def test_the_tracer_sees_the_retry_branch_a_plain_complete_skips() -> None:
    plain = trace_complete()
    retried = trace_fail_retrying()
    assert retried.status == 200, _shown(retried)
    # The retry policy is only read for a failure on a pool that retries: its file, the new
    # run's reads (the task, its job) and the longer path must all show.
    assert any(f.endswith("/retry.py") for f in retried.files), _shown(retried)
    assert "domain/retry.py" not in " ".join(plain.files)
    assert len(retried.reads) > len(plain.reads), _shown(retried)
    assert retried.writes == ["commit"], _shown(retried)  # the next run joins the one commit


def test_the_tracer_counts_what_runs_and_no_more() -> None:
    traced = trace_complete()
    assert traced.files[0].startswith("tenure/api/"), traced.files  # entered by the handler
    assert traced.calls >= len(traced.files) > 1
    assert traced.returns <= traced.moves
    # Every file the path moved into after the first was a move: moves cover the files.
    assert traced.moves >= len(traced.files) - 1


def test_the_stream_reactions_run_after_the_trace_and_are_not_counted() -> None:
    rig = Rig()
    traced = trace_complete(rig)
    assert traced.status == 200
    ended = [row.lease for row in rig.store.lease_rows.values()]
    assert [lease.state.value for lease in ended] == ["completed", "completed"]
    for lease in ended:  # the held reactions were played: the graph counted each success
        assert rig.store.get_graph(lease.task_id or "").succeeded_lease == lease.id


def test_every_method_the_fake_tallies_as_a_write_is_counted_as_one() -> None:
    methods = dict(inspect.getmembers(FakeStore, inspect.isfunction))
    assert methods.keys() >= WRITES, sorted(WRITES - methods.keys())  # no stale name
    tallied = {
        name
        for name, method in methods.items()
        if f'self.writes.append("{name}")' in inspect.getsource(method)
    }
    assert tallied and tallied <= WRITES, sorted(tallied - WRITES)

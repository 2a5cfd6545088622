"""The claim: a worker takes a pending lease, fenced, within the ceilings.

service.py     Claims: claim-next, claim-exact, a claim_id's retry, the answer again
poll.py        the one long poll both kinds of claim wait in
candidates.py  which candidate next: priority tiers, spreading after a lost race, keys
               and minutes known full
intent.py      the claim_id record as a state machine (what the model checker drives)
record.py      that record's reads and writes
attempt.py     one try at one candidate (its pure terms: domain/claims.py)
waits.py       at most MAX_WAITING_CLAIMS waiting claims per worker token
"""

from tenure.app.leases.claims.answer import Claimed, Withdraw
from tenure.app.leases.claims.attempt import CLAIM_ID_KEEP_SECONDS
from tenure.app.leases.claims.candidates import (
    CLAIM_CANDIDATES,
    CONTENDED_CANDIDATES,
    CONTENDED_MS,
)
from tenure.app.leases.claims.poll import CLAIM_POLL_SECONDS
from tenure.app.leases.claims.service import BEFORE_EMPTY_ROUNDS, MAX_CLAIM_TRIES, Claims
from tenure.app.leases.claims.waits import MAX_WAITING_CLAIMS, Waiter, Waits

__all__ = [
    "BEFORE_EMPTY_ROUNDS",
    "CLAIM_CANDIDATES",
    "CLAIM_ID_KEEP_SECONDS",
    "CLAIM_POLL_SECONDS",
    "CONTENDED_CANDIDATES",
    "CONTENDED_MS",
    "MAX_CLAIM_TRIES",
    "MAX_WAITING_CLAIMS",
    "Claimed",
    "Claims",
    "Waiter",
    "Waits",
    "Withdraw",
]

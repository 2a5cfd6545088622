"""Inbound addresses: giving an address to a space, listing a space's, taking one back.

Which space receives a mail is decided here, not by a rule: an address belongs to one space,
and only that space's `email.received` rules may name it and are fired by mail to it. So
giving and taking addresses is for an admin of every space (a token not limited to spaces):
an admin of one space cannot reach for another's mail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.rules.ports import RuleStore
from tenure.domain import authz
from tenure.domain.errors import NotFound, ValidationFailed
from tenure.domain.model import Principal
from tenure.domain.rules.addresses import MAX_ADDRESSES_PER_SPACE, Address, check_address

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class Addresses:
    def __init__(self, kernel: Kernel, *, rules: RuleStore) -> None:
        self.kernel = kernel
        self.rules = rules

    def add_address(self, actor: Principal, space: str, address: str) -> Address:
        authz.require_operator(actor, "admin")
        self.kernel.catalog.space(space)
        wanted = check_address(address)
        held = self.rules.get_address(wanted)
        if held is not None and held.space == space:
            return held
        if len(self.rules.list_addresses(space, MAX_ADDRESSES_PER_SPACE)) >= (
            MAX_ADDRESSES_PER_SPACE
        ):
            raise ValidationFailed(
                f"address: space {space!r} already has {MAX_ADDRESSES_PER_SPACE} addresses"
            )
        return self.rules.put_address(Address(wanted, space, self.kernel.clock.now_ms()))

    def list_addresses(self, actor: Principal, space: str) -> list[Address]:
        authz.require_operator(actor, "read", space)
        self.kernel.catalog.space(space)
        return self.rules.list_addresses(space, MAX_ADDRESSES_PER_SPACE)

    def remove_address(self, actor: Principal, space: str, address: str) -> None:
        """Rules naming it stay, and stop matching it: matching asks who owns each
        recipient, and a deleted address is owned by no one."""
        authz.require_operator(actor, "admin")
        self.kernel.catalog.space(space)
        try:
            wanted = check_address(address)
        except ValidationFailed:
            raise NotFound(f"address {address[:80]} is not an address of space {space!r}") from None
        self.rules.delete_address(space, wanted)

    def not_owned(self, space: str, addresses: tuple[str, ...]) -> list[str]:
        """Those of `addresses` the space does not own (one batch read)."""
        owners = self.rules.address_owners(list(addresses))
        return [a for a in addresses if owners.get(a) != space]

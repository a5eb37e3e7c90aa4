"""Lease leader election (webhook.cluster.lease) against the fake API server."""

from __future__ import annotations

from fakeapi import LEASES, FakeAPI

from webhook.cluster.lease import LeaseElector


def test_lease_absent_is_created(fake: FakeAPI) -> None:
    elector = LeaseElector(fake.api(), "karta-system", holder="me_1")
    assert elector.try_acquire_or_renew()
    assert fake.seen("POST", LEASES) == 1
    assert elector.try_acquire_or_renew()  # renew
    other = LeaseElector(fake.api(), "karta-system", holder="other_2")
    assert not other.try_acquire_or_renew()
    elector.release()
    # released: the record changed (no holder), the other one takes it at once
    assert other.try_acquire_or_renew()

from __future__ import annotations

import pytest

from kafeed.prepare import DedupState, content_hash
from kafeed.prepare.dedup import HASH_BYTES, changelog_key, parse_changelog_key


def test_content_hash_is_16_bytes_and_stable() -> None:
    h = content_hash("hello")
    assert len(h) == HASH_BYTES == 16
    assert h == content_hash("hello") != content_hash("hello ")
    assert h.hex() == "46fb7408d4f285228f4af516ea25851b"


def test_changelog_key_round_trip() -> None:
    h = content_hash("x")
    key = changelog_key(5, h)
    assert key[:4] == b"\x00\x00\x00\x05"
    assert parse_changelog_key(key) == (5, h)
    with pytest.raises(ValueError):
        parse_changelog_key(key[:-1])


def test_pending_until_commit_and_rollback_forgets() -> None:
    state = DedupState()
    a, b = content_hash("a"), content_hash("b")
    assert state.check_and_add(0, a)
    assert not state.check_and_add(0, a)          # duplicate within the batch
    assert state.check_and_add(1, a)              # other partition: separate state
    assert state.pending() == {0: {a}, 1: {a}}
    state.rollback()                               # transaction aborted
    assert state.check_and_add(0, a)              # forgotten, so new again
    state.commit()
    assert state.pending() == {}
    assert not state.check_and_add(0, a)
    assert state.check_and_add(0, b)
    state.commit()
    assert state.size(0) == 2


def test_rebuild_replaces_and_revoke_drops() -> None:
    state = DedupState()
    a, b = content_hash("a"), content_hash("b")
    state.check_and_add(2, a)
    state.commit()
    state.load_partition(2, {b})                  # rebuilt from the changelog
    assert state.check_and_add(2, a) and not state.check_and_add(2, b)
    state.drop_partition(2)
    assert state.partitions() == [] and state.pending() == {}


def test_state_dict_round_trip() -> None:
    state = DedupState()
    state.check_and_add(3, content_hash("a"))
    state.commit()
    saved = state.state_dict()
    assert saved["version"] == 1
    other = DedupState()
    other.load_state_dict(saved)
    assert not other.check_and_add(3, content_hash("a"))
    with pytest.raises(ValueError):
        other.load_state_dict({"version": 99, "seen": {}})


def test_layers_for_overlapped_commits() -> None:
    state = DedupState()
    a, b = content_hash("a"), content_hash("b")
    state.new_layer()
    assert state.check_and_add(0, a)              # batch N
    state.new_layer()
    assert not state.check_and_add(0, a)          # batch N+1 sees N's pending hash
    assert state.check_and_add(0, b)
    assert state.pending() == {0: {b}}            # N+1's changelog holds only its own
    state.commit()                                 # N committed
    assert state.size(0) == 1 and state.pending() == {0: {b}}
    state.rollback()                               # N+1 failed
    assert state.size(0) == 1 and state.check_and_add(0, b)

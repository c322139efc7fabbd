"""The resume policy, without Kafka: exact vs elastic vs fresh, and a state against the log."""

from __future__ import annotations

from typing import Any

import pytest

from kafeed.errors import ResumeMismatch
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state.checkpoint import check_state, empty_state, next_epoch
from kafeed.loader.state.resume import (
    PartitionStart,
    check_known_partitions,
    check_saved_partitions,
    choose_resume,
    done_at_open,
    exact_starts,
    plan_starts,
)
from tests.stream_entries import stream_entry

SETTINGS = LoaderSettings(topics=("tok",), seq_len=8, eos_id=0, shuffle_buffer=4)
RNG = {"bit_generator": "PCG64", "state": {"state": 5, "inc": 7}, "has_uint32": 0, "uinteger": 0}


def _reader(index: int, key: str, nxt: int, read: int, carry: list[Any] | None = None) -> dict[str, Any]:
    return stream_entry(index, {key: {"next": nxt, "read": read, "end": 50, "delivered": []}}, rr=1,
                        stats=(3, 1, 9), rng=RNG, items=[[key, nxt]] if read > nxt else [], carry=carry or [])


def _state(readers: dict[str, Any], num: int) -> dict[str, Any]:
    state = empty_state(SETTINGS)
    state.update(num_readers=num, readers=readers)
    return check_state(state, SETTINGS)


TWO = {"0": _reader(0, "tok:0", 3, 9), "1": _reader(1, "tok:1", 4, 6, carry=[["tok:1", 5, 2]])}


def test_no_state_or_an_empty_one_is_fresh() -> None:
    for saved in (None, empty_state(SETTINGS)):
        resume = choose_resume(saved, mode="static", index=0, count=2)
        assert resume.entry is None and resume.plan is None


def test_same_reader_count_resumes_exactly_from_its_own_entry() -> None:
    resume = choose_resume(_state(TWO, 2), mode="static", index=1, count=2)
    assert resume.entry == TWO["1"] and resume.plan is None


def test_a_missing_own_entry_is_refused() -> None:
    with pytest.raises(ResumeMismatch, match=r"no entry for reader 1 \(rank 0, worker 1\)"):
        choose_resume(_state({"0": TWO["0"]}, 2), mode="static", index=1, count=2, worker=1)


def test_another_reader_count_resumes_elastically_from_every_partition() -> None:
    resume = choose_resume(_state(TWO, 2), mode="static", index=0, count=3)
    assert resume.entry is None and resume.plan is not None
    assert resume.plan["tok:1"] == {"next": 4, "end": 50, "delivered": set(), "partial": {5: 2}}
    assert sorted(resume.plan) == ["tok:0", "tok:1"]


def test_an_elastic_resumes_first_reader_counts_on_from_the_saved_records() -> None:
    # reader 0: 3 records, 1 of them buffered; reader 1: 3, 1 buffered and 1 in the packer's carry
    first = choose_resume(_state(TWO, 2), mode="static", index=0, count=3)
    assert first.stats == {"records": 3, "bad": 2}
    assert choose_resume(_state(TWO, 2), mode="static", index=1, count=3).stats == {}


def test_a_document_partly_emitted_before_an_elastic_resume_stays_in_the_next_state() -> None:
    # Saved after an elastic resume, before the new owner came to offset 7: its partial count
    # goes on, to the next elastic plan and to an exact resume alike.
    reader = _reader(0, "tok:0", 3, 9)
    reader["reader"]["partitions"]["tok:0"]["partial"] = [[7, 4]]
    resume = choose_resume(_state({"0": reader, "1": TWO["1"]}, 2), mode="static", index=0, count=1)
    assert resume.plan is not None and resume.plan["tok:0"]["partial"] == {7: 4}
    assert exact_starts(reader["reader"]["partitions"], [])["tok:0"].partial == {7: 4}


def test_elastic_needs_every_reader() -> None:
    with pytest.raises(ResumeMismatch, match="needs every reader's entry"):
        choose_resume(_state({"0": TWO["0"]}, 2), mode="static", index=0, count=3)


def test_group_mode_is_always_elastic_and_takes_what_it_has() -> None:
    settings = LoaderSettings(topics=("tok",), seq_len=8, eos_id=0, mode="group", group="g")
    state = empty_state(settings)
    state.update(num_readers=2, readers={"0": {**TWO["0"], "shuffle": None}})
    resume = choose_resume(check_state(state, settings), mode="group", index=0, count=2)
    assert resume.entry is None and resume.plan is not None and list(resume.plan) == ["tok:0"]


def test_exact_starts_re_read_the_in_flight_records() -> None:
    starts = exact_starts(TWO["1"]["reader"]["partitions"], [("tok:1", 4), ("tok:1", 5)])
    assert starts == {"tok:1": PartitionStart(next=4, read=6, end=50, delivered=set(), restore={4, 5})}


def test_plan_starts_read_again_from_next() -> None:
    starts = plan_starts({"tok:0": {"next": 3, "end": None, "delivered": {5}, "partial": {3: 2}}})
    assert starts == {"tok:0": PartitionStart(next=3, read=3, end=None, delivered={5}, partial={3: 2})}


def test_saved_partitions_must_still_exist() -> None:
    check_saved_partitions(["tok:0", "tok:1"], [("tok", 0), ("tok", 1), ("tok", 2)])
    with pytest.raises(ResumeMismatch, match="partition 2 of topic 'tok', which now has 2 partition"):
        check_saved_partitions(["tok:2"], [("tok", 0), ("tok", 1)])


@pytest.mark.parametrize(("start", "done"), [
    (PartitionStart(next=50, read=50, end=50), True),
    (PartitionStart(next=60, read=60, end=50), True),
    (PartitionStart(next=49, read=50, end=50), False),
    (PartitionStart(next=50, read=52, end=50, restore={50}), False),  # a record to re-read first
    (PartitionStart(next=10**9, read=10**9, end=None), False),  # unbounded never ends
])
def test_done_at_open(start: PartitionStart, done: bool) -> None:
    assert done_at_open(start) is done


def test_next_epoch_forgets_positions_and_keeps_the_shuffle_rng() -> None:
    state = _state(TWO, 2)
    state["next_worker"] = {"0": 1}
    fresh = next_epoch(state)
    assert check_state(fresh, SETTINGS) == fresh
    for key, reader in fresh["readers"].items():
        assert reader["reader"]["partitions"] == {} and reader["shuffle"]["items"] == []
        assert reader["packer"]["carry"] == []
        assert reader["shuffle"]["rng"] == RNG and reader["reader"]["stats"] == TWO[key]["reader"]["stats"]
    assert fresh["next_worker"] == {} and state["readers"]["0"]["reader"]["partitions"]  # input untouched
    assert choose_resume(fresh, mode="static", index=0, count=2).entry == fresh["readers"]["0"]


def test_every_partition_the_state_knew_must_be_in_it() -> None:
    known = choose_resume(_state(TWO, 2), mode="static", index=0, count=1).known
    assert known == {"tok": 1}
    check_known_partitions(["tok:0", "tok:1"], ["tok:0", "tok:1"], known)
    check_known_partitions(["tok:0"], ["tok:0", "tok:2", "tok:3"], known)  # added since: fresh
    check_known_partitions([], ["other:0"], known)  # a topic the state never named
    with pytest.raises(ResumeMismatch, match="no position for partition 1 of topic 'tok', which existed "
                                             r"when it was saved \(it names partition 2\)"):
        check_known_partitions(["tok:0", "tok:2"], ["tok:0", "tok:1", "tok:2"], {"tok": 2})


def test_an_exact_resume_knows_every_readers_partitions() -> None:
    resume = choose_resume(_state(TWO, 2), mode="static", index=0, count=2)
    assert resume.entry == TWO["0"] and resume.known == {"tok": 1}
    with pytest.raises(ResumeMismatch, match="partition 1 of topic 'tok'"):
        check_known_partitions(resume.entry["reader"]["partitions"], ["tok:0", "tok:1"], resume.known)

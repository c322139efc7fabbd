"""A saved loader state is validated when loaded: the field at fault is named, and nothing
but a KafeedError ever escapes, whatever the state holds."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafeed
from kafeed.errors import KafeedError, ResumeMismatch
from kafeed.loader.nodes.shuffle import ShuffleBuffer
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state.checkpoint import check_positions, check_state, empty_state
from tests.stream_entries import layout_1

SETTINGS = LoaderSettings(topics=("tok",), seq_len=8, eos_id=0, shuffle_buffer=4)


def _stream(index: int, partitions: dict[str, Any], rr: int, stats: list[int], rng: Any,
            items: list[Any], carry: list[Any]) -> dict[str, Any]:
    return {"version": 1, "index": index,
            "reader": {"version": 1, "partitions": partitions, "rr": rr,
                       "stats": dict(zip(("records", "bad", "tokens"), stats, strict=True))},
            "shuffle": {"version": 1, "rng": rng, "items": items},
            "packer": {"version": 1, "carry": carry}}


def valid_state() -> dict[str, Any]:
    """What a 2-reader run over tok:0..2 saves, shuffle and carry included."""
    buffer: ShuffleBuffer[int] = ShuffleBuffer(4, [0, 0])
    rng = buffer.state()["rng"]
    state = empty_state(SETTINGS)
    state["num_readers"] = 2
    state["readers"] = {
        "0": _stream(0, {"tok:0": {"next": 3, "read": 12, "end": 40, "delivered": [5, 7]},
                         "tok:2": {"next": 9, "read": 9, "end": 9, "delivered": []}},
                     1, [9, 1, 310], rng, [["tok:0", 4], ["tok:0", 8]], [["tok:0", 3, 6]]),
        "1": _stream(1, {"tok:1": {"next": 0, "read": 0, "end": None, "delivered": []}},
                     0, [0, 0, 0], rng, [], []),
    }
    state["next_worker"] = {"0": 1}
    return json.loads(json.dumps(state))


def test_a_real_state_passes() -> None:
    state = valid_state()
    assert check_state(copy.deepcopy(state), SETTINGS) == state


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(state: dict[str, Any]) -> None:
        node: Any = state
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return apply


def _drop(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def apply(state: dict[str, Any]) -> None:
        node: Any = state
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return apply


VALID_JSON = json.dumps(valid_state())
LAYOUT_1_JSON = json.dumps(layout_1(valid_state()))
R0 = ["readers", "0"]
P0 = [*R0, "reader", "partitions", "tok:0"]

# (mutation, text the error must contain: the field at fault)
CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("unknown top key", _set(["extra"], 1), "unknown key(s) 'extra'"),
    ("missing top key", _drop(["next_worker"]), "lacks 'next_worker'"),
    ("version 3", _set(["version"], 3), "version 3 is not supported"),
    ("version true", _set(["version"], True), "version True is not supported"),
    ("stream version", _set([*R0, "version"], 7), "readers['0'] (stream node) version 7 is not supported"),
    ("reader version", _set([*R0, "reader", "version"], 7), ".reader (reader node) version 7"),
    ("shuffle version", _set([*R0, "shuffle", "version"], 7), ".shuffle (shuffle node) version 7"),
    ("packer version", _set([*R0, "packer", "version"], 0), ".packer (packer node) version 0"),
    ("fingerprint", _set(["fingerprint", "seq_len"], 9), "seq_len: saved 9"),
    ("mode", _set(["mode"], "group"), "mode 'group'"),
    ("num_readers 0", _set(["num_readers"], 0), "num_readers is 0"),
    ("reader key", _set(["readers", "x"], {}), "readers has key 'x'"),
    ("reader past count", _set(["readers", "5"], {}), "has reader 5, but num_readers is 2"),
    ("reader index", _set([*R0, "index"], 1), "readers['0'].index is 1"),
    ("reader unknown key", _set([*R0, "extra"], 0), "readers['0'] has unknown key(s) 'extra'"),
    ("partition key", _set([*R0, "reader", "partitions", "tok"], {}), "has key 'tok'"),
    ("other topic", _set([*R0, "reader", "partitions", "other:0"], {}), "partition 'other:0'"),
    ("next float", _set([*P0, "next"], 3.0), "['tok:0'].next is not an integer"),
    ("next bool", _set([*P0, "next"], True), "['tok:0'].next is not an integer"),
    ("next string", _set([*P0, "next"], "3"), "['tok:0'].next is not an integer"),
    ("next negative", _set([*P0, "next"], -1), "['tok:0'].next is -1, below 0"),
    ("read below next", _set([*P0, "read"], 2), "['tok:0'].read (2) is below next (3)"),
    ("end below read", _set([*P0, "end"], 10), "['tok:0'].end (10) is below offsets already read"),
    ("end negative", _set([*P0, "end"], -4), "['tok:0'].end is -4"),
    ("delivered outside", _set([*P0, "delivered"], [5, 12]), "['tok:0'].delivered[1] (12) is outside"),
    ("delivered twice", _set([*P0, "delivered"], [5, 5]), "delivered[1] (5) is listed twice"),
    ("delivered not list", _set([*P0, "delivered"], {"5": 1}), "delivered is not a list"),
    ("partition missing key", _drop([*P0, "end"]), "['tok:0'] lacks 'end'"),
    ("buffer foreign key", _set([*R0, "shuffle", "items", 0], ["tok:1", 4]), "shuffle.items[0][0]"),
    ("buffer outside", _set([*R0, "shuffle", "items", 0], ["tok:0", 2]), "items[0][1] (2) is outside"),
    ("buffer shape", _set([*R0, "shuffle", "items", 0], ["tok:0"]), "items[0] is not a list of 2"),
    ("rng null with buffer", _set([*R0, "shuffle", "rng"], None), "shuffle.rng is not a mapping"),
    ("rng generator", _set([*R0, "shuffle", "rng", "bit_generator"], "MT19937"), "rng.bit_generator"),
    ("rng state", _set([*R0, "shuffle", "rng", "state", "inc"], -1), "rng.state.inc is -1"),
    ("carry emitted", _set([*R0, "packer", "carry", 0], ["tok:0", 3, -1]), "carry[0][2] is -1"),
    ("carry outside", _set([*R0, "packer", "carry", 0], ["tok:0", 40, 1]), "carry[0][1] (40)"),
    ("no packer", _set([*R0, "packer"], None), "readers['0'].packer is not a mapping"),
    ("stats", _set([*R0, "reader", "stats", "bad"], "1"), "stats.bad is not an integer"),
    ("stats key", _drop([*R0, "reader", "stats", "tokens"]), "stats lacks 'tokens'"),
    ("next_worker", _set(["next_worker", "0"], 2), "next_worker['0'] is 2"),
    ("next_worker key", _set(["next_worker", "-1"], 0), "next_worker has key '-1'"),
    ("readers not a dict", _set(["readers"], []), "readers is not a mapping"),
]


@pytest.mark.parametrize(("mutate", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_bad_field_is_named(mutate: Callable[[dict[str, Any]], None], field: str) -> None:
    state = valid_state()
    mutate(state)
    with pytest.raises(ResumeMismatch) as err:
        check_state(state, SETTINGS)
    assert field in str(err.value)


def test_sample_loader_refuses_a_carry() -> None:
    samples = LoaderSettings(topics=("tok",), kind="samples", shuffle_buffer=4)
    state = valid_state()
    state["fingerprint"] = empty_state(samples)["fingerprint"]
    with pytest.raises(ResumeMismatch, match="packer is a packer's state, which a sample loader never has"):
        check_state(state, samples)


def test_a_state_of_the_first_layout_is_converted() -> None:
    """A checkpoint saved before each node's state was nested loads as the same state."""
    state = valid_state()
    assert check_state(layout_1(state), SETTINGS) == state
    # A malformed one is still refused, with its field named in the nested layout.
    old = layout_1(state)
    old["readers"]["0"]["partitions"]["tok:0"]["read"] = 2
    with pytest.raises(ResumeMismatch, match=r"readers\['0'\]\.reader\.partitions\['tok:0'\]\.read \(2\)"):
        check_state(old, SETTINGS)


def test_a_wrong_node_version_names_the_node_and_what_to_do() -> None:
    state = valid_state()
    state["readers"]["1"]["reader"]["version"] = 9
    with pytest.raises(ResumeMismatch) as err:
        check_state(state, SETTINGS)
    assert "readers['1'].reader (reader node) version 9 is not supported" in str(err.value)
    assert "this kafeed reads version 1" in str(err.value)
    assert err.value.hint is not None and "kafeed version that saved it" in err.value.hint


@pytest.mark.parametrize(("nxt", "read", "low", "high", "text"), [
    (3, 10, 5, 20, "next offset 3 of partition tok:0 is below its log start offset 5"),
    (3, 10, 0, 8, "read offset 10 of partition tok:0 is beyond its high watermark 8"),
])
def test_positions_outside_the_log_are_refused(nxt: int, read: int, low: int, high: int, text: str) -> None:
    with pytest.raises(ResumeMismatch, match=text) as err:
        check_positions("tok:0", nxt, read, low, high)
    assert err.value.hint is not None and "recreated" in err.value.hint


def test_positions_inside_the_log_pass() -> None:
    check_positions("tok:0", 5, 20, 5, 20)
    check_positions("tok:0", 0, 0, 0, 0)


def test_load_state_dict_refuses_non_json() -> None:
    ds = kafeed.KafkaTokenDataset("tok", seq_len=8, eos_id=0, shuffle_buffer=4)
    for bad in ({"version": {1, 2}}, {"version": float("nan")}, {("a", 1): 2}):
        with pytest.raises(ResumeMismatch, match="not JSON data"):
            ds.load_state_dict(bad)  # type: ignore[arg-type]


# -- property: nothing but a KafeedError escapes ----------------------------------------------
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=6,
)
# Values that are almost right are the likeliest to slip through a check.
NEAR = st.sampled_from([0, 1, 2, -1, 3, 12, 40, 2**128, 2**32, True, False, None, "0", "tok:0", "tok:9",
                        "tok", 1.0, [], {}, ["tok:0", 4], ["tok:0", 3, 6], [5], "PCG64", "١٢"],
                       ).map(copy.deepcopy)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


@st.composite
def mutated_states(draw: st.DrawFn, base: str = VALID_JSON) -> Any:
    state = json.loads(base)
    for _ in range(draw(st.integers(1, 2))):
        paths = _paths(state)
        path = draw(st.sampled_from(paths))
        if not path:
            return draw(JSONISH)
        parent: Any = state
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "near", "delete", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["0", "1", "7", "tok:1", "extra", ""]))] = draw(NEAR)
        elif action == "near":
            parent[path[-1]] = draw(NEAR)
        else:
            parent[path[-1]] = draw(JSONISH)
    return state


DATASET = kafeed.KafkaTokenDataset("tok", seq_len=8, eos_id=0, shuffle_buffer=4)


@settings(deadline=None, database=None,  # examples: the profile in tests/conftest.py
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(mutated_states(), mutated_states(LAYOUT_1_JSON), JSONISH))
def test_any_state_is_accepted_or_refused_with_a_kafeed_error(state: Any) -> None:
    for load in (lambda s: check_state(s, SETTINGS), DATASET.load_state_dict):
        try:
            load(state)  # neither mutates what it is given
        except KafeedError as exc:
            assert isinstance(exc, ResumeMismatch), exc
            assert exc.message.endswith(".")

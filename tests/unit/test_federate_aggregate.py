"""The round's math against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kafeed.errors import ConfigError, ResumeMismatch
from kafeed.federate.aggregate import FedAdam, FedAdamSettings, fedavg, flatten, proximal_term, unflatten


def test_fedavg_weights_each_update_by_its_sample_count() -> None:
    got = fedavg([np.array([1.0, 2.0]), np.array([3.0, -2.0]), np.array([0.0, 0.0])], [1, 3, 4])
    # (1*1 + 3*3 + 4*0) / 8 = 10/8; (1*2 + 3*-2) / 8 = -4/8
    np.testing.assert_array_equal(got, np.array([1.25, -0.5], dtype=np.float32))
    assert got.dtype == np.float32


@pytest.mark.parametrize(("updates", "weights", "match"), [
    ([], [], "one weight per update"),
    ([np.zeros(2)], [1, 2], "one weight per update"),
    ([np.zeros(2), np.zeros(3)], [1, 1], "one length"),
    ([np.zeros(2)], [0], "sample counts above 0"),
    ([np.zeros(2)], [1.5], "sample counts above 0"),
])
def test_fedavg_refuses_what_it_cannot_average(updates: list[np.ndarray], weights: list[float],
                                               match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        fedavg(updates, weights)  # type: ignore[arg-type]


def test_proximal_term_and_its_gradient() -> None:
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([[0.5]], requires_grad=True)
    g_w, g_b = torch.tensor([0.0, 4.0]), torch.tensor([[1.5]])
    term = proximal_term([w, b], [g_w, g_b], mu=0.1)
    # 0.1/2 * ((1-0)^2 + (2-4)^2 + (0.5-1.5)^2) = 0.05 * 6 = 0.3
    assert term.item() == pytest.approx(0.3)
    term.backward()
    assert w.grad is not None and b.grad is not None
    torch.testing.assert_close(w.grad, torch.tensor([0.1, -0.2]))  # mu * (w - w_global)
    torch.testing.assert_close(b.grad, torch.tensor([[-0.1]]))
    with pytest.raises(ConfigError, match="mu"):
        proximal_term([w], [g_w], mu=-1.0)


def test_fedadam_follows_reddi_et_al_by_hand() -> None:
    opt = FedAdam(settings=FedAdamSettings(lr=0.1, beta1=0.5, beta2=0.75, tau=0.5))
    x1 = opt.step(np.array([1.0, 0.0]), np.array([2.0, -1.0]))
    # m = 0.5*d = [1, -0.5]; v = 0.25*d^2 = [1, 0.25]; x += 0.1 * m / (sqrt(v) + 0.5)
    np.testing.assert_allclose(x1, [1.0 + 0.1 * 1 / 1.5, 0.0 + 0.1 * -0.5 / 1.0], rtol=1e-6)
    x2 = opt.step(x1, np.array([0.0, 1.0]))
    # m = [0.5, 0.25]; v = [0.75, 0.1875 + 0.25] = [0.75, 0.4375]
    expected = x1.astype(np.float64) + 0.1 * np.array([0.5, 0.25]) / (np.sqrt([0.75, 0.4375]) + 0.5)
    np.testing.assert_allclose(x2, expected, rtol=1e-6)
    assert opt.rounds == 2


def test_fedadam_resumes_from_its_saved_state_to_the_same_next_step() -> None:
    rng = np.random.default_rng(0)
    x, deltas = rng.normal(size=50), rng.normal(size=(4, 50)) * 0.1
    straight, x_straight = FedAdam(), x
    for d in deltas:
        x_straight = straight.step(x_straight, d)

    first = FedAdam()
    y = first.step(x, deltas[0])
    y = first.step(y, deltas[1])
    resumed = FedAdam()
    resumed.load_state_bytes(first.state_bytes())
    assert resumed.rounds == 2
    for d in deltas[2:]:
        y = resumed.step(y, d)
    np.testing.assert_array_equal(y, x_straight)

    other = FedAdam(settings=FedAdamSettings(lr=0.5))
    with pytest.raises(ResumeMismatch, match="saved with"):
        other.load_state_bytes(first.state_bytes())
    with pytest.raises(ResumeMismatch, match="could not be read"):
        other.load_state_bytes(b"not an npz")
    with pytest.raises(ResumeMismatch, match="50 weights"):
        resumed.step(np.zeros(3), np.zeros(3))
    fresh = FedAdam()
    fresh.load_state_bytes(FedAdam().state_bytes())  # a state saved before any round
    assert fresh.rounds == 0 and fresh.state_dict()["m"] is None


def test_flatten_and_unflatten_keep_a_state_dict_and_its_integer_buffers() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    state = model.state_dict()
    vector = flatten(state)
    floats = [v for v in state.values() if v.is_floating_point()]
    assert vector.dtype == np.float32 and vector.shape == (sum(v.numel() for v in floats),)
    back = unflatten(vector + 1.0, state)
    assert list(back) == list(state)
    torch.testing.assert_close(back["0.weight"], state["0.weight"] + 1.0)
    assert back["1.num_batches_tracked"] is state["1.num_batches_tracked"]
    with pytest.raises(ConfigError, match="does not fit"):
        unflatten(np.zeros(vector.shape[0] + 1, np.float32), state)
    with pytest.raises(ConfigError, match="too short"):
        unflatten(np.zeros(3, np.float32), state)

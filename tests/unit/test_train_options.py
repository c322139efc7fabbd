"""`kafeed train` checks every option before any connection or training work (exit 2)."""

from __future__ import annotations

import inspect
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafeed.cli import train as train_cli
from kafeed.cli.main import main
from kafeed.signals import stop_request
from kafeed.train.options import DEFAULT_LR, TrainOptions


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    yield  # the CLI installs the process's stop handler first thing; give the signals back
    stop_request().uninstall()
    stop_request().reset()


@pytest.fixture
def dead_bootstrap() -> str:
    """A port nothing listens on: any connection attempt would fail after seconds, exit 1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(("args", "expected"), [
    (["--steps", "0"], "steps: got 0, should be greater than or equal to 1"),
    (["--batch-size", "0"], "batch_size: got 0, should be greater than or equal to 1"),
    (["--seq-len", "1"], "seq_len: got 1, should be greater than or equal to 2"),
    (["--seq-len", "1000000"], "seq_len: got 1000000, should be less than or equal to 32768"),
    (["--lr", "0"], "lr: got 0.0, should be greater than 0"),
    (["--lr", "nan"], "--lr: got nan, should be a finite number"),
    (["--d-model", "100", "--n-heads", "3"], "n_heads: got 3, should divide d_model (100)"),
    (["--n-layers", "0"], "n_layers: got 0, should be greater than or equal to 1"),
    (["--keep", "0"], "keep: got 0, should be greater than or equal to 1"),
    (["--log-every", "0"], "log_every: got 0, should be greater than or equal to 1"),
    (["--num-workers", "-1"], "num_workers: got -1, should be greater than or equal to 0"),
    (["--seed", "-1"], "seed: got -1, should be greater than or equal to 0"),
    (["--metrics-port", "70000"], "metrics_port: got 70000, should be between 0 and 65535"),
    (["--metrics-port", "-1"], "metrics_port: got -1, should be between 0 and 65535"),
])
def test_out_of_range_option_is_one_line_exit_2(args: list[str], expected: str, dead_bootstrap: str,
                                                tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "-b", dead_bootstrap, "--checkpoint-dir", str(tmp_path / "ck"), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    # A number that is no number at all is refused as the option is read (cli.common.check_numbers).
    assert lines[0].startswith(("error: Invalid train options: ", "error: --")) and expected in lines[0], err
    assert len(lines) == 2 and "Traceback" not in err  # the sentence and its hint
    assert not (tmp_path / "ck").exists()


def test_unwritable_checkpoint_dir_exits_2_before_connecting(dead_bootstrap: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code = main(["train", "-b", dead_bootstrap, "--checkpoint-dir", str(blocker / "ck")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: --checkpoint-dir: {blocker / 'ck'} cannot be created: {blocker} is a file")
    assert "Traceback" not in err


def test_cli_defaults_are_the_options_defaults() -> None:
    fields = TrainOptions.model_fields
    for name, param in inspect.signature(train_cli.train).parameters.items():
        if name in fields and name not in ("topic", "lr"):
            assert param.default == fields[name].default, name
    # topic and lr follow the model, in the library as on the command line
    assert inspect.signature(train_cli.train).parameters["lr"].default is None
    assert TrainOptions(model="classifier").lr == DEFAULT_LR["classifier"] == 5e-5
    assert TrainOptions(model="classifier").topic == "raw"
    assert TrainOptions().lr == DEFAULT_LR["gpt"] and TrainOptions().topic == "tokens"
    assert TrainOptions(model="classifier", lr=1e-4, topic="labelled").lr == 1e-4


def test_each_default_is_declared_once() -> None:
    from kafeed.train.checkpoint import CheckpointManager
    from kafeed.train.defaults import TRAIN_DEFAULTS
    from kafeed.train.models import build_classifier
    from kafeed.train.progress import ProgressReporter
    from kafeed.train.runner import Runner

    assert set(TRAIN_DEFAULTS) == set(TrainOptions.model_fields)
    for name, field in TrainOptions.model_fields.items():
        assert field.default == TRAIN_DEFAULTS[name], name
    # what the library's pieces default to, when called without options
    assert Runner.__dataclass_fields__["log_every"].default == TRAIN_DEFAULTS["log_every"]
    for fn, name in ((ProgressReporter, "log_every"), (CheckpointManager, "keep"),
                     (build_classifier, "pretrained")):
        assert inspect.signature(fn).parameters[name].default == TRAIN_DEFAULTS[name], (fn, name)


def test_the_library_refuses_a_run_dir_or_checkpoint_dir_that_is_a_file(tmp_path: Path) -> None:
    from pydantic import ValidationError

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(ValidationError, match="is a file, not a directory"):
        TrainOptions(run_dir=blocker)
    with pytest.raises(ValidationError, match="cannot be created"):
        TrainOptions(checkpoint_dir=blocker / "ck")
    assert TrainOptions(run_dir=tmp_path / "new" / "run").run_dir == tmp_path / "new" / "run"


def test_every_option_is_declared_once_and_both_sides_are_built_from_it() -> None:
    import click
    import typer

    from kafeed.cli.main import app
    from kafeed.train.defaults import TRAIN_OPTIONS

    fields = TrainOptions.model_fields
    assert list(fields) == list(TRAIN_OPTIONS)  # the model adds, drops or reorders none
    for name, option in TRAIN_OPTIONS.items():
        field = fields[name]
        assert (field.default, field.description) == (option.default, option.help), name
        constraints = {k: getattr(m, k) for m in field.metadata for k in option.bounds if hasattr(m, k)}
        assert constraints == dict(option.bounds), name
    command = typer.main.get_command(app).commands["train"]  # type: ignore[attr-defined]
    options = {p.name: p for p in command.params if isinstance(p, click.Option)}
    cli = [name for name, option in TRAIN_OPTIONS.items() if option.cli]
    assert [n for n in options if n in TRAIN_OPTIONS] == cli
    # the connection, output and value-format flags every stage that reads raw records shares
    assert set(options) - set(cli) == {"bootstrap", "config", "json_out", "metrics_port", "value_format",
                                       "text_field", "id_field", "label_field", "meta_field"}
    for name in cli:
        option, param = TRAIN_OPTIONS[name], options[name]
        assert param.help == option.help and param.show_default == option.show_default, name
        assert param.default == (None if option.by_model else option.default), name
    # A bound declared once is what both refuse: the model as data, the command line as text.
    with pytest.raises(ValueError, match="less than or equal to 65536"):
        TrainOptions(batch_size=65_537)
    assert TrainOptions(mix="web=0.75,code=0.25").mix == {"web": 0.75, "code": 0.25}

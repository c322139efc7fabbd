"""Bad input on the command line: the exit code, one clear message, never a traceback.

Every case here is found before any work starts, so none needs a broker: the
bootstrap points at a closed port, and a case that reached the network would come
back as exit 1 (no broker answered) instead of the 2 it expects.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafeed.cli.main import main
from kafeed.signals import stop_request


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLOSED = f"127.0.0.1:{_closed_port()}"


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    yield
    stop_request().uninstall()
    stop_request().reset()


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "bad.toml").write_text("[connection\nbootstrap = ")
    (tmp_path / "unknown_key.toml").write_text('[connection]\nbootstrapp = "x:1"\n')
    (tmp_path / "prepare_range.toml").write_text("[prepare.kafka]\nbatch_size = -1\n")
    (tmp_path / "docs.jsonl").write_text('{"text": "hello"}\n')
    (tmp_path / "a file").write_text("not a directory")
    (tmp_path / "routes_key.toml").write_text('[[rule]]\nto = "a"\nlang = "en"\n')
    (tmp_path / "routes_regex.toml").write_text('[[rule]]\nto = "a"\nregex = "(open"\n')
    (tmp_path / "gpt_ck").mkdir()
    (tmp_path / "gpt_ck" / "step-00000001.json").write_text(
        '{"version": 1, "step": 1, "file": "step-00000001.pt", "config": {"model": "gpt"}}')
    (tmp_path / "routes_ok.toml").write_text('[[rule]]\nto = "a"\n')
    (tmp_path / "routes_no_to.toml").write_text('[[rule]]\nsource = "wiki"\n')
    return tmp_path


# (id, argv, expected exit code, words the message must contain)
CASES: list[tuple[str, list[str], int, list[str]]] = [
    ("unknown-command", ["nosuch"], 2, ["No such command"]),
    ("unknown-option", ["topic", "create", "t", "--bogus"], 2, ["No such option"]),
    ("unknown-root-option", ["--bogus"], 2, ["No such option"]),
    ("missing-argument", ["topic", "create"], 2, ["Missing argument"]),
    ("non-integer", ["topic", "create", "t", "--partitions", "abc"], 2, ["--partitions"]),
    ("non-float", ["topic", "create", "t", "--throughput-mbps", "fast"], 2, ["--throughput-mbps"]),
    ("bad-choice", ["topic", "create", "t", "--partitions", "1", "--compression", "brotli"], 2,
     ["--compression"]),
    ("bad-literal-choice", ["train", "--model", "gpt3"], 2, ["--model", "'gpt', 'classifier'"]),
    ("bad-jit", ["broker", "start", "--jit", "turbo", "--data-dir", "{tmp}/never"], 2,
     ["--jit", "'full', 'quick'"]),
    ("no-size", ["topic", "create", "t", "-b", CLOSED], 2, ["partitions"]),
    ("zero-partitions", ["topic", "create", "t", "--partitions", "0", "-b", CLOSED], 2, ["partitions"]),
    ("huge-partitions", ["topic", "create", "t", "--partitions", "100000000", "-b", CLOSED], 2,
     ["partitions"]),
    ("nan-throughput", ["topic", "create", "t", "--throughput-mbps", "nan", "-b", CLOSED], 2,
     ["throughput"]),
    ("inf-throughput", ["topic", "create", "t", "--throughput-mbps", "inf", "-b", CLOSED], 2,
     ["throughput"]),
    ("negative-throughput", ["topic", "create", "t", "--throughput-mbps", "-5", "-b", CLOSED], 2,
     ["throughput"]),
    ("bad-retention", ["topic", "create", "t", "--partitions", "1", "--retention", "7x", "-b", CLOSED],
     2, ["retention"]),
    ("port-too-high", ["broker", "start", "--port", "70000"], 2, ["port"]),
    ("nodes-two", ["broker", "start", "--nodes", "2"], 2, ["nodes"]),
    ("empty-bootstrap", ["topic", "list", "--bootstrap", ""], 2, ["bootstrap"]),
    ("bootstrap-bad-port", ["topic", "list", "--bootstrap", "127.0.0.1:99999"], 2, ["99999"]),
    ("bootstrap-port-not-number", ["topic", "list", "--bootstrap", "127.0.0.1:abc"], 2, ["abc"]),
    ("missing-config", ["topic", "list", "--config", "{tmp}/none.toml"], 2, ["does not exist"]),
    ("config-not-toml", ["topic", "list", "--config", "{tmp}/bad.toml"], 2, ["TOML"]),
    ("config-unknown-key", ["topic", "list", "--config", "{tmp}/unknown_key.toml"], 2, ["bootstrapp"]),
    ("prepare-setting-range", ["prepare", "--config", "{tmp}/prepare_range.toml", "-b", CLOSED], 2,
     ["batch_size"]),
    ("prepare-batch-zero", ["prepare", "--batch-size", "0", "-b", CLOSED], 2, ["batch_size"]),
    ("train-heads", ["train", "--d-model", "130", "--n-heads", "4", "-b", CLOSED,
                     "--checkpoint-dir", "{tmp}/ck"], 2, ["head"]),
    ("train-steps-zero", ["train", "--steps", "0", "-b", CLOSED, "--checkpoint-dir", "{tmp}/ck"], 2,
     ["steps"]),
    ("train-mix-negative", ["train", "--mix", "web=0.6,code=-0.4", "-b", CLOSED], 2, ["negative"]),
    ("train-mix-zero", ["train", "--mix", "web=0,code=0", "-b", CLOSED], 2, ["zero"]),
    ("train-mix-nan", ["train", "--mix", "web=nan", "-b", CLOSED], 2, ["finite"]),
    ("train-mix-shape", ["train", "--mix", "web:0.6", "-b", CLOSED], 2, ["TOPIC=WEIGHT"]),
    ("train-mix-classifier", ["train", "--model", "classifier", "--mix", "a=1", "-b", CLOSED], 2,
     ["only --model gpt"]),
    ("plan-zero-gpus", ["plan", "--gpus", "0", "--tokens-per-gpu-s", "1", "--bytes-per-token", "2"], 2,
     ["gpus"]),
    ("plan-nan-rate", ["plan", "--gpus", "8", "--tokens-per-gpu-s", "nan", "--bytes-per-token", "2"], 2,
     ["--tokens-per-gpu-s: got nan, should be a finite number"]),
    ("plan-size-retention", ["plan", "--gpus", "8", "--tokens-per-gpu-s", "1", "--bytes-per-token", "2",
                             "--retention", "10GiB"], 2, ["not a time"]),
    ("train-lr-nan", ["train", "--lr", "nan", "-b", CLOSED, "--checkpoint-dir", "{tmp}/ck"], 2, ["lr"]),
    ("train-batch-negative", ["train", "--batch-size", "-1", "-b", CLOSED, "--checkpoint-dir",
                              "{tmp}/ck"], 2, ["batch_size"]),
    ("train-unwritable-checkpoints", ["train", "-b", CLOSED, "--checkpoint-dir", "/proc/kafeed-test/ck"],
     2, ["checkpoint"]),
    ("train-checkpoints-is-file", ["train", "-b", CLOSED, "--checkpoint-dir", "{tmp}/a file"], 2,
     ["checkpoint"]),
    ("train-metrics-port", ["train", "-b", CLOSED, "--metrics-port", "70000", "--checkpoint-dir",
                            "{tmp}/ck"], 2, ["metrics"]),
    ("ingest-missing-file", ["ingest", "{tmp}/nope.jsonl", "-b", CLOSED], 2, ["nope.jsonl"]),
    ("ingest-negative-linger", ["ingest", "{tmp}/docs.jsonl", "--linger-ms", "-1", "-b", CLOSED], 2,
     ["linger"]),
    ("ingest-sql-without-dsn", ["ingest", "--sql", "SELECT 1", "-b", CLOSED], 2, ["dsn"]),
    ("ingest-dlq-ratio", ["ingest", "{tmp}/docs.jsonl", "--max-dlq-ratio", "2", "-b", CLOSED], 2,
     ["dlq"]),
    ("route-missing-rules", ["route", "--rules", "{tmp}/none.toml", "-b", CLOSED], 2, ["does not exist"]),
    ("route-unknown-key", ["route", "--rules", "{tmp}/routes_key.toml", "-b", CLOSED], 2, ["lang"]),
    ("route-bad-regex", ["route", "--rules", "{tmp}/routes_regex.toml", "-b", CLOSED], 2, ["regex"]),
    ("route-no-topic", ["route", "--rules", "{tmp}/routes_no_to.toml", "-b", CLOSED], 2, ["`to`"]),
    ("route-batch-zero", ["route", "--rules", "{tmp}/routes_ok.toml", "--batch-size", "0", "-b", CLOSED],
     2, ["batch_size"]),
    ("route-workers-bounds", ["route", "--rules", "{tmp}/routes_ok.toml", "--workers", "auto",
                              "--min-workers", "3", "--max-workers", "2", "-b", CLOSED], 2, ["max_workers"]),
    ("route-workers-word", ["route", "--rules", "{tmp}/routes_ok.toml", "--workers", "many", "-b", CLOSED],
     2, ["--workers"]),
    ("infer-wrong-kind", ["infer", "--checkpoint", "{tmp}/gpt_ck", "-b", CLOSED], 2, ["gpt", "classifier"]),
    ("infer-no-checkpoint", ["infer", "-b", CLOSED], 2, ["--checkpoint"]),
    ("infer-workers-bounds", ["infer", "--checkpoint", "{tmp}/gpt_ck", "--workers", "auto",
                              "--min-workers", "3", "--max-workers", "2", "-b", CLOSED], 2, ["max_workers"]),
    ("infer-workers-word", ["infer", "--checkpoint", "{tmp}/gpt_ck", "--workers", "many", "-b", CLOSED],
     2, ["--workers"]),
    ("infer-missing-checkpoint", ["infer", "--checkpoint", "{tmp}/none", "-b", CLOSED], 2,
     ["does not exist"]),
    ("infer-device", ["infer", "--checkpoint", "{tmp}/gpt_ck", "--device", "tpu", "-b", CLOSED], 2,
     ["device"]),
    ("tasks-lease-nan", ["tasks", "worker", "--kind", "k", "--lease", "nan", "-b", CLOSED], 2,
     ["--lease: got nan"]),
    ("tasks-lease-zero", ["tasks", "worker", "--kind", "k", "--lease", "0", "-b", CLOSED], 2, ["lease_s"]),
    ("tasks-lease-negative", ["tasks", "worker", "--kind", "k", "--lease", "-1", "-b", CLOSED], 2,
     ["lease_s"]),
    ("tasks-timeout-range", ["tasks", "worker", "--kind", "k", "--timeout", "61", "-b", CLOSED], 2,
     ["timeout_s"]),
    ("tasks-backoff-inf", ["tasks", "worker", "--kind", "k", "--backoff", "inf", "-b", CLOSED], 2,
     ["--backoff: got inf"]),
    ("monitor-interval", ["monitor", "--interval", "0", "-b", CLOSED], 2, ["interval"]),
    ("demo-steps", ["demo", "--steps", "0"], 2, ["steps"]),
    ("lineage-missing", ["lineage", "{tmp}/no-such-checkpoint"], 2, ["no-such-checkpoint"]),
    ("report-missing", ["report", "{tmp}/no-such-run"], 2, ["no-such-run"]),
]


@pytest.mark.parametrize(("argv", "code", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_message(argv: list[str], code: int, words: list[str], files: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.replace("{tmp}", str(files)) for a in argv]
    assert main(args) == code
    captured = capsys.readouterr()
    text = captured.err + captured.out
    assert "Traceback" not in text and "env var" not in text
    for word in words:
        assert word.lower() in text.lower(), (word, text)
    errors = [line for line in text.splitlines() if line.startswith(("error:", "Error:"))]
    assert len(errors) == 1, text


def test_markup_in_user_text_is_printed_literally(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lineage", "/tmp/[bold]x[/bold]/[red]"]) == 2
    err = capsys.readouterr().err
    assert "[bold]x[/bold]/[red]" in err


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--debug", "topic", "list", "--bootstrap", ""]) == 2
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("lease", [-1.0, 0.0, 0.5, float("nan"), float("inf")])
def test_a_worker_refuses_a_lease_that_cannot_hold(lease: float) -> None:
    from kafeed.config import ConnectionSettings
    from kafeed.errors import ConfigError
    from kafeed.tasks import Worker

    with pytest.raises(ConfigError, match="lease_s"):
        Worker(ConnectionSettings(bootstrap=CLOSED), kind="k", handler=dict, lease_s=lease)

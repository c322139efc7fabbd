"""The role → ACL table: least privilege per role, prefixes that keep roles apart, the CLI's dry run."""

from __future__ import annotations

import json

import pytest

from kafeed.acl import ROLES, RoleNames, role_bindings
from kafeed.acl.roles import Binding
from kafeed.cli.main import main


def _ops(bindings: list[Binding], resource: str, name: str) -> set[str]:
    return {b.operation for b in bindings if b.resource == resource and b.name == name}


def test_every_role_has_bindings_for_its_principal_only() -> None:
    for role in ROLES:
        bindings = role_bindings(role, role)
        assert bindings, role
        assert {b.principal for b in bindings} == {f"User:{role}"}
        assert bindings == sorted(set(bindings)), f"{role}: duplicates or unsorted"


def test_ingest_writes_raw_and_its_helpers_and_reads_nothing_else() -> None:
    b = role_bindings("ingest", "User:ingest")
    assert _ops(b, "TOPIC", "raw") == {"WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"}
    assert "WRITE" in _ops(b, "TOPIC", "raw.dlq") and "CREATE" in _ops(b, "TOPIC", "raw.dlq")
    assert "READ" in _ops(b, "TOPIC", "__kafeed_ingest_progress")
    assert not _ops(b, "TOPIC", "tokens")
    assert [(x.name, x.pattern) for x in b if x.resource == "TRANSACTIONAL_ID"] == [
        ("kafeed-ingest.", "PREFIXED")] * 2


def test_prepare_reads_raw_writes_tokens_under_its_own_ids() -> None:
    b = role_bindings("prepare", "prepare", RoleNames(raw="docs", tokens="toks", prepare_group="g1"))
    assert "READ" in _ops(b, "TOPIC", "docs") and "WRITE" not in _ops(b, "TOPIC", "docs")
    assert "WRITE" in _ops(b, "TOPIC", "toks") and "READ" not in _ops(b, "TOPIC", "toks")
    assert {"READ", "WRITE"} <= _ops(b, "TOPIC", "__kafeed_dedup_g1")
    assert {"CREATE", "READ", "WRITE", "DELETE"} <= _ops(b, "TOPIC", "__kafeed_repartition_g1")
    assert "DELETE" not in _ops(b, "TOPIC", "docs")  # only the internal topic is purged
    assert {"READ"} <= _ops(b, "GROUP", "g1.dedup")
    assert _ops(b, "GROUP", "g1") == {"READ", "DESCRIBE"}
    assert {x.name for x in b if x.resource == "TRANSACTIONAL_ID"} == {"kafeed-prepare.g1."}


def test_transactional_id_prefixes_do_not_overlap() -> None:
    prefixes = {role: {b.name for b in role_bindings(role, role) if b.resource == "TRANSACTIONAL_ID"}
                for role in ROLES if role != "admin"}
    flat = [(role, p) for role, ps in prefixes.items() for p in ps]
    for role, p in flat:
        for other, q in flat:
            if role != other:
                assert not p.startswith(q) and not q.startswith(p), (role, p, other, q)


def test_trainer_and_monitor_write_nothing_and_monitor_reads_no_records() -> None:
    trainer = role_bindings("trainer", "trainer")
    monitor = role_bindings("monitor", "monitor")
    assert not [b for b in trainer + monitor if b.operation in ("WRITE", "CREATE", "ALL", "DELETE")]
    assert not [b for b in monitor if b.operation == "READ"]
    assert _ops(trainer, "TOPIC", "tokens") == {"READ", "DESCRIBE", "DESCRIBE_CONFIGS"}
    assert not [b for b in trainer if b.resource == "TOPIC" and b.name != "tokens"]


def test_only_admin_holds_all() -> None:
    assert {r for r in ROLES for b in role_bindings(r, r) if b.operation == "ALL"} == {"admin"}


def test_acl_grant_dry_run_prints_bindings_and_contacts_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    # No cluster listens on the default bootstrap in unit tests: a dry run must not try.
    assert main(["acl", "grant", "trainer", "--principal", "alice", "--dry-run", "--json",
                 "--tokens", "toks"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["action"] == "would grant"
    assert {(b["principal"], b["resource"], b["name"]) for b in doc["bindings"]} >= {
        ("User:alice", "TOPIC", "toks")}
    assert main(["acl", "revoke", "monitor", "-p", "User:bob", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "would revoke User:bob ALLOW DESCRIBE on TOPIC name '*'" in text


@pytest.mark.parametrize("args", [
    ["acl", "grant", "root", "-p", "alice", "--dry-run"],
    ["acl", "grant", "ingest", "-p", "User:", "--dry-run"],
])
def test_acl_bad_input_is_one_sentence_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err

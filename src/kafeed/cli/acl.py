"""`kafeed acl`: grant, revoke and list the ACLs of kafeed's roles on any cluster."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kafeed.cli.common import BootstrapOpt, ConfigOpt, JsonOpt, connection, out, print_json

if TYPE_CHECKING:
    from kafeed.acl import AclAdmin, Binding

app = typer.Typer(help="Least-privilege ACLs for kafeed's roles (admin, ingest, prepare, trainer, "
                  "monitor, archive, tasks).", no_args_is_help=True, rich_markup_mode=None)

RoleArg = Annotated[str, typer.Argument(help="admin, ingest, prepare, trainer, monitor, archive or tasks.",
                                        show_default=False)]
PrincipalOpt = Annotated[str, typer.Option("--principal", "-p", help="User:NAME (or NAME) to bind.",
                                           show_default=False)]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the bindings; change nothing.")]
RawOpt = Annotated[str, typer.Option("--raw", help="Name of the raw topic.")]
TokensOpt = Annotated[str, typer.Option("--tokens", help="Name of the tokens topic.")]
PrepareGroupOpt = Annotated[str, typer.Option("--prepare-group", help="Consumer group of kafeed prepare.")]


def _bindings(role: str, principal: str, raw: str, tokens: str, prepare_group: str) -> list[Binding]:
    from pydantic import TypeAdapter, ValidationError

    from kafeed.acl import Role, RoleNames, role_bindings
    from kafeed.errors import ConfigError

    try:
        checked: Role = TypeAdapter(Role).validate_python(role)
    except ValidationError:
        raise ConfigError(f"Unknown role {role!r}: should be admin, ingest, prepare, trainer, "
                          "monitor, archive or tasks.") from None
    if not principal.strip() or principal.strip().endswith(":"):
        raise ConfigError("--principal should name a user, as User:NAME or NAME.")
    return role_bindings(checked, principal.strip(),
                         RoleNames(raw=raw, tokens=tokens, prepare_group=prepare_group))


def _show(bindings: list[Binding], json_out: bool, verb: str) -> None:
    from dataclasses import asdict

    from rich.text import Text

    if json_out:
        print_json({"action": verb, "bindings": [asdict(b) for b in bindings]})
        return
    for b in bindings:
        out.print(Text(f"{verb} {b.describe()}"))


def _admin(bootstrap: str | None, config: Path | None) -> AclAdmin:
    """The ACL admin of the cluster, once a bootstrap server has answered: an unreachable
    cluster is named in seconds, not after librdkafka's 30 s controller timeout."""
    from kafeed.acl import AclAdmin
    from kafeed.connect import check_reachable

    settings = connection(bootstrap, config)
    check_reachable(settings)
    return AclAdmin(settings)


@app.command()
def grant(role: RoleArg, principal: PrincipalOpt, dry_run: DryRunOpt = False, raw: RawOpt = "raw",
          tokens: TokensOpt = "tokens", prepare_group: PrepareGroupOpt = "kafeed-prepare",
          bootstrap: BootstrapOpt = None, config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Give PRINCIPAL everything ROLE needs, and nothing more."""
    bindings = _bindings(role, principal, raw, tokens, prepare_group)
    if not dry_run:
        _admin(bootstrap, config).grant(bindings)
    _show(bindings, json_out, "would grant" if dry_run else "granted")


@app.command()
def revoke(role: RoleArg, principal: PrincipalOpt, dry_run: DryRunOpt = False, raw: RawOpt = "raw",
           tokens: TokensOpt = "tokens", prepare_group: PrepareGroupOpt = "kafeed-prepare",
           bootstrap: BootstrapOpt = None, config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Take ROLE's bindings away from PRINCIPAL."""
    bindings = _bindings(role, principal, raw, tokens, prepare_group)
    if not dry_run:
        _admin(bootstrap, config).revoke(bindings)
    _show(bindings, json_out, "would revoke" if dry_run else "revoked")


@app.command("list")
def list_(principal: Annotated[str | None, typer.Option("--principal", "-p", help="Only this principal.",
                                                        show_default=False)] = None,
          bootstrap: BootstrapOpt = None, config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Every ALLOW binding on the cluster (needs DESCRIBE on the cluster, e.g. the admin role)."""
    from kafeed.acl import principal_for

    who = principal_for(principal.strip()) if principal else None
    _show(_admin(bootstrap, config).list(who), json_out, "allowed:")

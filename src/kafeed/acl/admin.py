"""Grant, revoke and list kafeed's role bindings on any cluster, through the admin client."""

from __future__ import annotations

from typing import Any

from kafeed.acl.roles import Binding
from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError, KafkaOperationError, NotAuthorized
from kafeed.kafka import KafkaClients

# confluent-kafka names Kafka's CLUSTER resource type BROKER.
_CLIENT_TYPE = {"CLUSTER": "BROKER"}
_OUR_TYPE = {v: k for k, v in _CLIENT_TYPE.items()}


def _acl(binding: Binding) -> Any:
    from kafeed.kafka.types import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    restype = ResourceType[_CLIENT_TYPE.get(binding.resource, binding.resource)]
    return AclBinding(restype, binding.name,
                      ResourcePatternType[binding.pattern], binding.principal, "*",
                      AclOperation[binding.operation], AclPermissionType.ALLOW)


def _filter(binding: Binding) -> Any:
    """The filter that matches exactly ``binding`` (delete_acls takes filters)."""
    from kafeed.kafka.types import AclBindingFilter

    acl = _acl(binding)
    return AclBindingFilter(acl.restype, acl.name, acl.resource_pattern_type, acl.principal, acl.host,
                            acl.operation, acl.permission_type)


def _from_acl(acl: Any) -> Binding:
    resource = _OUR_TYPE.get(acl.restype.name, acl.restype.name)
    return Binding(principal=acl.principal, resource=resource, name=acl.name,
                   pattern=acl.resource_pattern_type.name, operation=acl.operation.name)


def _failed(exc: KafeedError, action: str, who: str | None) -> KafeedError:
    """The cluster's refusal in one sentence (its own text for it is a Java request dump)."""
    if isinstance(exc, NotAuthorized):
        return NotAuthorized(
            f"Could not {action}: the cluster denied it: User:{who or 'ANONYMOUS'} may not change ACLs.",
            hint="Use the admin role's settings file (ALTER on the cluster).", code=exc.code)
    if isinstance(exc, KafkaOperationError):
        reason = exc.message.partition(": ")[2] or exc.message
        return KafkaOperationError(f"Could not {action}: {reason}", hint=exc.hint, code=exc.code)
    return exc


class AclAdmin:
    """ACL calls against one cluster; every failure is a one-sentence :class:`KafeedError`."""

    def __init__(self, connection: ConnectionSettings, *, timeout: float = 30.0) -> None:
        self._admin = KafkaClients(connection).admin()
        self._who = connection.sasl_username
        self.timeout = timeout

    def grant(self, bindings: list[Binding]) -> None:
        """Create ``bindings`` (creating one that exists is a no-op)."""
        if not bindings:
            return
        futures = self._admin.create_acls([_acl(b) for b in bindings], request_timeout=self.timeout)
        for acl, future in futures.items():
            try:
                future.result()
            except KafeedError as exc:
                raise _failed(exc, f"grant {_from_acl(acl).describe()}", self._who) from exc

    def revoke(self, bindings: list[Binding]) -> int:
        """Delete ``bindings``; the number of ACLs the cluster removed."""
        if not bindings:
            return 0
        futures = self._admin.delete_acls([_filter(b) for b in bindings], request_timeout=self.timeout)
        removed = 0
        for acl, future in futures.items():
            try:
                removed += len(future.result())
            except KafeedError as exc:
                raise _failed(exc, f"revoke {_from_acl(acl).describe()}", self._who) from exc
        return removed

    def list(self, principal: str | None = None) -> list[Binding]:
        """Every ALLOW binding on the cluster (of ``principal`` when given), sorted."""
        from kafeed.kafka.types import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                               AclOperation.ANY, AclPermissionType.ALLOW)
        try:
            found = self._admin.describe_acls(flt, request_timeout=self.timeout).result()
        except KafeedError as exc:
            raise _failed(exc, "list ACLs", self._who) from exc
        return sorted(_from_acl(acl) for acl in found)

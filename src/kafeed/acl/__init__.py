"""Least-privilege ACLs for kafeed's roles: the role table and the admin calls that apply it."""

from kafeed.acl.admin import AclAdmin
from kafeed.acl.roles import ROLES, Binding, Role, RoleNames, principal_for, role_bindings

__all__ = ["ROLES", "AclAdmin", "Binding", "Role", "RoleNames", "principal_for", "role_bindings"]

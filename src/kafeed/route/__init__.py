"""`kafeed route`: send each record to the topic of the first rule it matches, exactly once."""

from kafeed.route.engine import DEFAULT_RULE, RouteBatch, Router
from kafeed.route.language import detect_language
from kafeed.route.rules import DROP, Rule, RuleSet, load_rules, parse_rules
from kafeed.route.stage import RouteSettings, RouteStage, RouteStats, route_settings, run_route

__all__ = [
    "DEFAULT_RULE",
    "DROP",
    "RouteBatch",
    "RouteSettings",
    "RouteStage",
    "RouteStats",
    "Router",
    "Rule",
    "RuleSet",
    "detect_language",
    "load_rules",
    "parse_rules",
    "route_settings",
    "run_route",
]

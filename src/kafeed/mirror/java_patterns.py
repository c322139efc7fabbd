"""A site's ``topics`` patterns compiled by Java, as MirrorMaker compiles them.

MirrorMaker reads ``topics`` as a comma-separated list of ``java.util.regex`` patterns and
joins them with ``|`` into one (``MirrorUtils.compilePatternList``). Java's syntax is not
Python's: ``(?P<r>raw)`` compiles in Python and is refused by Java, which then mirrors
nothing and says so only in the JVM's log. So the patterns are compiled by a JVM before a
node starts, by Java's single-file source launcher (about 0.9 s on a 2-core machine, once
per ``kafeed mirror run``; the node's own JVM takes several seconds to start after it).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from kafeed.errors import ConfigError, ToolMissing
from kafeed.jars.fetch import QUICK_JVM, find_java

_SOURCE = """\
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/** One line per argument: "ok", or "error", a tab and why Java refuses it. */
public class PatternCheck {
    public static void main(String[] args) {
        for (String pattern : args) {
            try {
                Pattern.compile(pattern);
                System.out.println("ok");
            } catch (PatternSyntaxException e) {
                System.out.println("error\\t" + e.getDescription() + " near index " + e.getIndex());
            }
        }
    }
}
"""

TIMEOUT_S = 60.0


def java_pattern_errors(patterns: list[str]) -> list[str | None]:
    """For each pattern, why ``java.util.regex.Pattern`` refuses it, or None."""
    if not patterns:
        return []
    java = find_java()
    with tempfile.TemporaryDirectory(prefix="kafeed-patterns-") as tmp:
        source = Path(tmp) / "PatternCheck.java"
        source.write_text(_SOURCE)
        try:
            done = subprocess.run([java, "-Xmx64m", *QUICK_JVM, str(source), *patterns],
                                  capture_output=True, text=True, check=False, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolMissing(f"Java could not check the mirror's topic patterns: {exc}.",
                              hint="Check that a JDK 17 or newer is installed.") from None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(patterns):
        first = (done.stderr or done.stdout or "no output").strip().splitlines()[0]
        raise ToolMissing(f"Java could not check the mirror's topic patterns: {first}",
                          hint="Check that a JDK 17 or newer is installed.")
    return [None if line == "ok" else line.partition("\t")[2] for line in lines]


def check_site_patterns(sites: dict[str, list[str]]) -> None:
    """Refuse the first pattern of ``{alias: patterns}`` (or their ``|``-joined whole, what
    MirrorMaker compiles) that Java does not compile, in one sentence naming the site."""
    asked: list[tuple[str, str, str | None]] = [(alias, p, p) for alias, patterns in sites.items()
                                                 for p in patterns]
    asked += [(alias, "|".join(patterns), None) for alias, patterns in sites.items() if len(patterns) > 1]
    errors = java_pattern_errors([text for _, text, _ in asked])
    for (alias, text, single), error in zip(asked, errors, strict=True):
        if error is not None:
            what = f"topics pattern {single!r}" if single is not None else f"topics list {text!r}"
            raise ConfigError(f"Site {alias!r}'s {what} is not a Java regular expression, which "
                              f"MirrorMaker needs: {error}.",
                              hint="MirrorMaker compiles java.util.regex patterns: no (?P<name>...), "
                              "named groups are (?<name>...).")

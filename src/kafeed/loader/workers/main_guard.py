"""A script that starts DataLoader workers must guard its main code, or be told so.

With the ``forkserver`` or ``spawn`` start method each worker imports the trainer's main
script again (as ``__mp_main__``); a script without ``if __name__ == "__main__":`` then
builds the loader again inside the worker and starts workers of its own, and
multiprocessing stops that with a message about the "bootstrapping phase" that does not
say what to do. :func:`check_main_guard` says it, in one sentence, before a worker starts
(the main script has no such guard at all), and inside a worker that got that far anyway.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

from kafeed.errors import ConfigError

HINT = ('Put the code that builds and iterates the loader under `if __name__ == "__main__":`, '
        'or pass multiprocessing_context="fork" to StreamLoader.')


def check_main_guard(start_method: str) -> None:
    """Raise :class:`ConfigError` when workers started with ``start_method`` would run the
    main script again and start workers themselves."""
    if start_method == "fork":
        return
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise ConfigError("A DataLoader worker is running this script's loader again while it "
                          "starts, because the script's main code is not under "
                          '`if __name__ == "__main__":`.', hint=HINT)
    if not main_is_guarded():
        path = str(getattr(sys.modules.get("__main__"), "__file__", ""))
        raise ConfigError(f"StreamLoader workers ({start_method}) import the main script "
                          f"{Path(path).name} again, which has no "
                          '`if __name__ == "__main__":` guard, so each would start the loader again.',
                          hint=HINT)


def main_is_guarded() -> bool:
    """Whether the main script (if any) has its ``if __name__ == "__main__":`` guard."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return path is None or _has_guard(str(path))


@functools.cache
def _has_guard(path: str) -> bool:
    """Whether the script at ``path`` has an ``if __name__ == "__main__":`` at module level
    (True when it cannot be read or parsed: nothing to say then)."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return True
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if any(isinstance(n, ast.Name) and n.id == "__name__" for n in names) and any(
                    isinstance(n, ast.Constant) and n.value == "__main__" for n in names):
                return True
    return False

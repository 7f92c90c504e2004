"""The ``tilelint`` console script.

``tilelint server`` is what editors launch, and it must answer ``initialize``
fast: this module imports nothing of tilelint's before it knows the command,
so the language server starts without the CLI, the configuration loader or
the analysis (libcst) in the way.  Every other command goes to ``cli.main``."""

from __future__ import annotations

import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "server":
        from .launch import serve
        return serve(args[1:])
    from .cli import main as cli_main
    return cli_main(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

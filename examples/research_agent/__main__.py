"""`python -m examples.research_agent "QUESTION"` (run from the repository root)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

from .options import PROG, BadInput, parse_options


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = parse_options(argv)
        # Imported for a valid command only: the framework and the indexes take a second.
        from .cli import run

        # Raises BadInput too: a run to resume that the checkpoint file does not have.
        return run(options)
    except BadInput as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    code = main()
    # The run is over: what is left (modules, indexes) is freed by the process's exit.
    # Frozen, the collector's passes during interpreter shutdown skip it (~0.15 s).
    gc.freeze()
    sys.exit(code)

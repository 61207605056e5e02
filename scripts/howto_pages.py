"""Copy each how-to program into its page, so the guide is complete wherever it is read.

A page names its program in a comment before the code block:

    <!-- program: examples/howto/support_hub.py -->

and the block after it holds the file, whole. GitHub shows the page as it is (an include
would show a bare `--8<--` line), and a user who installed with pip, who has no
`examples/`, copies the program from the page. The file stays what tests/e2e runs;
`python3 dev.py howto` writes it into the pages after a change, and
`tests/e2e/test_howto_pages.py` fails while a page and its file differ.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "how-to"

# The marker, the comments between it and the fence (formatting, sybil's skip), the block.
_PROGRAM = re.compile(
    r"(?P<head><!-- program: (?P<path>\S+) -->\n(?:<!--[^\n]*-->\n)*```python\n)"
    r"(?P<body>.*?)(?P<tail>^```$)",
    re.DOTALL | re.MULTILINE,
)


def synced(page: str) -> str:
    """`page` with every marked block holding its program's current text."""

    def copy(match: re.Match[str]) -> str:
        program = (ROOT / match["path"]).read_text(encoding="utf-8")
        return match["head"] + program + match["tail"]

    return _PROGRAM.sub(copy, page)


def main(argv: list[str]) -> int:
    """Write the programs into the pages; with `--check`, only list the stale pages."""
    stale = []
    for page in sorted(PAGES.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        fresh = synced(text)
        if fresh != text:
            stale.append(page.relative_to(ROOT))
            if "--check" not in argv:
                page.write_text(fresh, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if '--check' in argv else 'updated'}: {path}")
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Run every ```python block of the docs pages under pytest, with sybil.

The blocks of one page share one namespace, in order, so a page reads as one program. A
block whose previous line is `<!-- skip: next -->` is a fragment (or a how-to program
included from `examples/howto/`, which tests/e2e runs as a program) and is not run.
"""

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), SkipParser()],
    patterns=["*.md", "**/*.md"],
).pytest()

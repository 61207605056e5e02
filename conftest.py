"""Every ```python block of README.md runs under pytest, in order, in one namespace.

A block that is only a fragment has `<!-- skip: next -->` on the line before it. A block
that starts with `>>>` is a doctest: its printed output is checked too. The pages under
docs/ have their own configuration in docs/conftest.py.
"""

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), SkipParser()],
    patterns=["README.md"],
    # Only the README at the root: a README.md deeper down is some folder's own notes.
    excludes=["*/README.md"],
).pytest()

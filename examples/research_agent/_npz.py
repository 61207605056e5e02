"""Arrays saved whole: written beside their file, then renamed into place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["save_whole"]


def save_whole(path: Path, **arrays: np.ndarray) -> None:
    """Write `arrays` to `path` (.npz, uncompressed) whole, then rename it into place: a
    reader sees the old file or the new, never half of one; raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".npz")
    try:
        with os.fdopen(handle, "wb") as file:
            # Typed as if a keyword could be its `allow_pickle`: these are arrays by name.
            save: Any = np.savez
            save(file, **arrays)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

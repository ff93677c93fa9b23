"""The Penn Treebank as language models read it (Mikolov's `simple-examples/data/ptb.train.txt`): one sentence a
line, words separated by spaces, rare words already `<unk>` and numbers `N`. As the usual recipe does (PyTorch's
word_language_model), each line's words are followed by `<eos>`."""

from __future__ import annotations

import codecs
import random
from collections import Counter
from itertools import accumulate
from pathlib import Path

from dlperf.workloads.datasets import find, malformed, missing

TRAIN = "ptb.train.txt"
EXPECTED = [TRAIN, "ptb.valid.txt", "ptb.test.txt"]
FOLDER = "ptb"  # in a datasets directory (`--data DIR`)
# where it is looked for in DIR: DIR itself, `dlperf data synth`'s folder, where Mikolov's simple-examples.tgz unpacks,
# torchtext's PennTreebank(root=DIR)
PLACES = ("", FOLDER, "simple-examples/data", "PennTreebank")
EOS, UNK = "<eos>", "<unk>"
# the byte-order marks of text that is not UTF-8 (UTF-32-LE's begins as UTF-16-LE's does, so it is tried first)
FOREIGN_BOMS = (("UTF-32", codecs.BOM_UTF32_LE), ("UTF-32", codecs.BOM_UTF32_BE), ("UTF-16", codecs.BOM_UTF16_LE),
                ("UTF-16", codecs.BOM_UTF16_BE))  # fmt: skip
PAPER_WORDS, PAPER_VOCAB = 929_589, 10_000  # the training split's size


def folder(directory: Path) -> Path:
    """The first of PLACES in `directory` that holds the training text."""
    return find(directory, PLACES, lambda d: (d / TRAIN).is_file(), TRAIN, "the Penn Treebank", EXPECTED)


def read_words(directory: Path, name: str = TRAIN) -> list[str]:
    """The words of `name` in `directory` or where PLACES says, `<eos>` after each line's."""
    directory = folder(directory)
    path = directory / name
    if not path.is_file():
        raise missing(directory, name, "the Penn Treebank", EXPECTED)
    lines = _text(path).splitlines()
    words = [word for line in lines for word in [*line.split(), EOS]]
    if len(words) == len(lines):
        raise malformed(path, "holds no words (expected sentences, one a line, words separated by spaces)")
    return words


def _text(path: Path) -> str:
    """The file as UTF-8 text, a UTF-8 byte-order mark skipped (an editor's, not a word); text in UTF-16 or UTF-32,
    which only their byte-order marks tell apart from UTF-8 gone wrong, named as such."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise malformed(path, f"cannot be read ({e.strerror})") from None
    if encoding := next((name for name, bom in FOREIGN_BOMS if raw.startswith(bom)), None):
        raise malformed(path, f"{encoding} text (it starts with a {encoding} byte-order mark): the Penn Treebank is "
                              "read as UTF-8")  # fmt: skip
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise malformed(path, f"cannot be read as UTF-8 text ({e})") from None


def vocabulary(words: list[str], size: int | None = None) -> dict[str, int]:
    """Word -> id, the most frequent first, ties in order of first appearance. When `size` leaves words out, `<unk>`
    is in it, since they will be read as `<unk>`."""
    ranked = [word for word, _ in Counter(words).most_common()]  # most_common keeps first appearance among ties
    if size is not None and len(ranked) > size:
        kept = ranked[:size]
        if UNK not in kept:
            kept[-1] = UNK
        ranked = kept
    return {word: i for i, word in enumerate(ranked)}


def encode(words: list[str], vocab: dict[str, int]) -> list[int]:
    return [vocab[word] if word in vocab else vocab[UNK] for word in words]


def write_ptb(
    directory: Path, words: int = PAPER_WORDS, vocab: int = PAPER_VOCAB, seed: int = 0, name: str = TRAIN
) -> Path:
    """A `ptb.train.txt` (or `name`: the valid and test splits) of about `words` random words (a Zipf-like draw from
    `vocab` made-up words, `<unk>` and `N` among them) in sentences of 1 to 40 words, each line written as PTB writes
    it: " word word \\n"."""
    rng = random.Random(seed)
    lexicon = [UNK, "N", *(f"w{i}" for i in range(vocab - 2))]
    cumulative = list(accumulate(1 / (rank + 1) for rank in range(len(lexicon))))  # once: choices() sums per call
    lines, total = [], 0
    while total < words:
        length = min(rng.randint(1, 40), words - total)
        lines.append(" " + " ".join(rng.choices(lexicon, cum_weights=cumulative, k=length)) + " \n")
        total += length
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("".join(lines), encoding="utf-8")
    return path

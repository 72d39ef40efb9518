"""A small byte-level BPE tokenizer file in the format of CONCH's (conch_byte_level_bpe_uncased.json), which CONCH's
and TITAN's text towers read: the tests' stand-in for the file MahmoodLab ships (never downloaded)."""

from pathlib import Path


def write_conch_tokenizer(path: Path) -> Path:
    """NFD, strip accents, lower case; byte-level pre-tokenizer with a prefix space; <pad>, <start_of_text>,
    <end_of_text> as ids 0, 1, 2 and a template that wraps each prompt in the start and end tokens."""
    import tokenizers
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                                 normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<start_of_text>", "<end_of_text>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(["an h&e image of tumor tissue", "stroma with lymphocytes", "carcinoma"] * 4, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<start_of_text> $A <end_of_text>", special_tokens=[("<start_of_text>", 1), ("<end_of_text>", 2)])
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path

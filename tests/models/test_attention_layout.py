"""models/vision_language/attention_layout.py: open_clip's towers give the same embeddings with their attention switched to
sequence-first (the layout that avoids CPU autocast's slow path), and every vision-language model is built so."""

import pytest
import torch

from evalsuite.models.vision_language.attention_layout import sequence_first_attention
from evalsuite.models.vision_language.entries import VLMS
from evalsuite.models.vision_language.towers import create_open_clip

pytest.importorskip("open_clip")


def _encode(model, images, tokens, bf16: bool):
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        return model.encode_image(images).float(), model.encode_text(tokens).float()


@pytest.mark.parametrize("bf16", [False, True])
def test_switched_towers_give_the_same_embeddings(bf16):
    reference, tokenizer = create_open_clip(VLMS["quiltnet-b-32"], seed=3)
    switched, _ = create_open_clip(VLMS["quiltnet-b-32"], seed=3)
    assert sequence_first_attention(switched) == 24  # 12 image and 12 text blocks
    images = torch.randn(3, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    tokens = tokenizer(["an H&E image of tumor.", "stroma."])
    for got, expected in zip(_encode(switched, images, tokens, bf16), _encode(reference, images, tokens, bf16)):
        if bf16:  # the same products in the same order: bit-identical
            assert torch.equal(got, expected)
        else:  # torch's fused float32 path (reference) sums in another order
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_shared_query_key_value_stays_one_tensor_and_masks_pass_through():
    attention = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    tokens = torch.randn(2, 5, 8)
    mask = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
    expected = attention(tokens, tokens, tokens, need_weights=False, attn_mask=mask)[0]
    sequence_first_attention(attention)
    calls = []  # registered after the switch: sees what the switched module receives
    attention.register_forward_pre_hook(lambda module, args: calls.append((args[0] is args[1] is args[2],
                                                                           args[0].shape)))
    got = attention(tokens, tokens, tokens, need_weights=False, attn_mask=mask)[0]
    assert got.shape == (2, 5, 8) and calls == [(True, (5, 2, 8))]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)

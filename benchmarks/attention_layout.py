"""Does sequence-first attention (evalsuite/models/vision_language/attention_layout.py) speed up a vision-language image tower?

What is measured
----------------
One open_clip model (``clip-vit-b-16`` by default, ``--model`` for another registry VLM) with random weights is
built twice from one seed: as the library builds it (batch-first nn.MultiheadAttention) and switched to
sequence-first as evalsuite's runs build it. Each embeds the same random batch (``--batch``, default 16) of
images under float32 and under bf16 autocast (the precision ``auto`` picks on a CPU with native bf16), after one
warm-up forward, ``--repeats`` times (default 3); the median time per forward is printed with the ratio
library / switched for each precision, and the largest absolute difference of the two embeddings (0 under bf16:
the same products in the same order). Timings move with the host's load: read the ratio printed in one run.

Run: ``python benchmarks/attention_layout.py`` (about a minute on 2 CPU cores).
"""

import argparse
import statistics
import time

import torch
from _shared import format_table, host_tag, machine_line

from evalsuite.models.vision_language.attention_layout import sequence_first_attention
from evalsuite.models.vision_language.entries import VLMS
from evalsuite.models.vision_language.towers import create_open_clip


def _seconds(model, images, bf16: bool, repeats: int) -> tuple[float, torch.Tensor]:
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = model.encode_image(images)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            out = model.encode_image(images)
            times.append(time.perf_counter() - start)
    return statistics.median(times), out.float()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="clip-vit-b-16", choices=[n for n, s in VLMS.items()
                                                                      if s.library == "open_clip"])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spec = VLMS[args.model]
    library, _ = create_open_clip(spec, seed=0)
    switched, _ = create_open_clip(spec, seed=0)
    sequence_first_attention(switched)
    size = spec.pretrained_cfg.input_size_px
    images = torch.randn(args.batch, 3, size, size, generator=torch.Generator().manual_seed(0))
    rows = []
    for name, bf16 in (("fp32", False), ("bf16 autocast", True)):
        library_s, library_out = _seconds(library.eval(), images, bf16, args.repeats)
        switched_s, switched_out = _seconds(switched.eval(), images, bf16, args.repeats)
        rows.append([name, f"{library_s:.2f}", f"{switched_s:.2f}", f"{library_s / switched_s:.2f}",
                     f"{(library_out - switched_out).abs().max().item():.2e}"])
    print(machine_line())
    print(f"{host_tag()}; native bf16: {torch.ops.mkldnn._is_mkldnn_bf16_supported()}")
    print(f"{args.model}, batch {args.batch}, median of {args.repeats} forwards")
    print(format_table(["precision", "library s", "sequence-first s", "library / switched", "max |diff|"], rows,
                       left=1))


if __name__ == "__main__":
    main()

"""`evalsuite list`: the tasks, probe recipes and registry models this installation knows."""

_KINDS = ("tasks", "probes", "models")


def add_parser(commands, common) -> None:
    listing = commands.add_parser("list", parents=[common], help="list tasks, probes and registry models")
    listing.add_argument("what", nargs="?", choices=_KINDS, help="only this kind")
    for kind in _KINDS:
        listing.add_argument(f"--{kind}", dest=f"only_{kind}", action="store_true", help=f"only {kind}")
    listing.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.tasks.resources import cards_dir, recipes_dir, yaml_names

    wanted = {kind for kind in _KINDS if getattr(args, f"only_{kind}", False) or args.what == kind} or set(_KINDS)
    if "tasks" in wanted:
        print("tasks:")
        print(_indent(tasks_table(yaml_names(cards_dir()))))
        print("  data layouts: docs/tasks.md (tiles, segmentation), docs/slides.md (slides, survival)")
    if "probes" in wanted:
        _print_names("probes", yaml_names(recipes_dir()))
    if "models" in wanted:
        print("models:")
        print(_indent(models_table()))
        print("  also: any timm architecture name, hf-hub:ORG/NAME, or ARCH --weights FILE")


def tasks_table(names: list[str]) -> str:
    """The shipped cards grouped by kind (tiles, segmentation, spots, slides, ...): each card's data source and how to
    get it, so a user sees at a glance which tasks need a download and what command or page gives it."""
    from evalsuite.reporting.table.text_table import format_table
    from evalsuite.tasks.cards import load_card
    from evalsuite.tasks.kinds import KINDS

    by_kind = {}
    for name in names:
        card = load_card(name)
        by_kind.setdefault(card.kind, []).append(card)
    blocks = []
    for kind in [*KINDS, *sorted(set(by_kind) - set(KINDS))]:
        body = [[card.name, _data_source(card.data_root), _how_to_get(card)] for card in by_kind.get(kind, [])]
        if body:
            blocks.append(f"{kind} ({len(body)}):\n" + _indent(format_table(["name", "data", "get it"], body)))
    return "\n".join(blocks)


def _data_source(data_root: str | None) -> str:
    if data_root is None:
        return "needs --data-root DIR"
    if data_root.startswith("package:"):
        return "shipped with evalsuite"
    if data_root.startswith("built:"):
        return "built offline on first use"
    return f"the card's data_root {data_root}"


def _how_to_get(card) -> str:
    """The command that fetches the card's data, or the page that hands it out (downloads/sources.py)."""
    from evalsuite.downloads.model import Manual
    from evalsuite.downloads.sources import OWN_DATA_READERS, source_for
    from evalsuite.errors import EvalsuiteError

    if (card.data_root or "").startswith(("package:", "built:")):
        return "-"
    if card.reader in OWN_DATA_READERS:
        return f"your own cohort: {OWN_DATA_READERS[card.reader]}"
    if card.reader in _ELSEWHERE:
        return _ELSEWHERE[card.reader]
    try:
        source = source_for(card)
    except EvalsuiteError:
        return "see the card's description"
    if isinstance(source, Manual):
        return f"by hand from {source.page} (`evalsuite download {card.name}` prints the steps)"
    size = f" ({source.size})" if any(unit in source.size for unit in ("GB", "MB", "TB")) else ""
    return f"`evalsuite download {card.name} --data-root DIR`{size}"


# Readers of published files that come with a cohort the user gathers: the page that says how.
_ELSEWHERE = {"patho_bench": "Patho-Bench's split files and the cohort's slides: docs/patho_bench.md"}


def models_table() -> str:
    """One row per registry model: what a user needs to pick one and to compare embeddings."""
    from evalsuite.models.registry import IMAGE, SLIDE, VISION_LANGUAGE, of_kind
    from evalsuite.reporting.table.text_table import format_table

    header = ["name", "kind", "embed dim", "tokens", "patch", "input", "licence; access"]
    body = [[spec.name, spec.kind, str(spec.embed_dim), _tokens(spec), f"{spec.patch_size_px} px",
             f"{spec.input_size_px} px", _licence(spec)] for spec in of_kind(IMAGE).values()]
    # A vision-language model's probes read its image embedding in the joint space, or the features before its image
    # projection where the model prescribes those (docs/zeroshot.md); its text side is what the zeroshot probe needs,
    # so the context length is shown where token facts go.
    body += [[spec.name, spec.kind, str(spec.embed_dim), f"{_vlm_image_output(spec)}; text "
              f"{spec.context_length_tokens} tokens", "-", f"{spec.pretrained_cfg.input_size_px} px", _licence(spec)]
             for spec in of_kind(VISION_LANGUAGE).values()]
    # A slide encoder reads a tile encoder's features at its own tiling (docs/slide_encoders.md): those go where a
    # tile model's tokens and input go.
    body += [[spec.name, spec.kind, str(spec.embed_dim), f"slide from {spec.tile_encoder} tiles ({spec.tile_dim}-d)"
              + ("; text tower (zeroshot)" if spec.extra.get("text_module") else ""),
              "-", f"{spec.tiling['tile_size_px']} px tiles at {spec.magnification} ({spec.tiling['target_mpp']:g} um/px)",
              _access(spec.licence, spec.gated)] for spec in of_kind(SLIDE).values()]
    return format_table(header, body)


def _vlm_image_output(spec) -> str:
    from evalsuite.models.vision_language.entries import BEFORE_PROJECTION

    return "image features before projection" if spec.probe_features == BEFORE_PROJECTION else "image embedding"


def _tokens(spec) -> str:
    grid = "x".join(map(str, spec.grid_hw))
    if spec.num_prefix_tokens == 0:
        return f"{grid} feature map"
    registers = f" + {spec.num_register_tokens} reg" if spec.num_register_tokens else ""
    return f"1 cls{registers} + {grid} patches"


def _licence(spec) -> str:
    return _access(spec.pretrained_cfg.licence, spec.pretrained_cfg.gated)


def _access(licence: str, gated: bool | None) -> str:
    return f"{licence}; {({True: 'gated', False: 'open', None: 'gating unconfirmed'}[gated])}"


def _print_names(section: str, names: list[str]) -> None:
    print(f"{section}:")
    print("\n".join(f"  {name}" for name in names))


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())

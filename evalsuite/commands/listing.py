"""`evalsuite list`: the tasks, probe recipes and built-in models this installation knows."""


def add_parser(commands, common) -> None:
    listing = commands.add_parser("list", parents=[common], help="list tasks, probes and built-in models")
    listing.add_argument("what", nargs="?", choices=["tasks", "probes", "models"], help="only this kind")
    listing.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.model_registry import MODELS
    from evalsuite.resources import cards_dir, recipes_dir, yaml_names

    sections = {
        "tasks": yaml_names(cards_dir()),
        "probes": yaml_names(recipes_dir()),
        "models": [f"{name}  ({entry.architecture}, {entry.source}; {entry.licence})" for name, entry in MODELS.items()]
        + ["any timm architecture name, hf-hub:ORG/NAME, or ARCH --weights FILE"],
    }
    for section, names in sections.items():
        if args.what in (None, section):
            print(f"{section}:")
            print("\n".join(f"  {name}" for name in names))

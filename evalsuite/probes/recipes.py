"""Probe recipes: YAML files naming a probe implementation and its hyper-parameters."""

from dataclasses import dataclass, field
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.probes import PROBES
from evalsuite.probes._validate import check_recipe_params
from evalsuite.tasks.kinds import KINDS
from evalsuite.tasks.resources import find_yaml, read_yaml_mapping, recipes_dir


@dataclass(frozen=True)
class ProbeRecipe:
    name: str
    probe: str
    params: dict
    path: Path
    sha256: str  # of the recipe file's bytes: results name the exact recipe they came from
    # Run-time inputs handed to the probe beside `params` and not recorded as the recipe (the zeroshot probe's
    # class text embeddings, evalsuite.probes.texts.class_texts).
    context: dict = field(default_factory=dict, compare=False)


# The arguments the run hands every probe itself (fit_and_score.build_probe, `context`), and what sets each: a recipe
# setting one would pass it twice.
SET_BY_THE_RUN = {"num_classes": "the task card's classes", "device": "--device", "seed": "--seed or --seeds",
                  "class_texts": "the task card's zeroshot: block", "texts": "the task's captions or class texts"}


def find_recipe(name: str) -> Path:
    return find_yaml(name, recipes_dir(), "probe recipe", "probe")


def load_recipe(name: str) -> ProbeRecipe:
    path = find_recipe(name)
    raw, sha256 = read_yaml_mapping(path, "probe recipe")
    if not isinstance(raw.get("name"), str) or not isinstance(raw.get("probe"), str):
        raise EvalsuiteError(f"probe recipe {path}: needs string fields 'name' and 'probe'")
    if raw["probe"] not in PROBES:
        raise EvalsuiteError(f"probe recipe {path}: probe '{raw['probe']}' is not one of {', '.join(PROBES)}")
    params = raw.get("params") or {}
    if not isinstance(params, dict):
        raise EvalsuiteError(f"probe recipe {path}: field 'params' must be a mapping")
    # Wrong params are refused here, before any extraction, not when the probe is built after it.
    params = check_recipe_params(raw["probe"], PROBES[raw["probe"]], params, f"probe recipe {path}", SET_BY_THE_RUN)
    return ProbeRecipe(name=raw["name"], probe=raw["probe"], params=params, path=path.resolve(),
                       sha256=sha256)


# A slide-encoder run's probes when --probes names none: Patho-Bench's two slide-embedding protocols, its logistic
# regression for classes and a Cox model for survival (docs/slide_encoders.md); knn, retrieval and fewshot on request.
SLIDE_ENCODER_PROBES = {"class": ["logreg"], "survival": ["cox"]}


def run_recipes(config, card) -> list:
    """The run's recipes (`--probes`, else the card's), their params and their fit to the card checked: needs only
    the card, so it is done before the reader scans the data and the backbone is built (or downloaded). A slide
    encoder (`--model titan`) turns each slide into one vector: its probes read vectors."""
    from evalsuite.models.registry import slide_encoder

    entry = slide_encoder(config.model)
    if entry is None or not KINDS[card.kind].bags:
        return [check_recipe_fits(load_recipe(name), card) for name in (config.probes or card.probes)]
    names = config.probes or SLIDE_ENCODER_PROBES[KINDS[card.kind].target]
    return [check_recipe_fits(load_recipe(name), card, f"slide encoder {entry.name}") for name in names]


def check_recipe_fits(recipe: ProbeRecipe, card, slide_encoder: str | None = None) -> ProbeRecipe:
    """A probe reads one kind of cached feature (`inputs`: vectors, token grids or slide bags); the card's kind
    decides which its cache holds, and a slide encoder (`slide_encoder`: its words for errors) makes slide vectors."""
    kind = KINDS[card.kind]
    needed = "vectors" if slide_encoder else "bags" if kind.bags else ("tokens" if kind.dense else "vectors")
    task = f"{card.kind} task '{card.name}'" + (f" with {slide_encoder}" if slide_encoder else "")
    probe_inputs = PROBES[recipe.probe].inputs
    if slide_encoder and getattr(PROBES[recipe.probe], "reads_retrieval_texts", False):
        raise EvalsuiteError(f"probe recipe {recipe.path}: probe '{recipe.probe}' matches tiles with captions or class "
                             f"texts; slide-text retrieval with {slide_encoder}'s text tower is not built: use "
                             "--probes zeroshot (docs/slide_encoders.md)")
    if probe_inputs != needed:
        raise EvalsuiteError(f"probe recipe {recipe.path}: probe '{recipe.probe}' reads {probe_inputs} but "
                             f"{task} caches {needed}; use a recipe of {_fitting(needed, kind, slide_encoder)}")
    if kind.target not in PROBES[recipe.probe].targets:
        raise EvalsuiteError(f"probe recipe {recipe.path}: probe '{recipe.probe}' does not learn the targets of "
                             f"{task}; use a recipe of {_fitting(needed, kind, slide_encoder)}")
    return recipe


def _fitting(needed: str, kind, slide_encoder: str | None) -> str:
    """The probes that read `needed` and learn the kind's target (with a slide encoder, not the tile-text ones)."""
    return ", ".join(sorted(name for name, probe in PROBES.items()
                            if probe.inputs == needed and kind.target in probe.targets
                            and not (slide_encoder and getattr(probe, "reads_retrieval_texts", False))))


def check_val_choice(recipes: list, card, aliases: dict) -> None:
    """A reader whose val is another split's items (`aliases`: HEST's val is train) cannot serve a probe that
    chooses its hyper-parameters on val: the choice would be made on that split."""
    alias = aliases.get("val")
    for recipe in recipes:
        if alias and PROBES[recipe.probe].chooses_on_val:
            fitting = sorted(name for name, probe in PROBES.items() if not probe.chooses_on_val
                             and KINDS[card.kind].target in probe.targets)
            raise EvalsuiteError(f"task '{card.name}' has no val split (its val is its {alias} split), so probe "
                                 f"'{recipe.probe}' would choose its hyper-parameters on {alias}; use "
                                 f"{', '.join(fitting)}")

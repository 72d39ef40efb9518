"""Slide encoders by the short names users type with `--model` (docs/slide_encoders.md).

Each module of this folder that builds a slide encoder (spec.py's contract) lists its entries in `SPECS`; MODULES
names those modules, in the order `evalsuite list models` shows them.
"""

import importlib

MODULES = ("titan", "prism", "gigapath_slide", "chief", "feather", "madeleine")


def _entries() -> dict:
    table = {}
    for module_name in MODULES:
        for spec in importlib.import_module(f"evalsuite.models.slide.{module_name}").SPECS:
            if spec.module != module_name:
                raise ValueError(f"slide encoder {spec.name} is listed in {module_name} but names module {spec.module}")
            table[spec.name] = spec
    return table


SLIDE_ENCODERS = _entries()

"""Patients of a slide split, for kinds scored per patient (survival): one target, one bag, one risk a patient.

A patient with several slides would otherwise enter the Cox risk sets and Harrell's C once per slide with
the same time and event, so multi-slide patients would weigh more. Patients are numbered in the order of
their first slide in the split (the cache's order), so the numbering is the same in every run.
"""

from evalsuite.errors import EvalsuiteError


def check_patient_targets(records: list, source) -> None:
    """One line naming `source` (the manifest) when two slides of one patient disagree on (time, event)."""
    first = {}
    for record in records:
        seen = first.setdefault(record.patient, record)
        if tuple(seen.target) != tuple(record.target):
            raise EvalsuiteError(
                f"slide manifest {source}: patient '{record.patient}' has slides with different survival targets "
                f"({seen.slide_id}: time {seen.target[0]:g}, event {seen.target[1]:g}; {record.slide_id}: time "
                f"{record.target[0]:g}, event {record.target[1]:g}); survival is scored per patient: give every "
                "slide of a patient the patient's time and event")


def first_slides(records: list) -> list:
    """The first record of each patient, in the order of first appearance."""
    first = {}
    for record in records:
        first.setdefault(record.patient, record)
    return list(first.values())


def patient_numbers(records: list) -> list[int]:
    """The patient number (0, 1, ... by first appearance) of each record."""
    numbers = {}
    return [numbers.setdefault(record.patient, len(numbers)) for record in records]

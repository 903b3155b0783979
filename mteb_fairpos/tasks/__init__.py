"""The plugin's MTEB tasks. ``TASKS`` lists every task class; registration with mteb reads it."""

from __future__ import annotations

TASKS: list[type] = []

from .posir import PosIR, PosIRCrossLingual, PosIRCrossLingualInstructed, PosIRInstructed  # noqa: E402
from .posq import FineWebPosQ, FineWebPosQTiny, SQuADPosQ, SQuADPosQTiny  # noqa: E402

TASKS += [SQuADPosQ, SQuADPosQTiny, FineWebPosQ, FineWebPosQTiny, PosIR, PosIRCrossLingual, PosIRInstructed,
          PosIRCrossLingualInstructed]

from .permutation import PERMUTATION_TASKS  # noqa: E402

TASKS += PERMUTATION_TASKS

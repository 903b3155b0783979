"""The plugin's MTEB tasks. ``TASKS`` lists every task class; registration with mteb reads it.

``BENCHMARK_TASKS`` (the ``FairPos`` benchmark) holds each measurement once: the full tasks, without
their samples or the paper-scale and instructed variants, so a mean over it counts nothing twice;
``SMALL_BENCHMARK_TASKS`` (``FairPosSmall``) the small samples.
"""

from __future__ import annotations

TASKS: list[type] = []

from .posir import PosIR, PosIRCrossLingual, PosIRCrossLingualInstructed, PosIRInstructed  # noqa: E402
from .posq import FineWebPosQ, FineWebPosQTiny, SQuADPosQ, SQuADPosQTiny  # noqa: E402

TASKS += [SQuADPosQ, SQuADPosQTiny, FineWebPosQ, FineWebPosQTiny, PosIR, PosIRCrossLingual, PosIRInstructed,
          PosIRCrossLingualInstructed]

from .permutation import PERMUTATION_TASKS  # noqa: E402

TASKS += PERMUTATION_TASKS

from .permutation import PermutationFairness, PermutationFairnessSample  # noqa: E402

BENCHMARK_TASKS: list[type] = [SQuADPosQ, FineWebPosQ, PosIR, PosIRCrossLingual, PermutationFairness]
SMALL_BENCHMARK_TASKS: list[type] = [SQuADPosQTiny, FineWebPosQTiny, PermutationFairnessSample]

"""Compute the descriptive statistics of the plugin's tasks whose data ships with the package.

Runs mteb's own routine (``AbsTask.calculate_descriptive_statistics``), which writes each task's
statistics where its metadata says (``mteb_fairpos/descriptive_stats/<type>/<name>.json``).
Tasks whose data lives only on the Hugging Face hub are listed in ``docs/registry.md`` as a known
gap; pass their names to compute theirs where the hub is reachable.

    python scripts/descriptive_stats.py                      # the bundled tasks
    python scripts/descriptive_stats.py SQuADPosQTiny PosIR  # others, from the hub
"""

from __future__ import annotations

import argparse

BUNDLED_TASKS = ("PermutationFairnessSample", "PermutationFairnessManpages", "PermutationFairnessManpagesDemo")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="*", default=list(BUNDLED_TASKS), help=f"task names (default: {' '.join(BUNDLED_TASKS)})")
    args = parser.parse_args(argv)
    from mteb_fairpos.mteb_plugin import register

    register()
    import mteb

    for task in mteb.get_tasks(tasks=args.tasks, exclude_superseded=False, exclude_beta=False):
        task.calculate_descriptive_statistics(overwrite_results=True)
        print(f"{task.metadata.name}: {task.metadata.descriptive_stat_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

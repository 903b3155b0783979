"""Ray as the engine for work past one machine: encoding into parts (`pipeline`) and evaluation
sweeps (`sweep`), on a local Ray runtime or an existing cluster (`runtime`).

Ray is an optional extra (``pip install "mteb-fairpos[ray]"``); nothing here is imported by the
core package, and every entry point says how to install it when it is missing.
"""

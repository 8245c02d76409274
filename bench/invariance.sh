#!/usr/bin/env bash
# The cost of batch-invariant kernels (bench/RESULTS.md, batch invariance): the default build
# (ggml without llamafile's tinyBLAS) against UMAD_LLAMAFILE=1's, alternated, each run of
# `umad bench debate` printing its wall time, its efficiency against the bare loop and the
# bare loop's prefill and decode tok/s. Run it on a quiet machine: bench/invariance.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
./build.sh build >&2
(eval "$(UMAD_LLAMAFILE=1 ./build.sh env)" && go build -o build/umad-llamafile .) >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A real shape at a size that runs here: qwen2.5-0.5b's layers (4 of 24) and vocabulary.
./umad model tiny --preset qwen2.5-0.5b --layers 4 --out "$work/q05" >/dev/null
# tiny: one engine on both threads; two: two models, an engine each, a thread each.
tiny=(--threads 2 --repeats 2)
two=(--two-models --repeats 2)
q05=(--agent "$work/q05/model.gguf" --agent "$work/q05/model.gguf" --synthetic 4 -k 2 --turns 2 --max-tokens 16 --slots 4 --threads 2 --repeats 1)
for i in $(seq "$runs"); do
	for bin in ./umad build/umad-llamafile; do
		for shape in tiny two q05; do
			declare -n args=$shape
			echo "## run $i, $bin, $shape"
			"$bin" bench debate "${args[@]}" 2>/dev/null | grep '^|' | grep -v '^|---'
		done
	done
done

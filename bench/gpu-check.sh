#!/usr/bin/env bash
# bench/gpu-check.sh: a first check of umad on a GPU server (bench/gpu.sh, 30-60 min,
# measures in full). On the H200 of 2026-11-26 its build, model and rollout steps took about
# 5 minutes; its training steps never ran there (the plugin crashed at load, since fixed). It builds the CUDA backend for this GPU
# and the plugin against python3's PyTorch, makes random Qwen2.5-0.5B and -3B models, then
# runs `umad env`, `umad generate`, `umad bench rollout` (BF16, K 64) and two GRPO LoRA steps
# per shape with both rollouts and training on the GPU, printing what each gives.
#
#   bench/gpu-check.sh              # from the repository root, with Go: builds umad too
#   UMAD_GGML_SRC=DIR bench/gpu-check.sh
#       # without Go: ./umad built elsewhere (./build.sh release), DIR a copy of the pinned
#       # ollama module's ml/backend/ggml/ggml (go list -m -f '{{.Dir}}' github.com/ollama/ollama)
#
# Each step is independent: a failure is reported and the next step runs. The exit status
# is the number of failed steps. Needs nvidia-smi, nvcc, cmake, python3 with a CUDA PyTorch.
set -uo pipefail
cd "$(dirname "$0")/.."
work=${UMAD_GPU_WORK:-/tmp/umad-gpu-check}
mkdir -p "$work" build/cuda
failed=0
t0=$(date +%s)
say() { echo "gpu-check [$(($(date +%s) - t0))s]: $*" >&2; }
run() { # run NAME CMD...: runs CMD, reports its status and time
	local name=$1 s=$(date +%s) rc
	shift
	say "$name"
	"$@"
	rc=$?
	say "$name: exit $rc after $(($(date +%s) - s)) s"
	[ $rc = 0 ] || failed=$((failed + 1))
	return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || { say "python3 has no PyTorch"; exit 1; }

# umad and the CUDA backend's sources and version: from Go's module cache, or as given.
if command -v go >/dev/null; then
	run "build umad" ./build.sh build || exit 1
	src=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)/ml/backend/ggml/ggml
else
	[ -x ./umad ] && [ -d "${UMAD_GGML_SRC:-}/src" ] || {
		say "no Go: put a built ./umad here and set UMAD_GGML_SRC (see the top of this file)"
		exit 1
	}
	src=$UMAD_GGML_SRC
fi
ver=$(./umad env | sed -n 's/.*github.com\/ollama\/ollama \(v[^ ,]*\).*/\1/p' | head -1)

# The CUDA backend (what ./build.sh cuda does) and the plugin, side by side.
(cmake -S cuda -B build/cuda-cmake -DGGML_SRC="$src/src" -DCMAKE_CUDA_COMPILER="$nvcc" \
	-DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null &&
	cmake --build build/cuda-cmake --target ggml-cuda -j"$(nproc)" >/dev/null &&
	cp -P build/cuda-cmake/lib/libggml-base.so* build/cuda-cmake/lib/libggml-cuda.so build/cuda/ &&
	printf '{\n  "key": "gpu-check, sm %s",\n  "module": "github.com/ollama/ollama",\n  "version": "%s"\n}\n' \
		"$arch" "$ver" >build/cuda/ggml-cuda.json) >"$work/cuda.log" 2>&1 &
cuda=$!
(cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DTorch_DIR="$prefix/Torch" \
	-DCaffe2_DIR="$prefix/Caffe2" -DUMAD_TORCH_UNTESTED=ON >/dev/null && cmake --build build -j4) >"$work/plugin.log" 2>&1 &
plugin=$!
for p in qwen2.5-0.5b qwen2.5-3b; do
	[ -f "$work/$p/bf16.gguf" ] && continue
	run "model $p" ./umad model tiny --preset "$p" --out "$work/$p" --force >/dev/null &&
		./umad convert hf2gguf "$work/$p/hf" "$work/$p/bf16.gguf" --type bf16 >/dev/null
done
run "build the CUDA backend (sm $arch; log $work/cuda.log)" wait $cuda || tail -20 "$work/cuda.log"
run "build the plugin (log $work/plugin.log)" wait $plugin || grep -m5 error "$work/plugin.log"

run "umad env" ./umad env
run "generate" ./umad generate --model "$work/qwen2.5-0.5b/bf16.gguf" --prompt "What is 2+3?" -k 4 \
	--max-tokens 16 --gpu-layers 99 --out "$work/generate.jsonl"
for p in qwen2.5-0.5b qwen2.5-3b; do
	run "bench rollout $p" ./umad bench rollout --model "$work/$p/bf16.gguf" -k 64 --max-tokens 128 \
		--gpu-layers 99 --repeats 2
	rm -rf "$work/train-$p"
	run "train $p" ./umad train --agent "$work/$p/hf" --algo grpo --turns 1 --synthetic 64 --val-synthetic 0 \
		--steps 2 --batch 4 -g 4 --mini-batch 2 --max-tokens 128 --gpu-layers 99 --train-device cuda:0 \
		--dtype bf16 --lora-rank 32 --out "$work/train-$p" &&
		grep '"kind":"train"' "$work/train-$p/metrics.jsonl" | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print("step %d: %d tokens, seconds %s, probe gap %.2g" % (r["step"], r["tokens"],
          {k: round(v, 2) for k, v in r["seconds"].items()}, r["probe_gap"]))'
done
say "$failed steps failed"
exit $failed

#!/usr/bin/env bash
# bench/gpu.sh: umad's GPU figures, measured on a GPU server (H100, H200, A100). The machines
# umad is developed on have no GPU, so every GPU figure in bench/RESULTS.md comes from here.
#
#   bench/gpu.sh                    # from the repository root; about 30-60 min on one H100
#   UMAD_GPU_WORK=/scratch/umad bench/gpu.sh
#
# It builds what is missing (./build.sh build, the plugin against pip PyTorch when that has
# CUDA, ./build.sh cuda), checks `umad env`, makes random models of the qwen2.5-3b and
# qwen3-4b shapes, then measures and writes into bench/RESULTS.md (section "gpu"):
#   - rollouts: `umad bench rollout --gpu-layers 99` at K = 16, 64 and 128: tokens/s, engine
#     vs bare llama.cpp, and the ratio to the HBM roofline (bytes of weights plus KV cache
#     read per decode step over the device's memory bandwidth);
#   - a two-agent debate (3B + 4B shapes) on the GPU: wall time and tokens/s;
#   - a few `umad train --train-device cuda:0 --dtype bf16` steps of one 3B-shape agent, LoRA
#     and full fine-tuning, rollouts on the same GPU: seconds by phase, MFU of the update, peak
#     device memory (skipped when the plugin's libtorch sees no GPU);
#   - `umad bench train` at the 3B shape (full fine-tuning, bf16): each phase's seconds and
#     tokens/s, the update's FLOP/s against libtorch's measured matmul peak, decoding against
#     the GPU's copy bandwidth, peak RSS against the memory plan (same condition);
#   - with several GPUs, `umad train --nproc <GPUs> --dist-backend nccl` of both shapes (umad,
#     bf16, gradient checkpointing) at each ZeRO stage and with one agent per half of the GPUs:
#     seconds per step, the collectives' share and bytes, the busiest GPU's peak memory
#     against the plan's (a placement the plan refuses is listed with the plan's reason).
# Needs: nvidia-smi, a CUDA toolkit (nvcc), python3 with a CUDA build of PyTorch for the
# plugin (pip install torch), cmake, Go.
set -euo pipefail
cd "$(dirname "$0")/.."

work=${UMAD_GPU_WORK:-/tmp/umad-gpu}
results=bench/RESULTS.md
mkdir -p "$work"
log() { echo "gpu.sh: $*" >&2; }

command -v nvidia-smi >/dev/null || { log "no nvidia-smi: run this on a GPU server"; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
log "GPU: $gpu"

# --- build ---------------------------------------------------------------------------------
./build.sh build
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	# The plugin against pip PyTorch (CUDA). build/ was just configured for Debian's libtorch,
	# whose Torch_DIR and Caffe2_DIR CMake keeps in its cache: name pip's explicitly.
	prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
	# UMAD_TORCH_UNTESTED: a server's PyTorch may be newer than the tested range (2.11 on the
	# H200 of 2026-11-26); this script is how such a one gets measured.
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
		-DTorch_DIR="$prefix/Torch" -DCaffe2_DIR="$prefix/Caffe2" -DUMAD_TORCH_UNTESTED=ON >/dev/null
	cmake --build build -j"$(nproc)"
else
	log "python3 has no CUDA PyTorch: the plugin stays CPU-only and the training figures are skipped (pip install torch for the GPU plugin)"
fi
# Only this GPU's architecture (90 on an H100 or H200): 3.3 min on 16 cores with CUDA 13.0.
UMAD_CUDA_ARCHS=${UMAD_CUDA_ARCHS:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)} ./build.sh cuda
./umad env | tee "$work/env.txt"
grep -q "loaded" "$work/env.txt" || { log "the CUDA backend is not loaded (see umad env above)"; exit 1; }
torch_gpu=1
grep -q "^libtorch .*CUDA, [0-9]* GPU" "$work/env.txt" || { torch_gpu=0; log "the torch plugin sees no GPU (see umad env above): no training figures"; }

# Memory bandwidth (bytes/s) by device name, for the roofline; 0 leaves the ratio out.
bandwidth() {
	case "$1" in
	*H200*) echo 4.8e12 ;;
	*H100*PCIe*) echo 2.0e12 ;;
	*H100*) echo 3.35e12 ;;
	*A100*80GB*) echo 2.039e12 ;;
	*A100*) echo 1.555e12 ;;
	*L40S*) echo 0.864e12 ;;
	*) echo 0 ;;
	esac
}
# Dense bf16 tensor-core peak (FLOP/s), for MFU.
peak_flops() {
	case "$1" in
	*H100*PCIe*) echo 756e12 ;;
	*H100* | *H200*) echo 989e12 ;;
	*A100*) echo 312e12 ;;
	*) echo 0 ;;
	esac
}
bw=$(bandwidth "$gpu")
peak=$(peak_flops "$gpu")

# peak_mem CMD...: runs CMD while sampling the GPU's used memory; prints the peak in MiB on fd 3.
peak_mem() {
	local f="$work/mem.$$" pid
	(while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; sleep 0.5; done) >"$f" &
	pid=$!
	"$@"
	kill "$pid" 2>/dev/null || true
	sort -n "$f" | tail -1 >&3
	rm -f "$f"
}

# peak_mem_all CMD...: peak_mem over every GPU: the busiest one's peak, in MiB, on fd 3.
peak_mem_all() {
	local f="$work/mem.$$" pid
	(while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sort -n | tail -1; sleep 0.5; done) >"$f" &
	pid=$!
	"$@"
	kill "$pid" 2>/dev/null || true
	sort -n "$f" | tail -1 >&3
	rm -f "$f"
}

# --- models --------------------------------------------------------------------------------
for p in qwen2.5-3b qwen3-4b; do
	[ -f "$work/$p/model.gguf" ] || ./umad model tiny --preset "$p" --out "$work/$p"
done

section="## GPU ($gpu)\n\n$(date -u +%F), \`bench/gpu.sh\` on $(hostname). Random weights of the real shapes.\n"

# --- rollouts ------------------------------------------------------------------------------
rows=""
for p in qwen2.5-3b qwen3-4b; do
	for k in 16 64 128; do
		./umad bench rollout --model "$work/$p/model.gguf" -k "$k" --max-tokens 128 --gpu-layers 99 \
			--repeats 3 >"$work/rollout-$p-$k.md"
		row=$(grep '^| model.gguf' "$work/rollout-$p-$k.md" | head -1)
		# Roofline: each decode step reads the weights once and each sequence's KV cache
		# (on average prompt + half the generated tokens).
		roof=$(python3 - "$work/$p/hf/config.json" "$work/$p/model.gguf" "$k" "$bw" "$row" <<'EOF'
import json, os, sys
cfg = json.load(open(sys.argv[1])); gguf = os.path.getsize(sys.argv[2])
k, bw, row = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
cells = [c.strip() for c in row.strip("|").split("|")]
engine_toks = float(cells[5])
hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
kv_per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * hd * 2  # K and V, f16
ctx = 64 + 128 / 2
step_bytes = gguf + k * ctx * kv_per_token
steps_per_s = engine_toks / k
print("%.0f%%" % (100 * step_bytes * steps_per_s / bw) if bw > 0 else "n/a")
EOF
)
		rows+="| $p | $k | $(echo "$row" | cut -d'|' -f7-9 | tr -s ' ') | $roof |\n"
	done
done
section+="\n### Rollouts (\`umad bench rollout --gpu-layers 99 --max-tokens 128\`)\n\n"
section+="| shape | K | engine tok/s | bare tok/s | engine/bare | HBM roofline |\n|---|---|---|---|---|---|\n$rows"

# --- debate --------------------------------------------------------------------------------
rm -rf "$work/debate"
t0=$(date +%s.%N)
exec 3>"$work/debate.mem"
peak_mem ./umad debate --agent "$work/qwen2.5-3b/model.gguf" --agent "$work/qwen3-4b/model.gguf" \
	--synthetic 32 -k 4 --turns 2 --max-tokens 256 --gpu-layers 99 --out "$work/debate"
exec 3>&-
t1=$(date +%s.%N)
section+="\n### Debate (2 agents, 3B + 4B shapes, 32 problems, K 4, 2 turns, 256 tokens)\n\n"
section+="wall $(python3 -c "print('%.1f' % ($t1 - $t0))") s, peak GPU memory $(cat "$work/debate.mem") MiB\n"

# Efficiency against the bare loop, each token priced at its position (bench debate's table).
./umad bench debate --agent "$work/qwen2.5-3b/model.gguf" --agent "$work/qwen2.5-3b/model.gguf" \
	--synthetic 16 -k 4 --turns 2 --max-tokens 256 --prompt-limit 2048 --slots 32 --gpu-layers 99 \
	>"$work/bench-debate.md"
section+="\n### Debate efficiency (\`umad bench debate\`, two agents on the 3B shape, 16 problems, K 4, 2 turns, 256 tokens)\n\n"
section+="$(sed -n '/^| engines/,/^$/p' "$work/bench-debate.md")\n"

# --- training ------------------------------------------------------------------------------
train() { # train NAME EXTRA-FLAGS...
	local name=$1
	shift
	rm -rf "$work/train-$name"
	exec 3>"$work/train-$name.mem"
	peak_mem ./umad train --agent "$work/qwen2.5-3b/hf" --algo grpo --turns 1 --synthetic 64 --val-synthetic 0 \
		--steps 3 --batch 4 -g 4 --mini-batch 2 --max-tokens 128 --gpu-layers 99 --train-device cuda:0 "$@" \
		--out "$work/train-$name"
	exec 3>&-
	python3 - "$work/train-$name/metrics.jsonl" "$work/qwen2.5-3b/hf/config.json" "$peak" "$name" \
		"$(cat "$work/train-$name.mem")" <<'EOF'
import json, sys
steps = {}  # step -> its lines (one per agent and turn; the times are the step's)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("kind") == "train":
        steps.setdefault(r["step"], []).append(r)
cfg = json.load(open(sys.argv[2])); peak = float(sys.argv[3]); name = sys.argv[4]; mem = sys.argv[5]
keys = sorted(steps)[1:] or sorted(steps)  # the first step includes warm-up
n = len(keys)
t = {k: sum(steps[s][0]["seconds"][k] for s in keys) / n for k in ("rollout", "logprobs", "reference", "update", "sync", "step")}
tokens = sum(r["tokens"] for s in keys for r in steps[s]) / n
hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
H, I, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
params = V * H + L * (H * hd * (cfg["num_attention_heads"] + 2 * cfg["num_key_value_heads"]) + cfg["num_attention_heads"] * hd * H + 3 * H * I)
flops_per_token = (4 if name == "lora" else 6) * params  # LoRA: no weight gradients of the frozen base
mfu = flops_per_token * tokens / t["update"] / peak if peak > 0 and t["update"] > 0 else float("nan")
print("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f%% | %s |" % (
    name, t["step"], t["rollout"], t["logprobs"] + t["reference"], t["update"], t["sync"],
    tokens, 100 * mfu, mem))
EOF
}
if [ "$torch_gpu" = 1 ]; then
	rows="$(train lora --lora-rank 32 --dtype bf16)\n$(train full --dtype bf16)\n"
	section+="\n### Training (one qwen2.5-3b-shape agent, grpo, 3 steps of 4 problems x G 4, 128 tokens; means after step 1)\n\n"
	section+="| run | step s | rollout s | log-probs + ref s | update s | sync s | tokens/step | update MFU | peak GPU MiB |\n|---|---|---|---|---|---|---|---|---|\n$rows"
fi

# --- one training step against the GPU's limits ----------------------------------------------
if [ "$torch_gpu" = 1 ]; then
	./umad bench train --preset qwen2.5-3b --steps 3 --batch 4 -g 4 --mini-batch 2 --max-tokens 128 \
		--gpu-layers 99 --train-device cuda:0 --dtype bf16 >"$work/bench-train.md"
	section+="\n$(sed 's/^## /### /' "$work/bench-train.md")\n"
fi

# --- several GPUs: ZeRO stages and agent groups ------------------------------------------------
ngpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
if [ "$torch_gpu" = 1 ] && [ "$ngpu" -ge 2 ]; then
	half=$((ngpu / 2))
	if [ "$half" = 1 ]; then groups="0,1"; else groups="0-$((half - 1)),$half-$((2 * half - 1))"; fi
	placements=("--shard 0" "--shard 1" "--shard 2" "--shard 3")
	if [ $((ngpu % 2)) = 0 ]; then # one agent per half of the GPUs
		placements+=("--shard 0 --agent-ranks $groups" "--shard 2 --agent-ranks $groups" "--shard 3 --agent-ranks $groups")
	fi
	rows=""
	for placement in "${placements[@]}"; do
		# shellcheck disable=SC2206 # the placement is several flags
		args=(train --agent "$work/qwen2.5-3b/hf" --agent "$work/qwen3-4b/hf" --algo umad --turns 1 --synthetic 64
			--val-synthetic 0 --steps 3 --batch $((2 * ngpu)) -g 4 --mini-batch "$ngpu" --max-tokens 128 --gpu-layers 99
			--train-device cuda:0 --dtype bf16 --grad-checkpoint --kl-in-loss --kl-coef 0.001 --dist-backend nccl
			--nproc "$ngpu" $placement)
		# The plan's busiest rank under this placement: its row of the dry run's table.
		plan=$(./umad "${args[@]}" --dry-run --no-memory-check --out "$work/dist-dry" 2>/dev/null |
			grep -F -- "  $placement  " | head -1 | sed -E 's/.*GPU +([0-9.]+ [KMGT]iB).*/\1/' || true)
		out="$work/dist-$(echo "$placement" | tr -c 'a-z0-9' '_')"
		rm -rf "$out"
		exec 3>"$out.mem"
		if ! peak_mem_all ./umad "${args[@]}" --out "$out" >"$out.log" 2>&1; then
			exec 3>&-
			why=$(grep -m1 -o 'memory plan: .*' "$out.log" | cut -c1-100 || true)
			rows+="| \`$placement\` | ${plan:-?} | ${why:-failed: see $out.log} | | | | |\n"
			continue
		fi
		exec 3>&-
		rows+=$(python3 - "$out/metrics.jsonl" "$placement" "${plan:-?}" "$(cat "$out.mem")" <<'EOF'
import json, sys
steps = {}  # step -> its lines, one per agent (the step's time is on each)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("kind") == "train":
        steps.setdefault(r["step"], []).append(r)
keys = sorted(steps)[1:] or sorted(steps)  # the first step includes warm-up
n = len(keys)
step = sum(steps[s][0]["seconds"]["step"] for s in keys) / n
comm = sum(r["seconds"].get("comm", 0) for s in keys for r in steps[s]) / n
sent = sum(r["seconds"].get("comm_bytes", 0) for s in keys for r in steps[s]) / n
sync = sum(r["seconds"]["sync"] for s in keys for r in steps[s]) / n
print("| `%s` | %s | %s MiB | %.1f | %.1f (%.0f%%) | %.0f | %.1f |" % (
    sys.argv[2], sys.argv[3], sys.argv[4], step, comm, 100 * comm / step if step > 0 else 0, sent / 1e6, sync))
EOF
)"\n"
	done
	section+="\n### Several GPUs (\`umad train --nproc $ngpu --dist-backend nccl\`: qwen2.5-3b + qwen3-4b shapes, umad, 1 turn, bf16, gradient checkpointing, batch $((2 * ngpu)) x G 4, 128 tokens; means after step 1; rank 0's collectives)\n\n"
	section+="| placement | plan, busiest GPU | peak, busiest GPU | step s | collectives s | MB to collectives | sync s |\n|---|---|---|---|---|---|---|\n$rows"
fi

printf '%b' "$section" >"$work/section.md"
# The section between its markers is replaced; the rest of the file stays as it was.
python3 - "$results" "$work/section.md" <<'EOF'
import sys
path, body = sys.argv[1], open(sys.argv[2]).read().strip()
text = open(path).read()
b, e = "<!-- gpu:begin -->", "<!-- gpu:end -->"
block = b + "\n" + body + "\n" + e
i, j = text.find(b), text.find(e)
text = text[:i] + block + text[j + len(e):] if 0 <= i < j else text.rstrip("\n") + "\n\n" + block + "\n"
import os
open(path + ".tmp", "w").write(text)
os.replace(path + ".tmp", path)
EOF
log "results in $results (section gpu); raw files in $work"

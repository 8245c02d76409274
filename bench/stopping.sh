#!/usr/bin/env bash
# Adaptive stopping where it can pay: the demo's trained experts debate the 64 held-out
# problems for TURNS turns (default 2, the horizon they were trained on; 4 trajectories,
# seeds 1-2) in full and with --stop agree=R and --stop eu=X; prints each setting's
# generated tokens against the full run's, writes the
# comparison (Table 1 with 95% paired intervals against the full run) to OUT/report, and
# the share of trajectories whose agents were unanimous but wrong at turn 0, which
# agreement-based stopping cannot catch. Usage, after ./build.sh demo:
#   bench/stopping.sh [DEMO_DIR] [OUT] [TURNS]      (defaults: demo, runs/stopping, 2)
# Needs python3 and zstd for the unanimous-but-wrong share (Debian 12 ships both).
set -euo pipefail
cd "$(dirname "$0")/.."
demo=${1:-demo} out=${2:-runs/stopping} turns=${3:-2}
ck="$demo/train/checkpoints/$(cat "$demo/train/checkpoints/latest")"
rm -rf "$out" && mkdir -p "$out"
settings=(full "agree=1" "eu=0.5" "eu=0.2" "eu=0.05")
for s in "${settings[@]}"; do
	stop=()
	[ "$s" = full ] || stop=(--stop "$s")
	./umad debate --agent "$ck/agent-0/model.gguf" --agent "$ck/agent-1/model.gguf" --synthetic 64 --synthetic-task experts \
		--synthetic-max 5 --synthetic-ops '+*' --synthetic-seed 1000004 -k 4 --turns "$turns" --seeds 1,2 --max-tokens 32 \
		--temperature 1 --top-p 1 --kv-type f32 --flash-attn off --deterministic "${stop[@]}" --out "$out/$s" 2>&1 >/dev/null |
		tr '\r' '\n' | awk -v s="$s" '/ tokens in /{n+=$5} END{print s, n}' >>"$out/tokens.txt"
done
awk 'NR==1{full=$2} {printf "%-8s %7d tokens, %5.1f%% saved\n", $1, $2, 100*(1-$2/full)}' "$out/tokens.txt"
runs=()
for s in "${settings[@]}"; do runs+=("$out/$s"); done
./umad report --out "$out/report" --baseline full "${runs[@]}" >/dev/null
for seed in 1 2; do zstd -dcq "$out/full/seed-$seed/rollouts.jsonl.zst"; done | python3 -c '
import json, sys
unanimous_wrong = trajectories = 0
for line in sys.stdin:
    turn0 = json.loads(line)["turns"][0]
    for k in range(len(turn0[0])):
        answers = {agent[k]["answer"] for agent in turn0}
        right = any(agent[k]["grade"]["strict"] for agent in turn0)
        trajectories += 1
        unanimous_wrong += len(answers) == 1 and not right
print(f"unanimous but wrong at turn 0: {unanimous_wrong} of {trajectories} trajectories ({100*unanimous_wrong/trajectories:.1f}%)")'
echo "comparison: $out/report/table1.md" >&2

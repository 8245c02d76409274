#!/usr/bin/env bash
# umad's one build entry point. Usage: ./build.sh [deps|build|release|demo|test|bench|env]
#
#   deps     install what the build needs: Debian packages (apt-get) and Go modules
#   build    build ./umad for this machine (-march=native)                 [default]
#   release  build dist/umad: portable x86-64-v3, libstdc++/libgcc linked statically,
#            so it runs on any x86-64 Linux with glibc and AVX2 (2015+ servers)
#   demo     build, then run the main job on a generated tiny model
#   test     build, then run every test (what CI runs)
#   bench    build, then run the benchmarks and update bench/RESULTS.md
#   env      print the cgo environment, for running `go test` by hand:  eval "$(./build.sh env)"
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages the build and tests need; installed only when missing. libtorch comes
# from Debian (CPU); libopenblas0-openmp is its fast BLAS (the reference BLAS is 13-18x
# slower; the pthread variant must not be installed beside it, ARCHITECTURE.md section 3).
APT_PACKAGES=(build-essential pkg-config cmake libtorch-dev libopenblas0-openmp)

deps() {
	local missing=()
	for p in "${APT_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if ((${#missing[@]})); then
		echo "installing Debian packages: ${missing[*]}" >&2
		local sudo=""
		[ "$(id -u)" = 0 ] || sudo=sudo
		$sudo apt-get update -q
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
	fi
	go mod download
}

# cgo_env sets the flags that compile llama.cpp from the pinned module (ARCHITECTURE.md
# section 3). march picks the CPU features: native for local builds, x86-64-v3 for release.
cgo_env() {
	local march=$1 dir
	dir=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
	export CGO_ENABLED=1
	export CGO_CPPFLAGS="-I$dir/llama/llama.cpp/include -I$dir/ml/backend/ggml/ggml/include"
	export CGO_CFLAGS="-O3 -march=$march -g0"
	export CGO_CXXFLAGS="-O3 -march=$march -g0 -Wno-stringop-overflow"
}

# plugin builds the libtorch plugin into build/ (where cgo/torch finds it).
plugin() {
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build -j"$(nproc)"
}

build() {
	deps
	cgo_env native
	go build -o umad .
	plugin
}

case "${1:-build}" in
deps) deps ;;
build) build ;;
release)
	deps
	cgo_env "${UMAD_MARCH:-x86-64-v3}"
	mkdir -p dist
	go build -trimpath -ldflags '-s -w -extldflags "-static-libstdc++ -static-libgcc"' -o dist/umad .
	echo "dist/umad: $(ldd dist/umad | awk '{print $1}' | tr '\n' ' ')" >&2
	;;
demo)
	build
	out=${UMAD_DEMO_DIR:-demo}
	rm -rf "$out"
	./umad model tiny --arch qwen2 --seed 1 --out "$out/tiny-qwen2"
	./umad model tiny --arch qwen3 --seed 2 --out "$out/tiny-qwen3"
	./umad generate --model "$out/tiny-qwen2/model.gguf" --prompt "What is 3 + 4?" -k 4 --max-tokens 32 --seed 1 \
		--out "$out/samples.jsonl"
	./umad debate --agent "$out/tiny-qwen2/model.gguf" --agent "$out/tiny-qwen3/model.gguf" --synthetic 8 \
		-k 4 --turns 3 --max-tokens 64 --seed 1 --out "$out/debate"
	echo "demo: samples in $out/samples.jsonl, debate report in $out/debate/report/report.md" >&2
	;;
test)
	build
	cgo_env native
	go vet ./...
	go test -count=1 -timeout 60m ./...
	;;
bench)
	build
	./umad bench rollout --results bench/RESULTS.md
	;;
env)
	cgo_env native
	for v in CGO_ENABLED CGO_CPPFLAGS CGO_CFLAGS CGO_CXXFLAGS; do printf 'export %s=%q\n' "$v" "${!v}"; done
	;;
*)
	echo "usage: $0 [deps|build|release|demo|test|bench|env]" >&2
	exit 2
	;;
esac

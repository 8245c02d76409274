#!/usr/bin/env bash
# umad's one build entry point. Usage: ./build.sh [deps|build|release|cuda|cuda-check|demo|test|torch2|torch2-cuda|bench|eager|env]
#
#   deps     install what the build needs: Debian packages (apt-get) and Go modules
#   build    build ./umad for this machine (-march=native)                 [default]
#            with ggml's batch-invariant kernels; UMAD_LLAMAFILE=1 keeps llamafile's
#            tinyBLAS (faster prefill, bytes that follow the batching; README, Debates)
#   release  build dist/umad: portable x86-64-v3, libstdc++/libgcc linked statically,
#            so it runs on any x86-64 Linux with glibc and AVX2 (2015+ servers)
#   cuda     build ggml's CUDA backend (build/cuda/libggml-cuda.so), which umad loads at start
#            when it sits next to the binary or in $UMAD_GGML_BACKENDS; UMAD_CUDA_ARCHS picks
#            the GPU architectures (default 80;86;89;90), UMAD_CUDA_JOBS the parallel
#            compiles (default: all cores). Installs Debian's CUDA 11.8 only
#            on a machine with no CUDA toolkit and no NVIDIA driver.
#   cuda-check  compile a sample of the CUDA sources with the same flags (what CI checks)
#   demo     build, then run the main job: two tiny models, warm start, debate, train, debate, report
#   test     build, compile the CUDA sample (cuda-check), run every test, then torch2 (what CI runs)
#   torch2   the plugin's tests on libtorch 2.6 and the CUDA plugin's compile and link, in a
#            cached Debian 13 root (UMAD_TORCH2_ROOT, default /var/cache/umad/trixie);
#            torch2-cuda only the CUDA compile and link
#   bench    build, then run the benchmarks and update bench/RESULTS.md
#   eager    install Debian's python3-torch (the plugin's libtorch), then run the PyTorch-eager
#            baseline bench/torch_eager.py with the arguments that follow (e.g. --threads 1)
#   env      print the cgo environment, for running `go test` by hand:  eval "$(./build.sh env)"
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages the build and tests need; installed only when missing. libtorch comes
# from Debian (CPU); libopenblas0-openmp is its fast BLAS (the reference BLAS is 13-18x
# slower; the pthread variant must not be installed beside it, docs/ARCHITECTURE.md section 3).
# libgloo-dev: the Gloo headers libtorch's c10d headers include (kernels/umad_dist.cpp).
# chromium: the headless browser the HTML pages' tests load (report/chromium_test.go).
# zsh and fish: the shells umad completion's scripts are tested in (cli/completion_test.go).
APT_PACKAGES=(build-essential pkg-config cmake libtorch-dev libopenblas0-openmp libgloo-dev chromium zsh fish)

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

# cgo_env sets the flags that compile llama.cpp from the pinned module (docs/ARCHITECTURE.md
# section 3). march picks the CPU features: native for local builds, x86-64-v3 for release.
cgo_env() {
	local march=$1 dir
	dir=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
	export CGO_ENABLED=1
	# llama.cpp's src/ too: cgo/llama's weight writer reads llama_model's tensor list.
	export CGO_CPPFLAGS="-I$dir/llama/llama.cpp/include -I$dir/llama/llama.cpp/src -I$dir/ml/backend/ggml/ggml/include"
	# -UGGML_USE_LLAMAFILE: ggml multiplies a micro-batch of one row with its vec_dot and
	# one of several rows with llamafile's tinyBLAS, which sum in another order, so a
	# sequence's logits moved with its batch's makeup. Without tinyBLAS every row takes
	# vec_dot whatever the batch: the same seed gives the same bytes whatever the timing,
	# --slots, -k or --nproc (bench/RESULTS.md, batch invariance, has the cost). The flag
	# must come after ggml-cpu's own -DGGML_USE_LLAMAFILE, and cgo puts CGO_CFLAGS after a
	# package's #cgo CPPFLAGS; cgo/llama's TestBatchInvariance fails if it stops working.
	# UMAD_LLAMAFILE=1 keeps tinyBLAS: faster prefill, bytes that follow the batching.
	export CGO_CFLAGS="-O3 -march=$march -g0"
	[ "${UMAD_LLAMAFILE:-0}" = 1 ] || CGO_CFLAGS+=" -UGGML_USE_LLAMAFILE"
	export CGO_CXXFLAGS="-O3 -march=$march -g0 -Wno-stringop-overflow"
}

# CUDA: ggml's CUDA backend from the pinned module's sources (docs/ARCHITECTURE.md section 3).
CUDA_ARCHS=${UMAD_CUDA_ARCHS:-80;86;89;90}

find_nvcc() {
	command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; }
}

# cuda_toolkit makes sure nvcc exists. A machine's own toolkit (a GPU server's CUDA 12 or
# 13) is used as it is. Only a machine with neither a toolkit nor an NVIDIA driver gets
# Debian's 11.8 (contrib and non-free): it pulls the driver library libcuda1, which must
# never replace a GPU server's own driver.
cuda_toolkit() {
	find_nvcc >/dev/null && return
	if [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null; then
		echo "build.sh: this machine has an NVIDIA driver but no CUDA toolkit: install NVIDIA's toolkit (not its driver) matching the driver, then run again; Debian's would replace the driver's libcuda" >&2
		exit 1
	fi
	local sudo="" list=/etc/apt/sources.list.d/umad-cuda.sources
	[ "$(id -u)" = 0 ] || sudo=sudo
	if [ ! -e "$list" ]; then
		printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: contrib non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' | $sudo tee "$list" >/dev/null
	fi
	echo "installing Debian's CUDA 11.8 toolkit (about 1.6 GB)" >&2
	$sudo apt-get update -q
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends nvidia-cuda-toolkit
}

# cuda_configure DIR ARCHS configures the CUDA project in DIR for ARCHS and sets
# cuda_key: the module version, nvcc version and architectures the build is cached by.
cuda_configure() {
	local bdir=$1 archs=$2 nvcc mod ver nv
	nvcc=$(find_nvcc)
	mod=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
	ver=$(go list -m -f '{{.Version}}' github.com/ollama/ollama)
	nv=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
	cuda_key="github.com/ollama/ollama $ver, nvcc $nv, sm $archs"
	cmake -S cuda -B "$bdir" -DGGML_SRC="$mod/ml/backend/ggml/ggml/src" -DCMAKE_CUDA_COMPILER="$nvcc" \
		-DCMAKE_CUDA_ARCHITECTURES="$archs" >/dev/null
}

# cuda builds the whole backend (minutes on a 16-core server, about 30 min at -j2) into
# build/cuda: libggml-cuda.so, its libggml-base.so.0 and ggml-cuda.json, which says what it
# was built from; umad refuses a library built from another module version.
cuda() {
	deps
	cuda_toolkit
	local bdir=build/cuda-cmake out=build/cuda
	cuda_configure "$bdir" "$CUDA_ARCHS"
	if [ -f "$out/ggml-cuda.json" ] && grep -qF "\"key\": \"$cuda_key\"" "$out/ggml-cuda.json"; then
		echo "build/cuda is up to date ($cuda_key)" >&2
		return
	fi
	cmake --build "$bdir" --target ggml-cuda -j"${UMAD_CUDA_JOBS:-$(nproc)}"
	rm -rf "$out.tmp" && mkdir -p "$out.tmp"
	cp -P "$bdir"/lib/libggml-base.so* "$bdir"/lib/libggml-cuda.so "$out.tmp/"
	printf '{\n  "key": "%s",\n  "module": "github.com/ollama/ollama",\n  "version": "%s"\n}\n' "$cuda_key" \
		"$(go list -m -f '{{.Version}}' github.com/ollama/ollama)" >"$out.tmp/ggml-cuda.json"
	rm -rf "$out" && mv "$out.tmp" "$out"
	echo "build/cuda: $(du -sh "$out" | cut -f1) ($cuda_key)" >&2
}

# cuda_check compiles a fixed sample of the CUDA sources with the full build's flags, for
# CI on machines without a GPU: the core file, one quantized-matmul (mmq) and one
# flash-attention template instance, for sm_90 only.
cuda_check() {
	cuda_toolkit
	local bdir=build/cuda-check
	cuda_configure "$bdir" 90
	make -C "$bdir/ggml/ggml-cuda" --no-print-directory ggml-cuda.cu.o \
		template-instances/mmq-instance-q8_0.cu.o template-instances/fattn-vec-instance-f16-f16.cu.o
}

# plugin builds the libtorch plugin into build/ (where cgo/torch finds it).
plugin() {
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build -j"$(nproc)"
}

# torch2: the plugin on libtorch 2.6, the version line GPU servers run (pip 2.4 to 2.10), in a
# Debian 13 root made with debootstrap from Debian's archive alone and kept in
# $UMAD_TORCH2_ROOT (default /var/cache/umad/trixie) for later runs. Debian 12's glibc is
# too old for 13's libtorch, so the plugin is built inside the root, and the host's Go
# test binaries (older glibc, so they run there) load it there. TORCH2_PACKAGES is what the
# root installs; changing it rebuilds the root.
TORCH2_ROOT=${UMAD_TORCH2_ROOT:-/var/cache/umad/trixie}
TORCH2_PACKAGES=(libtorch-dev libgloo-dev libopenblas0-openmp cmake g++ make nvidia-cuda-toolkit libnccl-dev)
# The CUDA libtorch and Gloo conflict with the CPU ones, and libtorch's nvidia-cudnn
# dependency downloads from outside Debian's archive: these are unpacked into
# /opt/libtorch-cuda, not installed.
TORCH2_UNPACK=(libtorch-cuda-dev libtorch-cuda-2.6 libgloo-cuda-dev libgloo-cuda-0 libtensorpipe-cuda-0)
DEBIAN_MIRROR=http://deb.debian.org/debian

# in_root ROOT CMD... runs CMD in ROOT with /proc, /sys, /dev and this checkout and
# ../shared bind-mounted at their own paths, in a mount namespace of its own, so nothing
# stays mounted when it ends, however it ends.
in_root() {
	local root=$1 repo shared mods
	shift
	repo=$(pwd -P)
	shared=$(cd .. && pwd -P)/shared
	mods=$(go env GOMODCACHE)
	unshare --mount --propagation private -- bash -euc '
		root=$1 repo=$2 shared=$3 mods=$4
		shift 4
		for d in /proc /sys /dev "$repo" "$shared" "$mods"; do
			[ -e "$d" ] || continue
			mkdir -p "$root$d"
			mount --rbind "$d" "$root$d"
		done
		exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 CI="${CI:-}" "$@"
	' in_root "$root" "$repo" "$shared" "$mods" "$@"
}

torch2_root() {
	local root=$TORCH2_ROOT want
	want="trixie: ${TORCH2_PACKAGES[*]}; unpacked: ${TORCH2_UNPACK[*]}"
	[ -f "$root/.umad-root" ] && [ "$(cat "$root/.umad-root")" = "$want" ] && return
	# Only a root this function made (it holds .umad-root) is ever replaced.
	if [ -e "$root" ] && [ ! -f "$root/.umad-root" ]; then
		echo "build.sh: $root exists but is not a root ./build.sh torch2 made; set UMAD_TORCH2_ROOT to a new path" >&2
		exit 1
	fi
	APT_PACKAGES+=(debootstrap)
	deps
	echo "build.sh: making the Debian 13 root $root for libtorch 2.6 and CUDA 12.4 (about 10 minutes, 7 GB)" >&2
	rm -rf "$root.tmp" && mkdir -p "$(dirname "$root")"
	debootstrap --variant=minbase trixie "$root.tmp" "$DEBIAN_MIRROR" >/dev/null
	echo "deb $DEBIAN_MIRROR trixie main contrib non-free" >"$root.tmp/etc/apt/sources.list"
	in_root "$root.tmp" apt-get update -q >/dev/null
	in_root "$root.tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		"${TORCH2_PACKAGES[@]}" >/dev/null
	in_root "$root.tmp" bash -euc 'cd /var/cache/apt/archives && apt-get download -q "$@" >/dev/null &&
		for p in "$@"; do dpkg -x "$p"_*.deb /opt/libtorch-cuda; done' _ "${TORCH2_UNPACK[@]}"
	in_root "$root.tmp" apt-get clean
	echo "$want" >"$root.tmp/.umad-root"
	rm -rf "$root" && mv "$root.tmp" "$root"
}

# torch2_cuda compiles and links the CUDA plugin (UMAD_TORCH_CUDA, with NCCL) against the
# root's CUDA libtorch 2.6, checks that `umad env` loads it on this GPU-less machine, and
# compiles cuda-check's ggml sample with CUDA 12.4. Nothing CUDA runs here.
torch2_cuda() {
	local repo out mod
	repo=$(pwd -P)
	out=$repo/build/torch2-cuda
	mkdir -p "$out"
	echo "libtorch 2.6 (CUDA 12.4): compiling and linking the plugin" >&2
	# g++ rather than CMake: Torch's CMake config looks for cuDNN, which is not unpacked.
	[ -f "$out/libumad_torch.so" ] && [ -z "$(find kernels -newer "$out/libumad_torch.so")" ] ||
		in_root "$TORCH2_ROOT" bash -euc 'cd "$1" && T=/opt/libtorch-cuda/usr L=/opt/libtorch-cuda/usr/lib/x86_64-linux-gnu &&
		g++ -O1 -g0 -std=c++17 -shared -fPIC -fvisibility=hidden -DUMAD_TORCH_CUDA -DUSE_C10D_GLOO -DUSE_DISTRIBUTED \
			-Ikernels -I$T/include -I$T/include/torch/csrc/api/include kernels/*.cpp -o "$2/libumad_torch.so" \
			-L$L -Wl,-rpath,$L -Wl,--no-as-needed -ltorch_cuda -ltorch_cpu -ltorch -lc10_cuda -lc10 -Wl,--as-needed' \
		_ "$repo" "$out"
	# Loading it needs cuDNN, which Debian's archive lacks (nvidia-cudnn downloads it). With
	# no GPU nothing calls it, so a stub with its symbols, each answering
	# CUDNN_STATUS_NOT_INITIALIZED, stands in for it in this check alone.
	in_root "$TORCH2_ROOT" bash -euc 'L=/opt/libtorch-cuda/usr/lib/x86_64-linux-gnu && mkdir -p "$1/stub" && cd "$1/stub" &&
		nm -D --undefined-only $L/libtorch_cuda.so.2.6 | sed -n "s/.* \(cudnn[A-Za-z0-9_]*\)@libcudnn.so.9$/int \1(void) { return 1; }/p" | sort -u >cudnn.c &&
		echo "libcudnn.so.9 { global: *; };" >cudnn.map &&
		gcc -shared -fPIC -Wl,-soname,libcudnn.so.9 -Wl,--version-script=cudnn.map cudnn.c -o libcudnn.so.9' _ "$out"
	in_root "$TORCH2_ROOT" env UMAD_TORCH_PLUGIN="$out/libumad_torch.so" \
		LD_LIBRARY_PATH="$out/stub:/opt/libtorch-cuda/usr/lib/x86_64-linux-gnu:/opt/libtorch-cuda/usr/lib" "$repo/umad" env >"$out/env.txt" 2>&1 || {
		cat "$out/env.txt" >&2
		echo "build.sh: umad env failed with the CUDA plugin" >&2
		return 1
	}
	grep -q "libtorch  2.6.[0-9]* (CUDA 12.4), 0 GPUs: training falls back to the CPU" "$out/env.txt" || {
		cat "$out/env.txt" >&2
		echo "build.sh: umad env does not report the CUDA libtorch" >&2
		return 1
	}
	sed 's/^/    /' "$out/env.txt"
	echo "CUDA 12.4: compiling cuda-check's ggml sample" >&2
	mod=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
	in_root "$TORCH2_ROOT" bash -euc 'b="$1/build/cuda-check-12.4" &&
		cmake -S "$1/cuda" -B "$b" -DGGML_SRC="$2/ml/backend/ggml/ggml/src" -DCMAKE_CUDA_COMPILER=/usr/bin/nvcc \
			-DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
		make -C "$b/ggml/ggml-cuda" --no-print-directory ggml-cuda.cu.o \
			template-instances/mmq-instance-q8_0.cu.o template-instances/fattn-vec-instance-f16-f16.cu.o' _ "$repo" "$mod"
}

# TORCH2_TESTS: every package that loads the plugin, and of cli the commands that train.
# TORCH2_SKIP: TestExpertsLearnToRead measures 30 RL steps' learning on 1.13's numerics; on
# 2.6 the warm start ends elsewhere and the steps teach less (its comment has the figures).
# TestPageFollowsTheLog opens the training page in chromium, which the root does not have;
# nothing of it depends on libtorch's version. TestDemoLearns/grpo-lora8 likewise measures
# LoRA's slow learning on 1.13's numerics (its comment has the figures; on 2.6 it gained 0.047
# of the 0.05 it asks); its full-weight cases run on 2.6 too.
TORCH2_TESTS=(cgo/torch: trainer: "cli:^Test(Score|SFT|Train)")
TORCH2_SKIP='^TestExpertsLearnToRead$|^TestPageFollowsTheLog$|^TestDemoLearns$/^grpo-lora8$'

torch2() {
	torch2_root
	in_root "$TORCH2_ROOT" bash -euc 'cmake -S "$1" -B "$1/build/torch2" -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$1/build/torch2" -j"$(nproc)"' _ "$(pwd -P)"
	cgo_env native
	local t pkg run bin plugin
	plugin=$(pwd -P)/build/torch2/libumad_torch.so
	for t in "${TORCH2_TESTS[@]}"; do
		pkg=${t%%:*} run=${t#*:}
		bin=$(pwd -P)/build/torch2/tests/$(echo "$pkg" | tr / _).test
		go test -c -o "$bin" "./$pkg"
		echo "libtorch 2.6: $pkg${run:+ ($run)}" >&2
		in_root "$TORCH2_ROOT" env UMAD_TORCH_PLUGIN="$plugin" bash -euc 'cd "$1" && "$2" -test.count=1 -test.timeout=30m -test.skip "$4" ${3:+-test.run "$3"}' \
			_ "$(pwd -P)/$pkg" "$bin" "$run" "$TORCH2_SKIP" | sed 's/^/    /'
	done
}

build() {
	deps
	cgo_env native
	# -buildvcs=auto: the commit goes into the binary (umad env) even where GOFLAGS turns it off.
	go build -buildvcs=auto -o umad .
	plugin
}

case "${1:-build}" in
deps) deps ;;
torch2)
	build
	torch2
	torch2_cuda
	;;
torch2-cuda)
	build
	torch2_root
	torch2_cuda
	;;
build) build ;;
cuda) cuda ;;
cuda-check) cuda_check ;;
release)
	deps
	cgo_env "${UMAD_MARCH:-x86-64-v3}"
	mkdir -p dist
	go build -buildvcs=auto -trimpath -ldflags '-s -w -extldflags "-static-libstdc++ -static-libgcc"' -o dist/umad .
	echo "dist/umad: $(ldd dist/umad | awk '{print $1}' | tr '\n' ' ')" >&2
	;;
demo)
	build
	out=${UMAD_DEMO_DIR:-demo}
	rm -rf "$out"
	# The built-in experts task at a size a hidden-64 model learns on CPU in minutes: sums and
	# products of two operands from 1..5, each agent warm-started on one kind, so a peer's
	# worked result is worth reading (README, Training). Log-probs are exact (F32 KV cache,
	# flash attention off, and in training F32 rollout weights, pinned since a GPU's default is
	# bf16); llama.cpp's kernels do not depend on the batch, so the same seed gives the same
	# compare.md whatever the timing, with no step clock.
	task=(--synthetic-task experts --synthetic-max 5 --synthetic-ops '+*')
	sampling=(--max-tokens 32 --temperature 1 --top-p 1 --kv-type f32 --flash-attn off)
	# Two different architectures, as the paper pairs Qwen2.5 and Qwen3: the Qwen2 model the sum
	# expert, the Qwen3 model the product expert, warm-started side by side on one core each.
	for a in qwen2:1:0 qwen3:2:1; do
		arch=${a%%:*} seed=${a#*:} expert=${a##*:}
		seed=${seed%:*}
		./umad model tiny --arch "$arch" --seed "$seed" --out "$out/tiny-$arch"
		./umad sft --model "$out/tiny-$arch/hf" --synthetic 384 "${task[@]}" --expert "$expert" --epochs 12 --lr 3e-3 \
			--torch-threads 1 --out "$out/sft-$arch" 2>"$out/sft-$arch.log" &
	done
	wait %1 && wait %2
	debate() { # debate AGENT0 AGENT1 OUT: the 64 validation problems umad train holds out, 4 trajectories, 2 turns
		./umad debate --agent "$1" --agent "$2" --synthetic 64 "${task[@]}" --synthetic-seed 1000004 -k 4 --turns 2 \
			"${sampling[@]}" --out "$3"
	}
	debate "$out/sft-qwen2/model.gguf" "$out/sft-qwen3/model.gguf" "$out/before"
	./umad train --agent "$out/sft-qwen2/hf" --agent "$out/sft-qwen3/hf" --algo umad --synthetic 64 "${task[@]}" \
		--val-synthetic 64 --val-k 4 --val-every 20 --val-temperature 1 --steps 40 --batch 8 -g 8 --mini-batch 4 --lr 3e-4 \
		"${sampling[@]}" --rollout-dtype f32 --prompt-limit 512 --out "$out/train" # validation samples as the debates before and after do
	ck="$out/train/checkpoints/$(cat "$out/train/checkpoints/latest")"
	debate "$ck/agent-0/model.gguf" "$ck/agent-1/model.gguf" "$out/after"
	./umad report --out "$out" "$out/before" "$out/after"
	echo "demo: debate before and after training in $out/compare.md, training report in $out/train/report/training.md" >&2
	;;
test)
	build
	cuda_check
	cgo_env native
	go vet ./...
	go test -count=1 -timeout 60m ./...
	torch2
	torch2_cuda
	;;
bench)
	build
	./umad bench rollout --results bench/RESULTS.md
	;;
eager)
	APT_PACKAGES+=(python3-torch)
	deps
	/usr/bin/python3 bench/torch_eager.py "${@:2}"
	;;
env)
	cgo_env native
	for v in CGO_ENABLED CGO_CPPFLAGS CGO_CFLAGS CGO_CXXFLAGS; do printf 'export %s=%q\n' "$v" "${!v}"; done
	;;
*)
	echo "usage: $0 [deps|build|release|cuda|cuda-check|demo|test|torch2|torch2-cuda|bench|eager|env]" >&2
	exit 2
	;;
esac

#!/usr/bin/env python3
"""PyTorch-eager baseline for the torch plugin's benchmarks (cgo/torch BenchmarkPlugin*).

Same math as the plugin (kernels/umad_forward.cpp) in plain eager PyTorch on the same libtorch (Debian
python3-torch 1.13): a packed batch of sequences of one length, per-sequence causal
attention, full-vocabulary log-softmax of the response rows. Prints tokens/s for log-probs
(no grad) and for one SFT update (forward, backward, AdamW).

    ./build.sh eager --threads 1
    ./build.sh eager --threads 1 --preset qwen2.5-0.5b

Each figure is the mean of --repeats timed calls after one untimed call, as the Go
benchmarks' -benchtime Nx reports it.
"""
import argparse, math, time
import torch
import torch.nn.functional as F


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class Model(torch.nn.Module):
    def __init__(s, V, H, I, L, nh, nkv, hd, theta=1e6, eps=1e-6):
        super().__init__()
        s.nh, s.nkv, s.hd, s.eps = nh, nkv, hd, eps
        g = torch.Generator().manual_seed(1)
        p = lambda *sh: torch.nn.Parameter(torch.randn(*sh, generator=g) / math.sqrt(sh[-1]))
        s.emb = p(V, H)
        s.layers = torch.nn.ModuleList()
        for _ in range(L):
            l = torch.nn.Module()
            l.ln1, l.ln2 = torch.nn.Parameter(torch.ones(H)), torch.nn.Parameter(torch.ones(H))
            l.q, l.k, l.v, l.o = p(nh * hd, H), p(nkv * hd, H), p(nkv * hd, H), p(H, nh * hd)
            l.qb, l.kb, l.vb = [torch.nn.Parameter(torch.zeros(n)) for n in (nh * hd, nkv * hd, nkv * hd)]
            l.gate, l.up, l.down = p(I, H), p(I, H), p(H, I)
            s.layers.append(l)
        s.norm = torch.nn.Parameter(torch.ones(H))
        s.inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))

    def forward(s, tokens, lens):
        T = tokens.shape[0]
        pos = torch.cat([torch.arange(n) for n in lens]).float()
        f = pos[:, None] * s.inv_freq[None]
        emb = torch.cat([f, f], -1)[:, None]
        cos, sin = emb.cos(), emb.sin()
        rope = lambda t: t * cos + torch.cat([-t[..., s.hd // 2:], t[..., :s.hd // 2]], -1) * sin
        x = s.emb[tokens]
        for l in s.layers:
            h = rms(x, l.ln1, s.eps)
            q = rope(F.linear(h, l.q, l.qb).view(T, s.nh, s.hd))
            k = rope(F.linear(h, l.k, l.kb).view(T, s.nkv, s.hd))
            v = F.linear(h, l.v, l.vb).view(T, s.nkv, s.hd)
            outs, off, g = [], 0, s.nh // s.nkv
            for n in lens:
                qs = q[off:off + n].transpose(0, 1).reshape(s.nkv, g, n, s.hd)
                ks, vs = k[off:off + n].transpose(0, 1)[:, None], v[off:off + n].transpose(0, 1)[:, None]
                sc = qs @ ks.transpose(-1, -2) / math.sqrt(s.hd)
                sc = sc.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
                outs.append((sc.softmax(-1) @ vs).reshape(s.nh, n, s.hd).transpose(0, 1).reshape(n, -1))
                off += n
            x = x + F.linear(torch.cat(outs), l.o)
            h = rms(x, l.ln2, s.eps)
            x = x + F.linear(F.silu(F.linear(h, l.gate)) * F.linear(h, l.up), l.down)
        return rms(x, s.norm, s.eps)


# The shapes of cgo/torch's benchShapes: (vocab, hidden, intermediate, layers, heads,
# kv heads, head dim, sequences); every sequence is 64 prompt + 64 response tokens.
PRESETS = {
    "bench": (4096, 256, 512, 4, 8, 2, 32, 8),
    "qwen2.5-0.5b": (151936, 896, 4864, 24, 14, 2, 64, 4),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--preset", choices=PRESETS, default="bench")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--response", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    V, H, I, L, nh, nkv, hd, seqs = PRESETS[a.preset]
    m = Model(V, H, I, L, nh, nkv, hd)
    g = torch.Generator().manual_seed(2)
    n = a.prompt + a.response
    tokens = torch.randint(0, V, (seqs * n,), generator=g)
    lens = [n] * seqs
    rows = torch.cat([torch.arange(i * n + a.prompt - 1, i * n + n - 1) for i in range(seqs)])
    targets = tokens[rows + 1]
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.01)

    def logprobs():
        lsm = F.log_softmax((m(tokens, lens)[rows] @ m.emb.t()) / 0.6, -1)
        return lsm.gather(1, targets[:, None])[:, 0], -(lsm.exp() * lsm).sum(-1)

    def mean_time(f):
        f()
        ts = []
        for _ in range(a.repeats):
            t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
        return sum(ts) / len(ts)

    with torch.no_grad():
        t_lp = mean_time(logprobs)

    def update():
        opt.zero_grad(set_to_none=True)
        (-logprobs()[0].mean()).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    t_up = mean_time(update)
    tok = seqs * n
    print(f"torch {torch.__version__} threads {a.threads} V={V} H={H} L={L} "
          f"batch {seqs}x({a.prompt}+{a.response})")
    print(f"eager logprobs: {tok / t_lp:.0f} tokens/s   update: {tok / t_up:.0f} tokens/s")


if __name__ == "__main__":
    main()

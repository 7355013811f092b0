"""Llama-3 / Qwen2.5-style decoder layers of our own, tensor-parallel (Megatron), for
tools/bench-model: the same math as Hugging Face transformers' LlamaDecoderLayer and
Qwen2DecoderLayer (RMSNorm, rotary embeddings, grouped-query attention through
torch.nn.functional.scaled_dot_product_attention, SwiGLU MLP; Qwen2.5's q/k/v bias),
random weights from a seed.

Configs and shard shapes need no torch (the CPU tests run them anywhere):

    cfg = model.config("llama3-8b", layers=2)        # a preset, fields overridden
    model.shard_shapes(cfg, 4)                       # every weight's per-rank shape at TP 4
    model.emulate(cfg, 8, 2)                         # TP 8's per-rank shapes on 2 ranks

With torch:

    full = model.make_weights(cfg, seed, device)     # the unsharded model
    mine = model.shard_weights(full, cfg, world, rank)
    out = model.forward(mine, cfg_local, comm, ids, attn)   # comm: a TP / SP strategy

A layer, Megatron style: QKV and gate/up column-parallel (this rank's heads and
intermediate columns), o_proj and down_proj row-parallel, each followed by the
all-reduce, the residual add and the next RMSNorm (vLLM's fused_add_rms_norm: the
residual stream stays in bf16 beside the normed activations). Sequence parallel (sp):
the residual stream holds this rank's rows only; an all-gather feeds QKV and gate/up,
a reduce-scatter leaves o_proj and down_proj, the norms run on the local rows.
Communication strategies implement `linear_all_reduce_norm` (non-SP) or `all_gather_linear`
and `linear_reduce_scatter` (SP); tools/bench-model has them.
"""
import dataclasses
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # configs and shapes work without torch
    torch = F = None

# The public configs (config.json of each model on the Hugging Face hub): hidden_size,
# intermediate_size, num_attention_heads, num_key_value_heads, head_dim (hidden / heads),
# vocab_size, num_hidden_layers, rope_theta, rms_norm_eps, and Qwen2's q/k/v bias.
PRESETS = {
    "llama3-8b": dict(hidden=4096, intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256,
                      full_layers=32, rope_theta=500000.0, eps=1e-5, qkv_bias=False),
    "llama3-70b": dict(hidden=8192, intermediate=28672, heads=64, kv_heads=8, head_dim=128, vocab=128256,
                       full_layers=80, rope_theta=500000.0, eps=1e-5, qkv_bias=False),
    "qwen2.5-7b": dict(hidden=3584, intermediate=18944, heads=28, kv_heads=4, head_dim=128, vocab=152064,
                       full_layers=28, rope_theta=1000000.0, eps=1e-6, qkv_bias=True),
    "qwen2.5-32b": dict(hidden=5120, intermediate=27648, heads=40, kv_heads=8, head_dim=128, vocab=152064,
                        full_layers=64, rope_theta=1000000.0, eps=1e-5, qkv_bias=True),
    # Not a public model: Llama's architecture at a size for quick checks (tools/gpu-check).
    "tiny": dict(hidden=1024, intermediate=2816, heads=16, kv_heads=4, head_dim=64, vocab=32000,
                 full_layers=2, rope_theta=500000.0, eps=1e-5, qkv_bias=False),
}
DEFAULT_LAYERS = 4


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    layers: int
    rope_theta: float
    eps: float
    qkv_bias: bool


def config(preset="llama3-8b", **overrides):
    """A preset with fields overridden (None: keep the preset's). layers defaults to
    DEFAULT_LAYERS, not the model's depth: the benchmark reports per-layer time."""
    if preset not in PRESETS:
        raise ValueError("unknown preset %r (one of %s)" % (preset, ", ".join(PRESETS)))
    fields = dict(PRESETS[preset])
    fields.pop("full_layers")
    fields["layers"] = DEFAULT_LAYERS
    unknown = set(overrides) - set(fields)
    if unknown:
        raise ValueError("unknown config field(s): %s" % ", ".join(sorted(unknown)))
    fields.update({k: v for k, v in overrides.items() if v is not None})
    cfg = Config(name=preset, **fields)
    for f in ("hidden", "intermediate", "heads", "kv_heads", "head_dim", "vocab", "layers"):
        if getattr(cfg, f) < 1:
            raise ValueError("%s must be positive, got %d" % (f, getattr(cfg, f)))
    if cfg.heads % cfg.kv_heads:
        raise ValueError("heads (%d) must be a multiple of kv_heads (%d)" % (cfg.heads, cfg.kv_heads))
    if cfg.head_dim % 2:
        raise ValueError("head_dim (%d) must be even (rotary embeddings)" % cfg.head_dim)
    return cfg


# The flags that override a preset's fields (tools/bench-model --hidden ...).
CONFIG_FLAGS = (("hidden", int), ("intermediate", int), ("heads", int), ("kv_heads", int), ("head_dim", int),
                ("layers", int), ("vocab", int), ("rope_theta", float), ("eps", float))


def add_config_args(ap):
    ap.add_argument("--preset", default="llama3-8b", help="one of %s (default %%(default)s)" % ", ".join(PRESETS))
    for name, kind in CONFIG_FLAGS:
        ap.add_argument("--" + name.replace("_", "-"), type=kind, help="override the preset's " + name)
    ap.add_argument("--qkv-bias", choices=("on", "off"), help="override the preset's q/k/v bias")


def config_from_args(args):
    over = {name: getattr(args, name) for name, _ in CONFIG_FLAGS}
    if getattr(args, "qkv_bias", None):
        over["qkv_bias"] = args.qkv_bias == "on"
    return config(args.preset, **over)


@dataclasses.dataclass(frozen=True)
class Local:
    """One rank's share: q heads, KV heads (replicated where TP exceeds them, as vLLM and
    Megatron do), intermediate columns."""
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    hidden: int

    @property
    def qkv(self):
        return (self.heads + 2 * self.kv_heads) * self.head_dim


def local(cfg, tp):
    """The per-rank shapes of TP tp, or ValueError saying what does not divide."""
    if cfg.heads % tp:
        raise ValueError("TP %d: heads (%d) not a multiple of %d" % (tp, cfg.heads, tp))
    if cfg.intermediate % tp:
        raise ValueError("TP %d: intermediate (%d) not a multiple of %d" % (tp, cfg.intermediate, tp))
    if cfg.kv_heads % tp and tp % cfg.kv_heads:
        raise ValueError("TP %d: kv_heads (%d) neither a multiple nor a divisor of %d" % (tp, cfg.kv_heads, tp))
    return Local(cfg.heads // tp, max(1, cfg.kv_heads // tp), cfg.head_dim, cfg.intermediate // tp, cfg.hidden)


def shard_shapes(cfg, tp):
    """Every weight's shape on one rank at TP tp (nn.Linear weights: [out, in]); the
    KV cache's per-sequence [kv heads, head_dim]."""
    lo = local(cfg, tp)
    shapes = {"embed": (cfg.vocab, cfg.hidden), "qkv_proj": (lo.qkv, cfg.hidden),
              "o_proj": (cfg.hidden, lo.heads * lo.head_dim), "gate_up_proj": (2 * lo.intermediate, cfg.hidden),
              "down_proj": (cfg.hidden, lo.intermediate),
              "input_layernorm": (cfg.hidden,), "post_attention_layernorm": (cfg.hidden,), "norm": (cfg.hidden,),
              "kv_cache": (lo.kv_heads, lo.head_dim)}
    if cfg.qkv_bias:
        shapes["qkv_bias"] = (lo.qkv,)
    return shapes


def emulate(cfg, tp_shapes, world):
    """--tp-shapes: the model whose TP `world` shards have TP `tp_shapes`'s per-rank
    shapes (a 1/(tp_shapes/world) slice of the heads and intermediate columns): the
    benchmark's collectives then move TP tp_shapes's bytes per rank among the ranks that
    exist. Its unsharded form is the correctness reference."""
    if tp_shapes == world:
        return cfg
    if tp_shapes < world or tp_shapes % world:
        raise ValueError("--tp-shapes %d must be a multiple of the world size %d" % (tp_shapes, world))
    lo = local(cfg, tp_shapes)
    return dataclasses.replace(cfg, heads=lo.heads * world, kv_heads=lo.kv_heads * world,
                               intermediate=lo.intermediate * world)


# ---- results: tools/bench-model's rows (no torch) ---------------------------------------

CSV_FIELDS = ("preset", "hidden", "intermediate", "heads", "kv_heads", "head_dim", "layers", "tp_shapes", "ranks",
              "phase", "tokens", "seqs", "kv_len", "variant", "step_us", "layer_us", "tokens_per_s", "vs_nccl",
              "vs_best_other", "over_bound", "max_abs_err", "max_rel_err", "note")


def summarize(rows):
    """Fill each timed row's ratios within its workload: vs_nccl (nccl's time / this),
    vs_best_other (the fastest other real variant's / this), over_bound (this / the
    fastest bound)."""
    by = {}
    for r in rows:
        by.setdefault((r["phase"], r["tokens"]), []).append(r)
    for group in by.values():
        t = {r["variant"]: r["step_us"] for r in group if r["step_us"]}
        real = {k: x for k, x in t.items() if not k.startswith("bound")}
        bound = min([x for k, x in t.items() if k.startswith("bound")] or [0])
        for r in group:
            x = r["step_us"]
            if not x:
                continue
            others = [y for k, y in real.items() if k != r["variant"]]
            r["vs_nccl"] = "%.3f" % (real["nccl"] / x) if "nccl" in real else ""
            r["vs_best_other"] = "%.3f" % (min(others) / x) if others and not r["variant"].startswith("bound") else ""
            r["over_bound"] = "%.3f" % (x / bound) if bound else ""
    return rows


def write_csv(rows, path):
    with open(path, "w") as f:
        f.write(",".join(CSV_FIELDS) + "\n")
        for r in rows:
            f.write(",".join(str(r.get(k, "")).replace(",", ";") for k in CSV_FIELDS) + "\n")


def print_table(rows, out=sys.stdout):
    last = None
    for r in rows:
        key = (r["phase"], r["tokens"])
        if key != last:
            last = key
            what = ("prefill %d tokens (%d seq)" % (r["tokens"], r["seqs"]) if r["phase"] == "prefill"
                    else "decode batch %d over %d cached tokens" % (r["tokens"], r["kv_len"]))
            out.write("\n%s\n%-15s %10s %9s %11s %8s %10s %7s  %s\n" % (
                what, "variant", "step_us", "layer_us", "tokens/s", "vs_nccl", "vs_best", "/bound", "note"))
        if r["step_us"]:
            out.write("%-15s %10.1f %9.1f %11.0f %8s %10s %7s  %s\n" % (
                r["variant"], r["step_us"], r["layer_us"], r["tokens_per_s"], r["vs_nccl"] or "-",
                r["vs_best_other"] or "-", r["over_bound"] or "-", r["note"]))
        else:
            out.write("%-15s %10s %9s %11s %8s %10s %7s  %s\n" % ((r["variant"],) + ("-",) * 6 + (r["note"],)))
    out.flush()


# ---- torch from here on --------------------------------------------------------------


def make_weights(cfg, seed, device, dtype=None):
    """The unsharded model's weights, the same for every rank given the seed: nn.Linear
    weights [out, in] of std 1/sqrt(in), norms' gammas 1 + N(0, 0.1), Qwen's biases N(0, 0.1),
    the embedding N(0, 1)."""
    dtype = dtype or torch.bfloat16
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape, std=1.0, mean=0.0):
        return (torch.randn(*shape, device=device, dtype=torch.float32, generator=g) * std + mean).to(dtype)

    def linear(out, inp):
        return randn(out, inp, std=inp ** -0.5)

    h, d = cfg.hidden, cfg.head_dim
    layers = []
    for _ in range(cfg.layers):
        w = dict(q=linear(cfg.heads * d, h), k=linear(cfg.kv_heads * d, h), v=linear(cfg.kv_heads * d, h),
                 o=linear(h, cfg.heads * d), gate=linear(cfg.intermediate, h), up=linear(cfg.intermediate, h),
                 down=linear(h, cfg.intermediate), ln1=randn(h, std=0.1, mean=1.0), ln2=randn(h, std=0.1, mean=1.0))
        if cfg.qkv_bias:
            w.update(bq=randn(cfg.heads * d, std=0.1), bk=randn(cfg.kv_heads * d, std=0.1),
                     bv=randn(cfg.kv_heads * d, std=0.1))
        layers.append(w)
    return dict(embed=randn(cfg.vocab, h), norm=randn(h, std=0.1, mean=1.0), layers=layers)


def kv_slice(cfg, tp, rank):
    """This rank's KV heads [first, first + count): a block, or the replica it holds."""
    lo = local(cfg, tp)
    if cfg.kv_heads >= tp:
        return rank * lo.kv_heads, lo.kv_heads
    return rank // (tp // cfg.kv_heads), 1


def shard_weights(full, cfg, tp, rank):
    """Rank `rank`'s weights at TP tp: per layer qkv [q; k; v rows of its heads], o
    [hidden, its heads' columns], gate_up [gate; up rows], down [hidden, its columns],
    the norms; embed and norm shared (replicated)."""
    lo, d = local(cfg, tp), cfg.head_dim
    q0, kv0 = rank * lo.heads * d, kv_slice(cfg, tp, rank)[0] * d
    qs, kvs = slice(q0, q0 + lo.heads * d), slice(kv0, kv0 + lo.kv_heads * d)
    i0 = rank * lo.intermediate
    cs = slice(i0, i0 + lo.intermediate)
    layers = []
    for w in full["layers"]:
        s = dict(qkv=torch.cat([w["q"][qs], w["k"][kvs], w["v"][kvs]]).contiguous(),
                 o=w["o"][:, qs].contiguous(), gate_up=torch.cat([w["gate"][cs], w["up"][cs]]).contiguous(),
                 down=w["down"][:, cs].contiguous(), ln1=w["ln1"], ln2=w["ln2"], bqkv=None)
        if cfg.qkv_bias:
            s["bqkv"] = torch.cat([w["bq"][qs], w["bk"][kvs], w["bv"][kvs]]).contiguous()
        layers.append(s)
    return dict(embed=full["embed"], norm=full["norm"], layers=layers)


def rope(positions, head_dim, theta, dtype):
    """cos, sin [tokens, 1, head_dim] (HF's default rotary embedding: computed in fp32,
    cast to the activations' type)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    freqs = positions.float()[:, None] * inv[None]
    emb = torch.cat([freqs, freqs], dim=-1)[:, None, :]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


def rms_norm(x, gamma, eps):
    return F.rms_norm(x, (x.shape[-1],), gamma, eps)


@dataclasses.dataclass
class Attention:
    """What a step attends over. Prefill: `seqs` sequences of equal length, causal,
    positions 0.. of each. Decode: one token per sequence at position `pos` of each
    layer's static cache (k, v [batch, kv heads, pos + 1, head_dim]); the step writes
    its k, v at `pos` and attends over the whole cache."""
    cos: "torch.Tensor"
    sin: "torch.Tensor"
    seqs: int = 1
    caches: list = None
    pos: int = 0

    @staticmethod
    def prefill(tokens, seqs, cfg, device, dtype):
        if tokens % seqs:
            raise ValueError("prefill: %d tokens do not split into %d sequences" % (tokens, seqs))
        pos = torch.arange(tokens // seqs, device=device).repeat(seqs)
        return Attention(*rope(pos, cfg.head_dim, cfg.rope_theta, dtype), seqs=seqs)

    @staticmethod
    def decode(caches, pos, cfg):
        batch, device, dtype = caches[0][0].shape[0], caches[0][0].device, caches[0][0].dtype
        p = torch.full((batch,), pos, device=device)
        return Attention(*rope(p, cfg.head_dim, cfg.rope_theta, dtype), caches=caches, pos=pos)


def _by_seq(x, seqs):
    """[tokens, heads, d] -> [seqs, heads, tokens / seqs, d]."""
    return x.view(seqs, x.shape[0] // seqs, x.shape[1], x.shape[2]).transpose(1, 2)


def attend(qkv, lo, cos, sin, seqs=1, cache=None, pos=0):
    """qkv [tokens, (heads + 2 kv) * head_dim] of this rank's heads -> [tokens, heads * head_dim]."""
    t, d = qkv.shape[0], lo.head_dim
    q, k, v = qkv.split([lo.heads * d, lo.kv_heads * d, lo.kv_heads * d], dim=-1)
    q = _rotate(q.view(t, lo.heads, d), cos, sin)
    k = _rotate(k.view(t, lo.kv_heads, d), cos, sin)
    v = v.view(t, lo.kv_heads, d)
    if cache is None:  # prefill: [seqs, heads, len, d], causal
        q, k, v = _by_seq(q, seqs), _by_seq(k, seqs), _by_seq(v, seqs)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return o.transpose(1, 2).reshape(t, lo.heads * d)
    ck, cv = cache
    ck[:, :, pos] = k
    cv[:, :, pos] = v
    o = F.scaled_dot_product_attention(q.unsqueeze(2), ck, cv, enable_gqa=True)
    return o.reshape(t, lo.heads * d)


def make_caches(cfg, batch, length, seed, device, dtype=None, lo=None):
    """Each layer's KV cache (k, v [batch, kv heads, length + 1, head_dim], random): the
    unsharded model's, or with lo one rank's shape (contents for timing only)."""
    dtype = dtype or torch.bfloat16
    g = torch.Generator(device=device).manual_seed(seed)
    kv = lo.kv_heads if lo else cfg.kv_heads
    return [tuple(torch.randn(batch, kv, length + 1, cfg.head_dim, device=device, dtype=dtype, generator=g)
                  for _ in range(2)) for _ in range(cfg.layers)]


def shard_caches(caches, cfg, tp, rank):
    first, count = kv_slice(cfg, tp, rank)
    return [(k[:, first:first + count].contiguous(), v[:, first:first + count].contiguous()) for k, v in caches]


def _mlp_act(gate_up):
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def layer_tp(w, normed, residual, next_gamma, lo, eps, comm, cos, sin, seqs, cache, pos):
    """One decoder layer, Megatron TP: normed / residual [tokens, hidden], replicated.
    Returns (normed by next_gamma, residual)."""
    qkv = F.linear(normed, w["qkv"], w["bqkv"])
    a = attend(qkv, lo, cos, sin, seqs, cache, pos)
    normed, residual = comm.linear_all_reduce_norm(a, w["o"], residual, w["ln2"], eps)
    return comm.linear_all_reduce_norm(_mlp_act(F.linear(normed, w["gate_up"])), w["down"], residual, next_gamma, eps)


def layer_sp(w, normed, residual, next_gamma, lo, eps, comm, cos, sin, seqs, cache, pos):
    """One decoder layer, sequence parallel: normed / residual [tokens / W, hidden], this
    rank's rows; attention sees every row (all-gathered)."""
    qkv = comm.all_gather_linear(normed, w["qkv"])
    if w["bqkv"] is not None:
        qkv = qkv + w["bqkv"]
    a = attend(qkv, lo, cos, sin, seqs, cache, pos)
    residual = residual + comm.linear_reduce_scatter(a, w["o"])
    normed = rms_norm(residual, w["ln2"], eps)
    residual = residual + comm.linear_reduce_scatter(_mlp_act(comm.all_gather_linear(normed, w["gate_up"])), w["down"])
    return rms_norm(residual, next_gamma, eps), residual


def forward(weights, lo, eps, comm, ids, attn, layer=None):
    """The final hidden states (after the model's last RMSNorm, HF's last_hidden_state):
    [tokens, hidden], or this rank's rows [tokens / W, hidden] for a sequence-parallel
    comm (comm.sp; comm.rank, comm.world). layer: a compiled layer_sp / layer_tp."""
    sp = getattr(comm, "sp", False)
    if sp:
        m = ids.shape[0] // comm.world
        ids = ids[comm.rank * m:(comm.rank + 1) * m]
    layer = layer or (layer_sp if sp else layer_tp)
    residual = F.embedding(ids, weights["embed"])
    layers = weights["layers"]
    normed = rms_norm(residual, layers[0]["ln1"], eps)
    for i, w in enumerate(layers):
        nxt = layers[i + 1]["ln1"] if i + 1 < len(layers) else weights["norm"]
        cache = attn.caches[i] if attn.caches is not None else None
        normed, residual = layer(w, normed, residual, nxt, lo, eps, comm, attn.cos, attn.sin, attn.seqs, cache,
                                 attn.pos)
    return normed


class Unsharded:
    """No communication: the unsharded model (TP 1) is forward(weights, local(cfg, 1), ..., Unsharded(), ...)."""
    sp = False

    @staticmethod
    def linear_all_reduce_norm(a, w, residual, gamma, eps):
        residual = F.linear(a, w) + residual
        return rms_norm(residual, gamma, eps), residual


def errors(got, want):
    """(max |got - want|, max |got - want| / max |want|), in fp32."""
    diff = (got.float() - want.float()).abs().max().item()
    return diff, diff / max(want.float().abs().max().item(), 1e-30)

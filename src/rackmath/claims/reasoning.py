"""The reasoning the lecture gives in words, next to its numbers (`rackmath lecture --explain`, docs/lecture.md).

Each entry is (heading, text). Numbers in the text are computed here from rackmath's own
functions, so the words and the formulas cannot drift apart.
"""

from __future__ import annotations
from ..analyses.lecture.batching import sheet_weights_share
from ..analyses.lecture.lifetime import derated_inference_tokens, overtrain
from ..analyses.lecture.pipeline import schedule_bubbles
from ..analyses.lecture.racks import rack_limits
from ..specs.hardware import load_chip


def _amortize() -> str:
    w = float(sheet_weights_share(6.0, 2.5))
    return (
        "Why batching amortizes only the weight fetch (00:05–00:12). A step's time has three terms (R3): the "
        "multiplies, B·2·N_active/FLOP/s; the weight fetch, N_total·bytes/BW; and the KV fetch, B·L·bytes per "
        "token/BW. Divide by B for the cost per token: the weight fetch becomes a hyperbola that batching drives "
        "towards zero, but the multiplies and the KV fetch stay flat, because every sequence brings its own. "
        "Dwarkesh: 'you're not able to amortize the KV values over a much bigger batch.' Reiner: 'They're unique per "
        "batch. The compute is also unique per batch. So what is the minimum work you can do per batch after "
        "amortizing everything else away?' (00:12). Two consequences rackmath computes. Slow mode: past B* the cost "
        "floor is the compute (or KV) line, so waiting longer buys little (`batching fast-mode` prints the slow-mode "
        "floor). Fast mode (R1): shrinking the batch only un-amortizes the weights, so the price of speed is set by "
        "the weights' share w of the step: (1 − w)/(1 − w·s) for a speed-up s of a memory-bound step, free where "
        "compute has headroom above B*. The lecture's 6× for 2.5× needs w = (6 − 1)/(6·2.5 − 1) = "
        f"{w:.0%}; with HBM full of KV w is ~5% and 2.5× costs ~1.1× (`analyses.lecture.batching.fast_mode`, one function "
        "for `lecture`, `batching fast-mode` and `price … -m`).")


def _twenty_ms() -> str:
    rows = ", ".join(f"{label} {load_chip(c).drain_time_s * 1e3:.0f} ms" for c, label in (
        ("h100", "H100"), ("h200", "H200"), ("b200", "B200"), ("gb200", "GB200"), ("rubin", "Rubin")))
    return (
        "Why a step is ~20 ms, and not much faster or slower (00:24–00:26). 'We want to use all of the memory "
        "capacity we have … to store the weights or the KVs. In the time of doing a forward pass, we want to read "
        "all of the memory capacity into the chip. That is capacity divided by bandwidth' — the drain time, "
        f"'20 milliseconds on many different generations of HBM' ({rows}; Rubin 288 GB / 20 TB/s ≈ 15 ms). Slower "
        "than that: 'in around 30 milliseconds, I can read all of HBM twice, but what's the point of that? I don't "
        "want to read the weight matrices twice. I don't want to read the KVs twice' — almost all HBM traffic is "
        "reads (R11), so a longer step only adds latency. Faster than that: the step cannot read all of memory, "
        "so part of HBM holds nothing the step uses — fewer sequences' KV and less batch to amortize the weights "
        "over, i.e. capacity paid for and idle. The step where capacity and bandwidth are both used is the drain "
        "time; rackmath derives it instead of typing it: with HBM full of KV the memory-bounded operating step is "
        "C/BW (R9, R10, R12, R28), and `racks pipeline` defaults its --t-step to the chip's drain time (R24).")


def _equal_costs() -> str:
    r = overtrain()
    o = r.optimum
    return (
        "Why over-train until inference costs about as much as pretraining (01:19–01:32). The trade-off: a model "
        "trained past Chinchilla is smaller for the same quality — more pretraining compute (6·N·D grows with D) "
        "bought to make every served token cheaper (2·N per token shrinks with N). One cost falls as the other "
        "rises, and 'for many curves, the minimum tends to be where the costs are equalized … where one is 1/x and "
        "the other one is x … they tend to be minimized at the point where they equal each other' (heuristic: "
        "'things that follow power laws tend to have this property'). So set pretraining (6·N·D_pre), RL "
        "((2–6)·N·D_RL/η) and inference (2·N·D_inf/η_dec) equal; N cancels and the data follow: D_pre ≈ 1.5·D_RL "
        "≈ D_inf (R31) — as Dwarkesh puts it, 'each model should generate the sum of human knowledge on the output "
        "that it gets on the input.' rackmath checks the heuristic against a scaling law (R30): at the same loss the "
        "equal-cost point "
        f"costs {o['cost_ratio']:.3f}× the true optimum, where serving is {o['serve_to_pretrain_at_opt']:.2f}× "
        "pretraining rather than 1× — the minimum is flat, so the heuristic is cheap to follow. Which way to err: "
        "a model may be retired early, so derate its inference tokens (below).")


def _hassle() -> str:
    return (
        "Why practitioners dislike pipelining (00:52–01:10). Dwarkesh cites Ilya Sutskever's talk ('today we know "
        "not to do pipeline parallelism') and Horace He, who told him that 'the problem with pipeline parallelism is "
        "that, other than the bubbles, it creates these architectural constraints' — Kimi's residuals 'where "
        "attention attends to layers a few back' become hard to implement; and Axel (a GPU performance engineer at "
        "Jane Street): pipelining needs micro-batches, which cannot amortize the weight loads over the whole batch. "
        "Reiner agrees: 'These complexities are real. Pipelining is a massive hassle, but it does give you some "
        "benefits.' What the hassle costs, in rackmath's reading, is research speed: every architectural idea that "
        "crosses a stage boundary "
        "(cross-layer residuals, interleaved local/global attention, below) has to be re-cut and re-balanced "
        "across racks before it can be tried. The benefit is small in inference — 'we're just moving the memory "
        "time from one chip to another … there's no actual benefit in runtime' — only weight capacity per rack, "
        "and a Blackwell rack already holds a trillion-parameter model (R24, R25). Hence DeepSeek's practice: EP "
        "up to the scale-up domain and 'very little pipelining. Maybe none at all, maybe two' (R27).")


def _bubbles() -> str:
    P, M = 4, 8
    b = schedule_bubbles(P, M, chunks=2)
    rows = "\n".join(f"    {k:<28} {v:6.1%}" for k, v in b.items())
    return (
        "Why training cannot overlap batches to hide the bubble (00:55). In inference the next batch can enter the "
        "first rack as soon as the previous one leaves it, so the pipeline never drains: pipelining is latency- and "
        "batch-neutral. In training every step ends with a weight update that needs the gradients of the whole "
        "batch, and the next step's forward pass needs the updated weights: there is a hard stop between steps, "
        "the pipeline drains and refills, and that idle wedge is the bubble. Overlapping step n+1 with step n would "
        "mean computing with stale weights (asynchronous pipelining, PipeDream-style), which changes the optimizer.\n\n"
        "The schedules (P stages, M micro-batches per step, v model chunks per stage; T_F = T_B = T_W):\n"
        "    GPipe             f = (P − 1)/(M + P − 1)      all M micro-batches' activations held\n"
        "    1F1B              f = (P − 1)/(M + P − 1)      same bubble, at most P micro-batches held\n"
        "    interleaved 1F1B  f = (P − 1)/(v·M + P − 1)    v× smaller bubble, v× more sends\n"
        "    zero bubble ZB-H1 f = (P − 1)(T_F + T_B − T_W)/(M(T_F + T_B + T_W) + (P − 1)(T_F + T_B − T_W))\n"
        "                      = (P − 1)/(3M + P − 1)       backward split into input-grad B and weight-grad W;\n"
        "                                                   W fills the bubble (\"you can do the weight gradient step\")\n"
        "    zero bubble ZB-H2 f ≈ 0                        ≈2× the activation memory, optimizer checks post hoc\n"
        f"At P = {P}, M = {M}:\n{rows}\n"
        "(analyses.lecture.pipeline.bubble_fraction, zero_bubble_fraction; Huang et al. 2019; Narayanan et al. 2021; "
        "Qi et al. 2024, arXiv 2401.10241.)")


def _gemma_imbalance(n_layers=62, every=6, window=1024, context=131072, stages=4):
    """Per-stage KV read when sliding-window and global layers interleave (5 local : 1 global, Gemma 3 style)."""
    kinds = ["global" if (i + 1) % every == 0 else "local" for i in range(n_layers)]
    per = [context if k == "global" else min(context, window) for k in kinds]
    bounds = [round(s * n_layers / stages) for s in range(stages + 1)]
    loads = [sum(per[bounds[s]:bounds[s + 1]]) for s in range(stages)]
    globals_ = [kinds[bounds[s]:bounds[s + 1]].count("global") for s in range(stages)]
    mean = sum(loads) / stages
    return loads, globals_, max(loads) / mean


def _not_wise() -> str:
    loads, g, imb = _gemma_imbalance()
    return (
        "Why 'pipelining is not wise' for some architectures (01:03). Pipelining's only inference benefit is weight "
        "memory per rack (R24): it moves memory time from one rack to another without saving any, and it cannot "
        "shard the KV cache, because P stages need P micro-batches in flight and the P cancels. Its costs are "
        "architectural. (1) Cross-layer residuals: when a layer reads the outputs of layers a few back (Kimi's "
        "attention over earlier layers' residuals, Reiner's RevNet 'residual from two layers back'), every stage "
        "boundary inside such a span must ship those extra activations across the slow scale-out link, and the "
        "cut points stop being free. (2) Load imbalance: a pipeline runs at the pace of its slowest stage. When "
        "sliding-window and global-attention layers interleave (Gemma: 5 local layers with a 1,024-token window "
        "to 1 global), a global layer reads the whole context's KV while a local one reads at most the window. "
        f"62 layers cut into 4 equal stages at 128K context hold {g} global layers; their KV reads are "
        f"{', '.join(f'{x / 1e3:.0f}K' for x in loads)} token-layers, so the slowest stage is {imb:.2f}× the mean "
        "and the others idle that share of every step — equal-layer cuts are wrong, and the right cuts move with "
        "the context length. (3) Training adds the bubble above. The lecture's conclusion: EP up to the scale-up "
        "domain, and little or no pipelining (R27).")


def _racks() -> str:
    a, b = rack_limits("gb200-nvl72"), rack_limits("rubin-ultra-nvl576")
    return (
        "Why racks are the size they are (00:35–00:40). Reiner names the limits: power delivery and cooling, weight "
        "('you need enough metal to not sag … then it's heavier'), and cable density — plus the switch. Cables: "
        "to double the GPUs in a rack 'I need to run literally twice the density of cables'; there is 'connector "
        "density going from the tray into the rack and the rack's backplane', and 'the bend radius of cables. You "
        "don't want to snap them'. Switches: a hierarchy of switches instead of one big switch exists 'to manage "
        "the cabling congestion'. Growth: Hopper 8 → Blackwell 72 'is mostly just the decision to switch from "
        "trays as the form factor to … racks as the form factor. That's a product decision'; Blackwell → Rubin's "
        "'500 and something' is 'a bit of Jensen math … but at least a genuine 4×, … a much more complicated and "
        "difficult rack design … to run more cables' (R20). A small "
        "model turns each into the most accelerators one rack could hold: power n·P_limit/P_rack, weight "
        "n·W_limit/W_rack, copper reach n·reach/longest run (beyond passive-copper reach the links need optics), "
        "and switch radix (a one-tier crossbar holds at most ports ÷ links per GPU per switch).\n"
        f"  {a.summary}\n  {b.summary}\n"
        "NVL72 sits at its NVLink switch's radix with power close behind (120 of ~132 kW). NVL576 is 144 "
        "four-die packages: 576 counts dies where NVL72's 72 counts two-die packages (8×: the 'Jensen math'); like "
        "for like it is 4× Blackwell's 144 dies (the 'genuine 4×') and 2× its 72 packages. The doubling of "
        "packages came from a new rack (Kyber: 600 kW on 800 V DC, a PCB midplane instead of copper cables — "
        "the cable-density limit removed), so there power binds. Figures are approximate public numbers "
        "(analyses/lecture/data/rack_limits.toml, with sources).")


def _derate() -> str:
    r = overtrain()
    rows = []
    for p in (0.0, 0.25, 0.5):
        d = float(derated_inference_tokens(r.D_inf, p))
        rows.append(f"    p = {p:.0%}: D_inf → {d / 1e12:.0f}T tokens, over-training {r.overtrain * (1 - p):.0f}× "
                    "Chinchilla")
    return (
        "Derating inference tokens for the risk of early retirement (01:27). The equal-cost rule sizes pretraining "
        "to the inference the model will serve. But 'you run the risk that you make a model that is not a frontier "
        "model and then you just throw it away': with probability p it serves (almost) nothing, so the expected "
        "inference tokens are (1 − p)·D_inf and pretraining (∝ D_inf under equal costs) and the over-training "
        "factor shrink by the same (1 − p):\n" + "\n".join(rows) + "\n"
        "(analyses.lecture.lifetime.derated_inference_tokens.) Imperfect forecasts argue the same way: err towards less "
        "over-training.")


def _crypto() -> str:
    return (
        "Neural nets and ciphers (02:04). Both must mix information across all inputs; they want opposite things "
        "from the mixing. A cipher wants the avalanche property: flip one input bit and about half the output "
        "bits flip, so no small input difference yields a small output difference — differential cryptanalysis is "
        "the attack that differentiates a cipher (over GF(2)) looking for differences that survive. A neural net "
        "wants the opposite: residual connections and LayerNorm keep the derivative simple so gradient descent "
        "works; an adversarial example (a tiny image change that flips the class) is exactly the avalanche "
        "property, the common case in ciphers and the failure case in nets. Ciphers scramble structure into "
        "apparent randomness; nets extract structure from apparent randomness (mixing vs preserving information). "
        "The construction that crossed over is the Feistel round: (x, y) → (y + f(x), x) is invertible for any f "
        "(recover x, then y = z − f(x)), which is why cipher rounds use it; RevNets (Gomez et al. 2017) make every "
        "layer such a round (a residual from two layers back), so the backward pass recomputes activations "
        "instead of storing them: compute spent to save memory, the opposite of the KV cache, which spends memory "
        "to save compute — 'generally profitable given where hardware is' (R43).")


def _sections():
    return [
        ("Why batching amortizes only the weight fetch (fast and slow mode)", _amortize()),
        ("Why a step is ~20 ms, not much faster or slower", _twenty_ms()),
        ("Why over-train until inference costs about as much as pretraining", _equal_costs()),
        ("Why practitioners dislike pipelining", _hassle()),
        ("Training cannot hide the bubble; pipeline schedules and their bubbles", _bubbles()),
        ("Why pipelining is not wise for some architectures", _not_wise()),
        ("Why racks are the size they are", _racks()),
        ("Derating inference tokens for early retirement", _derate()),
        ("The cryptography analogy behind reversible networks", _crypto()),
    ]


def __getattr__(name):
    if name == "REASONING":
        return _sections()
    raise AttributeError(name)

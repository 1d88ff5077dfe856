"""Chapter 4 (lecture 01:18:59): the lifetime compute split and over-training (R30–R34), plus R14 (~00:30),
the routed-model scaling law reading that the lecture uses to motivate sparsity.
"""

from __future__ import annotations

from . import ABOUT, Claim, agree, qualitative, within_factor
from ..analyses.lecture import lifetime, scaling
from ..explain import Derivation, fmt


def claims() -> list[Claim]:
    r = lifetime.overtrain()  # lecture defaults: 500M tok/s, 2 months, 10 models, 100B active, equal split
    inputs = {"traffic_tok_s": r.rate, "lifetime_s": r.lifetime_s, "models": r.n_models, "active": r.active,
              "k_rl": r.k_rl, "eta_rl": r.eta_rl, "eta_dec": r.eta_dec}
    opt = r.optimum
    out = [
        Claim("R30", "Equal pretrain/RL/inference cost is near the cost minimum",
              opt["cost_ratio"], "× optimum cost", "≈ optimal (heuristic)",
              qualitative(opt["cost_ratio"] < 1.1, "within 10% of the optimum cost"), inputs,
              f"At the heuristic model's loss {opt['loss']:.3f} (Chinchilla law), the cost-optimal model has "
              f"N = {fmt(opt['N_opt'])}, D = {fmt(opt['D_opt'])}; the equal-cost point (N = {fmt(r.active)}, "
              f"D = {fmt(r.D_pre)}) costs {opt['cost_ratio']:.3f}× the optimum. At the optimum serving/pretraining "
              f"cost = α·X/(β·Y) − 1 = {opt['serve_to_pretrain_at_opt']:.2f}, not 1. The trade-off: over-training "
              "buys a smaller model (cheaper per served token) with more pretraining; one cost falls as the other "
              "rises, and such sums are near their minimum where the terms are equal (01:20).",
              derivation=r.derivation),
        Claim("R31", "Equal costs ⇒ D_pre ≈ 1.5·D_RL ≈ D_inf", r.D_pre / r.D_rl, "D_pre/D_RL", 1.5,
              within_factor(r.D_pre / r.D_rl, 1.5, ABOUT, "'let's say something like 1.5'"), inputs,
              f"D_pre/D_RL = k_RL/(6·η_RL) = {r.k_rl:g}/(6·{r.eta_rl:g}); D_pre/D_inf = 1/(3·η_dec) = "
              f"{r.D_pre / r.D_inf:.2f} (lecture ≈ 1). With k_RL from 2 to 6 at η = 0.3, D_pre/D_RL spans 1.1–3.3."),
        Claim("R32", "500M tok/s × 2 months of traffic", r.D_inf_fleet, "tokens", 2.6e15,
              agree(r.D_inf_fleet, 2.6e15), inputs, "2 months = 60.9 days"),
        Claim("R32-b", "÷ 10 models: 50M tok/s per model over 2 months", r.D_inf, "tokens", 200e12,
              within_factor(r.D_inf, 200e12, ABOUT, "'around two hundred trillion'"), inputs,
              f"The arithmetic gives {fmt(r.D_inf)} tokens (50M × 5.26e6 s); the lecture rounds it to 'around two "
              "hundred trillion'."),
        Claim("R33", "Rumoured frontier pretraining ≈ 150T tokens, 'similar' to the estimate", r.D_pre, "tokens",
              150e12, within_factor(r.D_pre, 150e12, ABOUT, "'similar'"), inputs,
              "rackmath's equal-cost D_pre vs the rumour (not well-cited)",
              reason=(f"Equal costs give D_pre = D_inf/(3·η_dec) = {fmt(r.D_pre)}: the 1/(3·0.3) = 1.1 factor on top "
                      "of 263T (the unrounded 50M tok/s × 2 months) puts it at ~2× the rumoured 150T; the lecture "
                      "compared the rumour with its rounded 200T.")),
        Claim("R34", "100B active: Chinchilla 2T tokens ⇒ ~100× over-trained", r.overtrain, "×", 100,
              within_factor(r.overtrain, 100, ABOUT, "'a factor of a hundred', from rounded inputs"), inputs,
              f"D_Chinchilla = 20·N = {fmt(r.D_chinchilla)} (the lecture's rule, not the fitted law); D_pre/D_Ch = "
              f"{r.overtrain:.0f}× (D_inf/D_Ch = {r.overtrain_inf:.0f}×, the lecture's reading)."),
    ]
    d = Derivation("R14: Clark et al. 2022 effective parameter count (coefficients UNVERIFIED)")
    law = scaling.routed_law("s-base")
    nbar = d.add("N̄", "10^((λ(N,E) − d − b·ê₁)/(a + c·ê₁))", f"S-BASE, N = 370M, E = 64, E_start = {law.e_start}, "
                 f"E_max = {law.e_max}", float(scaling.effective_params(370e6, 64, law)), "params",
                 scaling.UNVERIFIED_NOTE)
    nbar_ns = d.add("N̄ (no saturation)", "same with Ê = E", "", float(scaling.effective_params(370e6, 64, law,
                                                                                                saturate=False)),
                    "params", "published.md sanity check: ≈1.8B")
    out.append(Claim("R14", "64 experts at 370M active ≈ 1.3B dense (Clark et al. 2022)", nbar, "params", 1.3e9,
                     within_factor(nbar, 1.3e9, ABOUT, "read off a figure"),
                     {"active": 370e6, "experts": 64, "method": "s-base"},
                     f"{scaling.UNVERIFIED_NOTE}. Saturating Ê: {fmt(nbar)}; without saturation: {fmt(nbar_ns)}.",
                     derivation=d))
    return out

"""The lifetime compute split: pretraining, RL and inference (lecture 01:18:59, claims R30–R34).

Costs are counted in *pretraining-equivalent FLOPs*: FLOPs divided by the efficiency
(MFU) of each phase relative to pretraining, so that equal cost means equal chip-time.

    C_pre = 6 · N · D_pre
    C_RL  = k_RL · N · D_RL / η_RL       k_RL ∈ [2, 6]: 2 = generate only, 6 = train on every rollout
    C_inf = 2 · N · D_inf / η_dec        η_dec: decode MFU relative to pretraining (lecture: "maybe 30%")

The lecture's heuristic (R30): the sum of a falling and a rising cost is near its
minimum where the two are equal; so make the three costs equal. Past the heuristic
(:func:`lifetime_optimum`): for a target loss, choose N and D_pre on the Chinchilla
iso-loss curve to minimise C_pre + C_inf (+ C_RL for a fixed RL token count), and see how
far the equal-cost point lands from it.

First-order condition (derived here; Lagrange multiplier on L(N, D) = L*): with
X = A/N^α and Y = B/D^β the two loss terms and C = 6·N·D + K·N,
K = 2·D_inf/η_dec + k_RL·D_RL/η_RL,

    (6D + K)/(6N) = (α X / N) / (β Y / D)   ⇒   C_inf+RL / C_pre = α·X/(β·Y) − 1.

So equal cost is optimal exactly when α·X = 2·β·Y; otherwise the optimum leans towards
whichever side the loss law makes cheaper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError, check_positive
from ...explain import Derivation, fmt
from .scaling import (LossLaw, chinchilla_loss, chinchilla_tokens, iso_loss_params, loss_law,
                      min_params_for_loss, overtraining_factor)

# lecture defaults (01:18:59)
DEFAULT_K_RL = 3.0  # "somewhere in the range of two to six"
DEFAULT_ETA_RL = 0.3  # RL is mostly decode: "maybe in the range of 30%"
DEFAULT_ETA_DEC = 0.3
TWO_MONTHS_S = 2 * 30.4375 * 86400.0


def pretrain_cost(N, D_pre):
    """C_pre = 6 · N · D_pre (lecture 01:18:59, "the famous 6ND formula")."""
    return 6.0 * np.asarray(N, float) * np.asarray(D_pre, float)


def rl_cost(N, D_rl, k_rl=DEFAULT_K_RL, eta_rl=DEFAULT_ETA_RL):
    """C_RL = k_RL · N · D_RL / η_RL, k_RL ∈ [2, 6] (lecture 01:18:59: "somewhere in the range of two to six")."""
    return np.asarray(k_rl, float) * np.asarray(N, float) * np.asarray(D_rl, float) / np.asarray(eta_rl, float)


def inference_cost(N, D_inf, eta_dec=DEFAULT_ETA_DEC):
    """C_inf = 2 · N · D_inf / η_dec (lecture 01:18:59: "inference is just 2", at decode's lower MFU)."""
    return 2.0 * np.asarray(N, float) * np.asarray(D_inf, float) / np.asarray(eta_dec, float)


def inference_tokens(rate, lifetime_s, n_models=1):
    """D_inf = traffic rate · deployment lifetime / number of models sharing the traffic (lecture ~01:28, R32)."""
    return np.asarray(rate, float) * np.asarray(lifetime_s, float) / np.asarray(n_models, float)


def derated_inference_tokens(D_inf, p_retired_early):
    """Expected inference tokens when the model may be retired early: D_inf · (1 − p)  (lecture 01:27: "you run
    the risk that you make a model that is not a frontier model and then you just throw it away … you should derate
    the inference tokens by some amount").

    A model discarded at launch serves nothing, so the equal-cost pretraining budget (∝ D_inf)
    and the over-training factor shrink by the same (1 − p).
    """
    p = np.asarray(p_retired_early, dtype=float)
    return np.asarray(D_inf, dtype=float) * (1.0 - p)


def split_tokens(D_inf, split=(1 / 3, 1 / 3, 1 / 3), k_rl=DEFAULT_K_RL, eta_rl=DEFAULT_ETA_RL,
                 eta_dec=DEFAULT_ETA_DEC):
    """Token counts that give the cost shares ``split`` = (f_pre, f_RL, f_inf), Σf = 1 (N cancels):

      C_tot = C_inf / f_inf,  D_pre = f_pre·C_tot/(6N),  D_RL = f_RL·C_tot·η_RL/(k_RL·N)
      ⇒ D_pre = (f_pre/f_inf) · D_inf/(3·η_dec),   D_RL = (f_RL/f_inf) · 2·η_RL·D_inf/(k_RL·η_dec).
    Equal split: D_pre/D_inf = 1/(3η_dec), D_pre/D_RL = k_RL/(6·η_RL) (lecture R31: ≈ 1 and ≈ 1.5).
    Returns (D_pre, D_RL).
    """
    f_pre, f_rl, f_inf = (float(x) for x in split)
    if min(f_pre, f_rl, f_inf) < 0 or f_inf <= 0 or abs(f_pre + f_rl + f_inf - 1.0) > 1e-6:
        raise InputError("split", f"{split!r} is not a cost split", "three non-negative shares pre,RL,inf summing to "
                         "1 with inference > 0, e.g. '1/3,1/3,1/3' or '0.5,0,0.5'")
    D_inf = np.asarray(D_inf, float)
    D_pre = (f_pre / f_inf) * D_inf * 2.0 / (6.0 * np.asarray(eta_dec, float))
    D_rl = (f_rl / f_inf) * D_inf * 2.0 * np.asarray(eta_rl, float) / (np.asarray(k_rl, float) * eta_dec)
    return D_pre, D_rl


# --------------------------------------------------------------------------------------
# past the heuristic: the cost-optimal (N, D_pre) for a target loss
# --------------------------------------------------------------------------------------


def lifetime_cost(N, D_pre, K):
    """C(N, D_pre) = 6·N·D_pre + K·N, K = 2·D_inf/η_dec + k_RL·D_RL/η_RL (per-parameter serving cost)."""
    return pretrain_cost(N, D_pre) + np.asarray(K, float) * np.asarray(N, float)


def serving_coefficient(D_inf, eta_dec=DEFAULT_ETA_DEC, D_rl=0.0, k_rl=DEFAULT_K_RL, eta_rl=DEFAULT_ETA_RL):
    """K = 2·D_inf/η_dec + k_RL·D_RL/η_RL: lifetime cost per parameter that does not depend on D_pre."""
    return 2.0 * np.asarray(D_inf, float) / eta_dec + np.asarray(k_rl, float) * np.asarray(D_rl, float) / eta_rl


def lifetime_optimum(L_target, K, law: LossLaw | str = "chinchilla", iters: int = 200):
    """Cost-optimal (N, D_pre) on the iso-loss curve L(N, D) = L*: minimise 6·N·D + K·N.

    Solves the first-order condition (module docstring) in Y = B/D^β ∈ (0, L* − E):
      h(Y) = α·(G − Y)/(β·Y) − 1 − K/(6·D(Y)) = 0,  G = L* − E,  D(Y) = (B/Y)^(1/β),
    h falls monotonically from +∞ to < 0, so bisection (in log Y, vectorized) finds the
    unique root. Returns (N, D_pre).
    """
    law = loss_law(law)
    G = np.asarray(L_target, float) - law.E
    if np.any(G <= 0):
        raise InputError("loss", f"target loss at or below the irreducible E = {law.E}", f"a loss > {law.E}")
    K = np.asarray(K, float)
    G, K = np.broadcast_arrays(G, K)
    lo = np.log(G) - 80.0
    hi = np.log(G)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        Y = np.exp(mid)
        D = (law.B / Y) ** (1.0 / law.beta)
        h = law.alpha * (G - Y) / (law.beta * Y) - 1.0 - K / (6.0 * D)
        lo = np.where(h > 0, mid, lo)
        hi = np.where(h > 0, hi, mid)
    Y = np.exp(0.5 * (lo + hi))
    D = (law.B / Y) ** (1.0 / law.beta)
    N = (law.A / (G - Y)) ** (1.0 / law.alpha)
    return N, D


def equal_cost_point(L_target, K, law: LossLaw | str = "chinchilla"):
    """The heuristic's point on the iso-loss curve: C_pre = C_serve ⇒ 6·N·D = K·N ⇒ D = K/6, N = N(D; L*).

    Returns (N, D_pre); N = inf where L* is unreachable with D = K/6 tokens.
    """
    D = np.asarray(K, float) / 6.0
    return iso_loss_params(D, L_target, law), D


@dataclass
class OvertrainResult:
    rate: float
    lifetime_s: float
    n_models: int
    active: float
    k_rl: float
    eta_rl: float
    eta_dec: float
    split: tuple
    D_inf_fleet: float
    D_inf: float
    D_pre: float
    D_rl: float
    D_chinchilla: float
    overtrain: float
    overtrain_inf: float  # D_inf / D_Chinchilla (the lecture's reading: D_pre ≈ D_inf)
    costs: dict
    optimum: dict
    law: str
    derivation: Derivation

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "derivation"}
        d["derivation"] = self.derivation.as_dict()
        return d


def overtrain(rate=500e6, lifetime_s=TWO_MONTHS_S, n_models=10, active=100e9, split=(1 / 3, 1 / 3, 1 / 3),
              k_rl=DEFAULT_K_RL, eta_rl=DEFAULT_ETA_RL, eta_dec=DEFAULT_ETA_DEC,
              tokens_per_param=20.0, law: LossLaw | str = "chinchilla") -> OvertrainResult:
    """The lecture's chain (R30–R34) and the cost-optimal comparison, as one derivation."""
    check_positive(rate, "traffic", "a token rate in tokens/s, e.g. '500M'")
    check_positive(lifetime_s, "lifetime", "a duration, e.g. '2 months'")
    check_positive(n_models, "models", "a positive number of models sharing the traffic")
    check_positive(active, "active", "active parameters, e.g. '100B'")
    check_positive(k_rl, "k-rl", "FLOPs per parameter per RL token, 2…6", maximum=6.0)
    check_positive(eta_rl, "eta-rl", "RL efficiency relative to pretraining, in (0, 1]", maximum=1.0)
    check_positive(eta_dec, "eta-dec", "decode efficiency relative to pretraining, in (0, 1]", maximum=1.0)
    law = loss_law(law)
    d = Derivation("Lifetime split: pretraining, RL and inference (lecture 01:18:59)")
    fleet = d.add("D_fleet", "rate · lifetime", f"{fmt(rate)} tok/s · {fmt(lifetime_s, 's')}",
                  float(inference_tokens(rate, lifetime_s, 1)), "tok", "all models")
    D_inf = d.add("D_inf", "D_fleet / n_models", f"{fmt(fleet)} / {n_models:g}",
                  float(inference_tokens(rate, lifetime_s, n_models)), "tok", f"{fmt(rate / n_models)} tok/s per model")
    D_pre, D_rl = (float(x) for x in split_tokens(D_inf, split, k_rl, eta_rl, eta_dec))
    f_pre, f_rl, f_inf = split
    d.add("D_pre", "(f_pre/f_inf) · 2·D_inf / (6·η_dec)", f"({f_pre:.3g}/{f_inf:.3g}) · 2·{fmt(D_inf)} / (6·{eta_dec:g})",
          D_pre, "tok", "C_pre = f_pre/f_inf · C_inf")
    d.add("D_RL", "(f_RL/f_inf) · 2·η_RL·D_inf / (k_RL·η_dec)",
          f"({f_rl:.3g}/{f_inf:.3g}) · 2·{eta_rl:g}·{fmt(D_inf)} / ({k_rl:g}·{eta_dec:g})", D_rl, "tok")
    D_ch = d.add("D_Chinchilla", f"{tokens_per_param:g} · N_active", f"{tokens_per_param:g} · {fmt(active)}",
                 float(chinchilla_tokens(active, tokens_per_param)), "tok")
    ot = d.add("over-training", "D_pre / D_Chinchilla", f"{fmt(D_pre)} / {fmt(D_ch)}",
               float(overtraining_factor(D_pre, active, tokens_per_param)), "×")
    ot_inf = float(D_inf / D_ch)
    costs = {"pretrain": float(pretrain_cost(active, D_pre)), "rl": float(rl_cost(active, D_rl, k_rl, eta_rl)),
             "inference": float(inference_cost(active, D_inf, eta_dec))}

    # past the heuristic: same loss, minimum lifetime cost (RL tokens held fixed)
    L_star = d.add("L*", "E + A/N^α + B/D_pre^β", f"{law.name}: N = {fmt(active)}, D = {fmt(D_pre)}",
                   float(chinchilla_loss(active, D_pre, law)), "", "target loss = the heuristic model's loss")
    K = float(serving_coefficient(D_inf, eta_dec, D_rl, k_rl, eta_rl))
    N_opt, D_opt = (float(x) for x in lifetime_optimum(L_star, K, law))
    N_eq, D_eq = float(active), D_pre  # the heuristic's own point (on the iso-loss curve by construction)
    c_opt = float(lifetime_cost(N_opt, D_opt, K))
    c_eq = float(lifetime_cost(N_eq, D_eq, K))
    d.add("N_opt, D_opt", "argmin 6·N·D + K·N on L(N, D) = L*", f"K = {fmt(K)}",
          N_opt, "params", f"D_opt = {fmt(D_opt)} tokens")
    ratio = d.add("C_heuristic / C_opt", "(6·N_eq·D_eq + K·N_eq) / (6·N_opt·D_opt + K·N_opt)",
                  f"{fmt(c_eq)} / {fmt(c_opt)}", c_eq / c_opt, "×")
    X = law.A / N_opt ** law.alpha
    Y = law.B / D_opt ** law.beta
    optimum = {"loss": L_star, "K": K, "N_opt": N_opt, "D_opt": D_opt, "cost_opt": c_opt,
               "N_heuristic": N_eq, "D_heuristic": D_eq, "cost_heuristic": c_eq, "cost_ratio": ratio,
               "N_ratio": N_eq / N_opt, "D_ratio": D_eq / D_opt,
               "serve_to_pretrain_at_opt": float(K / (6.0 * D_opt)),
               "alphaX_over_betaY": float(law.alpha * X / (law.beta * Y)),
               "overtrain_opt": float(overtraining_factor(D_opt, N_opt, tokens_per_param)),
               "N_min": float(min_params_for_loss(L_star, law))}
    d.conclusion = (f"{fmt(D_pre)} pretraining tokens for {fmt(active)} active = {ot:.0f}× Chinchilla; "
                    f"cost-optimal at the same loss: N = {fmt(N_opt)}, D = {fmt(D_opt)} "
                    f"(heuristic costs {ratio:.3f}× the optimum)")
    return OvertrainResult(rate=float(rate), lifetime_s=float(lifetime_s), n_models=n_models, active=float(active),
                           k_rl=k_rl, eta_rl=eta_rl, eta_dec=eta_dec, split=tuple(split), D_inf_fleet=fleet,
                           D_inf=D_inf, D_pre=D_pre, D_rl=D_rl, D_chinchilla=D_ch, overtrain=ot,
                           overtrain_inf=ot_inf, costs=costs, optimum=optimum, law=law.name, derivation=d)

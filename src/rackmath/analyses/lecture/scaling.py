"""Scaling laws: Chinchilla's L(N, D) and Clark et al.'s routed-model law (lecture ~00:30 R14, 01:18:59 R34).

The coefficients live in the two data tables below (``LOSS_LAWS``, ``ROUTED_LAWS``),
each with its source and a status tag in the convention of
``docs/reference/published.md``: [V] read in the primary source, [S] read in a
third-party reproduction, [M] not found in any stored source (unverified). The status
travels with every result so that interfaces can show it.

Chinchilla (Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models",
arXiv 2203.15556, §3.3 "Approach 3: fitting a parametric loss function"):

    L(N, D) = E + A / N^α + B / D^β

Clark et al. 2022, "Unified Scaling Laws for Routed Language Models" (arXiv 2202.01169),
§4 (routed form, logs base 10 here):

    log L(N, E) = a·log N + b·log Ê + c·log N·log Ê + d
    1/Ê = 1/(E − 1 + (1/E_start − 1/E_max)^−1) + 1/E_max       (saturating expert count)

The paper is not available on the machines this was written on: its coefficients are
shipped **unverified** ([M]) and every output says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError, UnknownNameError, check_positive

# --------------------------------------------------------------------------------------
# data: coefficient tables (kept here, not in TOML: they are few and carry prose status)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LossLaw:
    """L(N, D) = E + A/N^alpha + B/D^beta."""

    name: str
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    status: str  # "[V]", "[S]", "[M]"
    source: str

    @property
    def verified(self) -> bool:
        return self.status in ("[V]", "[S]")


@dataclass(frozen=True)
class RoutedLaw:
    """log10 L(N, E) = a log10 N + b log10 Ê + c log10 N log10 Ê + d."""

    name: str
    a: float
    b: float
    c: float
    d: float
    e_start: float | None  # None: no saturation (Ê = E)
    e_max: float | None
    status: str
    source: str
    saturation_status: str
    saturation_source: str

    @property
    def verified(self) -> bool:
        return self.status in ("[V]", "[S]")


LOSS_LAWS: dict[str, LossLaw] = {
    "chinchilla": LossLaw(
        "chinchilla", E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28, status="[S]",
        source="Hoffmann et al. 2022 (arXiv 2203.15556) §3.3, Approach 3 (parametric fit); values as reproduced "
               "in docs/reference/published.md §6 [S] (the equation/table number was not checked here)"),
    "besiroglu": LossLaw(
        "besiroglu", E=1.82, A=482.0, B=2085.0, alpha=0.348, beta=0.366, status="[M]",
        source="Besiroglu et al. 2024, 'Chinchilla Scaling: A Replication Attempt' (arXiv 2404.10102) refit; "
               "published.md §6 marks these [M] (from memory): UNVERIFIED"),
}

_CLARK = ("Clark et al. 2022 (arXiv 2202.01169), routed-LM scaling-law fit; coefficients from "
          "docs/reference/published.md §6, status [M] 'not found in any stored source', said there to be "
          "Table 2 of the paper: UNVERIFIED (the paper is not available here)")
_SAT_SBASE = ("E_start, E_max recalled by rackmath's author from Clark et al. 2022 (S-BASE fit); not in "
              "published.md, not checked against the paper: UNVERIFIED. Override with --e-start/--e-max")
_SAT_NONE = "no E_start/E_max available for this method here: Ê = E (no saturation) unless given"

ROUTED_LAWS: dict[str, RoutedLaw] = {
    "s-base": RoutedLaw("s-base", a=-0.082, b=-0.108, c=0.009, d=1.104, e_start=1.847, e_max=314.478,
                        status="[M]", source=_CLARK, saturation_status="[M]", saturation_source=_SAT_SBASE),
    "rl-r": RoutedLaw("rl-r", a=-0.083, b=-0.126, c=0.012, d=1.111, e_start=None, e_max=None,
                      status="[M]", source=_CLARK, saturation_status="—", saturation_source=_SAT_NONE),
    "hash": RoutedLaw("hash", a=-0.087, b=-0.136, c=0.012, d=1.102, e_start=None, e_max=None,
                      status="[M]", source=_CLARK, saturation_status="—", saturation_source=_SAT_NONE),
}

UNVERIFIED_NOTE = ("UNVERIFIED: Clark et al. 2022 coefficients are [M] in published.md (not checked against the "
                   "paper); treat the routed-law numbers as illustrative")

CHINCHILLA_TOKENS_PER_PARAM = 20.0  # lecture 01:18:59 (R34); Hoffmann et al. 2022 Table 3 rule of thumb


def loss_law(name: str = "chinchilla") -> LossLaw:
    if isinstance(name, LossLaw):
        return name
    key = str(name).strip().lower()
    if key not in LOSS_LAWS:
        raise UnknownNameError("loss law", name, LOSS_LAWS)
    return LOSS_LAWS[key]


def routed_law(name: str = "s-base") -> RoutedLaw:
    if isinstance(name, RoutedLaw):
        return name
    key = str(name).strip().lower().replace("_", "-").replace("sbase", "s-base").replace("rlr", "rl-r")
    if key not in ROUTED_LAWS:
        raise UnknownNameError("routing method", name, ROUTED_LAWS)
    return ROUTED_LAWS[key]


# --------------------------------------------------------------------------------------
# Chinchilla
# --------------------------------------------------------------------------------------


def chinchilla_loss(N, D, law: LossLaw | str = "chinchilla"):
    """L(N, D) = E + A/N^α + B/D^β  (Hoffmann et al. 2022 §3.3, Approach 3)."""
    law = loss_law(law)
    N = np.asarray(N, float)
    D = np.asarray(D, float)
    return law.E + law.A / N**law.alpha + law.B / D**law.beta


def compute_optimal(C, law: LossLaw | str = "chinchilla"):
    """Compute-optimal N and D for a budget C = 6·N·D (Hoffmann et al. 2022 §3.3, eq. 4 closed form):

      N_opt = G · (C/6)^a,   D_opt = G⁻¹ · (C/6)^b,
      G = (α·A / (β·B))^(1/(α+β)),   a = β/(α+β),   b = α/(α+β).
    Returns (N_opt, D_opt).
    """
    law = loss_law(law)
    C = np.asarray(C, float)
    s = law.alpha + law.beta
    G = (law.alpha * law.A / (law.beta * law.B)) ** (1.0 / s)
    N = G * (C / 6.0) ** (law.beta / s)
    D = (C / 6.0) ** (law.alpha / s) / G
    return N, D


def chinchilla_tokens(N, tokens_per_param=CHINCHILLA_TOKENS_PER_PARAM):
    """D_Chinchilla ≈ 20 · N (lecture 01:18:59, R34: "multiply by 20 to get the Chinchilla token count")."""
    return tokens_per_param * np.asarray(N, float)


def overtraining_factor(D, N, tokens_per_param=CHINCHILLA_TOKENS_PER_PARAM):
    """Over-training factor = D / D_Chinchilla = D / (20 · N)  (lecture 01:18:59, R34)."""
    return np.asarray(D, float) / chinchilla_tokens(N, tokens_per_param)


def min_params_for_loss(L, law: LossLaw | str = "chinchilla"):
    """Smallest N that can reach loss L with infinite data: A/N^α = L − E  ⇒  N_min = (A/(L − E))^(1/α)."""
    law = loss_law(law)
    gap = np.asarray(L, float) - law.E
    return np.where(gap > 0, (law.A / np.where(gap > 0, gap, np.nan)) ** (1.0 / law.alpha), np.inf)


def iso_loss_tokens(N, L, law: LossLaw | str = "chinchilla"):
    """Tokens D that bring a model of N parameters to loss L: B/D^β = L − E − A/N^α  ⇒

      D(N; L) = (B / (L − E − A/N^α))^(1/β);  +inf where N ≤ N_min (L unreachable).
    """
    law = loss_law(law)
    rest = np.asarray(L, float) - law.E - law.A / np.asarray(N, float) ** law.alpha
    safe = np.where(rest > 0, rest, np.nan)
    return np.where(rest > 0, (law.B / safe) ** (1.0 / law.beta), np.inf)


def iso_loss_params(D, L, law: LossLaw | str = "chinchilla"):
    """Parameters N that reach loss L with D tokens: N(D; L) = (A / (L − E − B/D^β))^(1/α); +inf if unreachable."""
    law = loss_law(law)
    rest = np.asarray(L, float) - law.E - law.B / np.asarray(D, float) ** law.beta
    safe = np.where(rest > 0, rest, np.nan)
    return np.where(rest > 0, (law.A / safe) ** (1.0 / law.alpha), np.inf)


# --------------------------------------------------------------------------------------
# routed models (Clark et al. 2022)
# --------------------------------------------------------------------------------------


def saturated_experts(E, e_start=None, e_max=None):
    """Saturating expert count (Clark et al. 2022, §4):

      1/Ê = 1/(E − 1 + (1/E_start − 1/E_max)^−1) + 1/E_max

    Ê(1) = E_start, Ê → E_max as E → ∞. With E_start = 1 and E_max = ∞ (``None``), Ê = E.
    """
    E = np.asarray(E, float)
    if e_start is None and e_max is None:
        return E
    e_start = 1.0 if e_start is None else float(e_start)
    inv_max = 0.0 if e_max is None else 1.0 / float(e_max)
    return 1.0 / (1.0 / (E - 1.0 + 1.0 / (1.0 / e_start - inv_max)) + inv_max)


def routed_log10_loss(N, E, law: RoutedLaw | str = "s-base", saturate: bool = True, e_start=None, e_max=None):
    """log10 L(N, E) = a·log10 N + b·log10 Ê + c·log10 N·log10 Ê + d  (Clark et al. 2022, §4; coefficients [M]).

    N is the dense (active) parameter count, E the number of experts (E = 1: dense).
    ``saturate=False`` uses Ê = E; ``e_start``/``e_max`` override the table.
    """
    law = routed_law(law)
    ehat = _ehat(E, law, saturate, e_start, e_max)
    ln = np.log10(np.asarray(N, float))
    le = np.log10(ehat)
    return law.a * ln + law.b * le + law.c * ln * le + law.d


def routed_loss(N, E, law: RoutedLaw | str = "s-base", saturate: bool = True, e_start=None, e_max=None):
    """L(N, E) = 10^(log10 L) of :func:`routed_log10_loss`."""
    return 10.0 ** routed_log10_loss(N, E, law, saturate, e_start, e_max)


def _ehat(E, law: RoutedLaw, saturate: bool, e_start, e_max):
    if not saturate:
        return np.asarray(E, float)
    es = law.e_start if e_start is None else e_start
    em = law.e_max if e_max is None else e_max
    return saturated_experts(E, es, em)


def effective_params(N, E, law: RoutedLaw | str = "s-base", saturate: bool = True, e_start=None, e_max=None):
    """Effective parameter count N̄: the dense model with the same loss, L(N̄, 1) = L(N, E) (Clark et al. 2022 §5).

    With λ(N, E) = log10 L(N, E) and ê₁ = log10 Ê(1) (0 without saturation):
      a·log N̄ + b·ê₁ + c·log N̄·ê₁ + d = λ(N, E)
      ⇒ log10 N̄ = (λ(N, E) − d − b·ê₁) / (a + c·ê₁).
    The dense reference goes through the same Ê transform as the routed model, so the law
    is compared with itself.
    """
    law = routed_law(law)
    check_positive(N, "active params", "a positive parameter count")
    E = np.asarray(E, float)
    if np.any(E < 1):
        raise InputError("experts", "expert count below 1", "E ≥ 1 (1 = dense)")
    lam = routed_log10_loss(N, E, law, saturate, e_start, e_max)
    e1 = np.log10(_ehat(1.0, law, saturate, e_start, e_max))
    return 10.0 ** ((lam - law.d - law.b * e1) / (law.a + law.c * e1))

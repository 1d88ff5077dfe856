"""From traffic and SLOs to the cheapest deployment on each chip (``rackmath plan``, ``rackmath compare``).

The question: serve a model to ``U`` users (or ``λ`` requests/s) of ISL/OSL tokens with first
tokens under ``TTFT`` and ``TPOT`` (or ``tok/s/user``) — how many GPUs of which chip, laid out
how, and what does it cost? The search is analytic and vectorized (every replica layout × every
concurrency per replica in one step-model call per chip, via :mod:`.step_table`); the winners are
then replayed by the discrete-event simulator for their tail latencies.

Aggregated (continuous batching with chunked prefill), per replica of g GPUs at n sequences:

* prompts arrive m = n·A/OSL per step (each finished sequence is replaced); a step that carries
  prefill carries c = min(max(m, 1)·ISL, budget − n) prompt tokens beside the n decoding sequences,
  a share f = min(1, m·ISL/c) of steps do: t = (1 − f)·t_step(n, L̄, 0) + f·t_step(n, L̄, c),
  L̄ = ISL + OSL/2 (prefill rides on the decode's weight fetch, lecture 01:40; the stalls it puts
  into the token stream are in TPOT)
* TPOT = t / A;  TTFT = t/2 (waiting for the next step) + ceil(ISL / (budget − n)) chunk steps
* end-to-end E = TTFT + (OSL − 1)·TPOT; a replica completes n / E requests/s (Little's law)
* rate mode: replicas R = ceil(λ·E / n); users mode: R = ceil(U / n)
* the scheduler's max running sequences is n / ρ (ρ = 0.85 headroom) and must fit memory; with
  attention-DP over T GPUs a replica has T schedulers, each with max n/(ρT) sequences and its own budget

Disaggregated: a decode pool as above with P̄ = 0; a prefill pool of replicas running passes of
``budget`` tokens, R_P = ceil(λ·ISL / (ρ_P·X_P)); TTFT = M/D/1 wait ρ_P·t_pass / (2(1 − ρ_P))
+ one prompt's prefill + KV hand-off. The pools are sized independently, the cheapest of each
meeting its SLO; the P:D ratio is the ratio of their GPUs.

Cost: $/hour = GPUs × $/GPU-hour; $/Mtok = $/hour / (3600 · output tokens/s) · 10⁶ at the
offered load. SLO margin = (SLO − predicted) / SLO (positive: met with room).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...results import ResultMixin

from ...engine.roofline import usd_per_mtok
from ...errors import InputError
from .step_table import layout_label  # noqa: F401 (re-exported: plan.layout_label)
from . import step_table as stt
from .choose import make_plan
from .evaluate import evaluate
from .inputs import Layout, load_stack, Workload
from .schedule import disaggregated_ttft, held_context
from .simulate import framework_defaults, simulate
from ..lecture import energy as en
from ... import units
from ...bounds import check_float
from ...engine.search import pareto_front
from ...specs.catalog import latest
from ...specs.hardware import load_hardware, priced

#: Default chips of ``plan`` and ``compare`` (the issue's set).
DEFAULT_CHIPS = ("h100", "h200", "b200", "mi355x")
#: Operating share of the scheduler's max running sequences (headroom for arrival fluctuations).
RHO = 0.85
#: Concurrency per replica searched.
CONCURRENCY_GRID = np.unique(np.round(np.geomspace(1, 4096, 40)))
#: TTFT objective when none is given (issue 35): MLPerf Inference's Llama 2 70B Server scenario, TTFT ≤ 2 s
#: (published.md M2). Without one the cheapest deployment may queue prompts for seconds to save a GPU; ``plan``
#: states it in its output (``slo['ttft_default']``) and ``--ttft`` replaces it.
DEFAULT_TTFT_S = 2.0
#: Prefill pool loads searched (M/D/1 waiting grows as ρ/(1 − ρ)).
PREFILL_RHO = np.array([0.3, 0.5, 0.7, 0.85])


def parse_prices(text) -> dict:
    """'h100=2.1,b200=4' → {'h100': 2.1, 'b200': 4.0}; a bare number applies to every chip ({'*': x})."""
    if text is None:
        return {}
    if isinstance(text, dict):
        return {str(k).lower(): float(v) for k, v in text.items()}
    if isinstance(text, (int, float)):
        return {"*": float(text)}
    out = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            k = k.strip().lower()
            if not k:
                raise InputError("usd_per_gpu_hour", f"{part!r} has no chip name", "CHIP=PRICE, e.g. h100=2.1")
            out[k] = units.parse_usd_per_hour(v, "usd_per_gpu_hour")
        else:
            out["*"] = units.parse_usd_per_hour(part, "usd_per_gpu_hour")
    for v in out.values():
        if v > 1e4:
            raise InputError("usd_per_gpu_hour", f"{v:g}", "a price in $ per GPU-hour up to 10⁴")
    return out


def _price_for(prices: dict, chip: str, system: str):
    for k in (chip.lower(), system.lower()):
        if k in prices:
            return prices[k]
    return prices.get("*")


def _workload(isl, osl):
    for name, v in (("isl", isl), ("osl", osl)):
        if not (1 <= float(v) <= 1e7):
            raise InputError(name, f"{v!r}", "a number of tokens from 1 to 10⁷")
    return float(isl), float(osl)


def aggregated_points(st, lays, isl, osl, budget, n=CONCURRENCY_GRID, rho=RHO) -> dict:
    """Every (replica layout × concurrency) of an aggregated deployment, analytically (arrays [layout, n])."""
    n = np.asarray(n, dtype=float)[None, :]
    lay = {k: v[:, None] for k, v in lays.items()}
    ss = stt.steady_state(st, lay, n, isl, osl, budget)
    tpot, ttft, x = ss["tpot_s"], ss["ttft_s"], ss["out_tok_s"]
    mx = np.ceil(n / rho)
    fit = stt.decode_grid(st, lay, mx, held_context(st.serving_stack, isl, osl))
    ok = fit["fits"] & (mx <= fit["max_batch"] + 1e-9)
    e2e = ttft + (osl - 1.0) * tpot
    return dict(tpot=tpot, ttft=ttft, e2e=e2e, n=np.broadcast_to(n, tpot.shape), max_batch=np.broadcast_to(mx, tpot.shape),
                ok=ok & ~ss["prefill_bound"], gpus=np.broadcast_to(lay["gpus"], tpot.shape), out_tok_s=x)


def _decode_points(st, lays, isl, osl, n=CONCURRENCY_GRID, rho=RHO) -> dict:
    A = st.acceptance
    L = isl + osl / 2.0
    n = np.asarray(n, dtype=float)[None, :]
    lay = {k: v[:, None] for k, v in lays.items()}
    g = stt.decode_grid(st, lay, n, L)
    mx = np.ceil(n / rho)
    fit = stt.decode_grid(st, lay, mx, held_context(st.serving_stack, isl, osl))
    tpot = g["step_s"] / A
    return dict(tpot=tpot, ok=fit["fits"] & (mx <= fit["max_batch"] + 1e-9), n=np.broadcast_to(n, tpot.shape),
                max_batch=np.broadcast_to(mx, tpot.shape), gpus=np.broadcast_to(lay["gpus"], tpot.shape))


def _prefill_points(st, lays, isl, budget) -> dict:
    budget = budget * stt.attention_ranks(lays)  # one scheduler, with its own budget, per attention-DP group
    t_pass = stt.prefill_grid(st, lays, budget, isl)
    t_one = stt.prefill_grid(st, lays, isl, isl)
    fit = stt.decode_grid(st, lays, 1.0, isl)["fits"]
    xfer = stt.kv_transfer_s(st, np.full(len(lays["tp"]), isl), lays["tp"])
    return dict(t_pass=np.asarray(t_pass), t_one=np.asarray(t_one), ok=np.asarray(fit), xfer=np.asarray(xfer),
                tok_s=budget / np.asarray(t_pass))


def _best_for_chip(st, lays, *, isl, osl, rate, users, ttft_slo, tpot_slo, budget, modes):
    """The cheapest aggregated and disaggregated deployments of one chip meeting the SLOs (or None each), priced;
    and the aggregated points (None when that mode is not searched)."""
    out = {}
    pts = None
    if "aggregated" in modes:
        pts = aggregated_points(st, lays, isl, osl, budget)
        agg = _best_aggregated(lays, pts, rate=rate, users=users, ttft_slo=ttft_slo, tpot_slo=tpot_slo,
                               budget=budget, price=st.usd_per_gpu_hour)
        if agg is not None:
            out["aggregated"] = agg
    if "disaggregated" in modes:
        dis = _best_disaggregated(st, lays, isl=isl, osl=osl, rate=rate, users=users, ttft_slo=ttft_slo,
                                  tpot_slo=tpot_slo, budget=budget)
        if dis is not None:
            out["disaggregated"] = dis
    for d in out.values():
        _price_deployment(d, st.usd_per_gpu_hour, osl, users, ttft_slo, tpot_slo)
    return out, pts


def _best_aggregated(lays, pts, *, rate, users, ttft_slo, tpot_slo, budget, price):
    """The cheapest (layout, concurrency) of ``pts`` meeting the SLOs, replicas R = ceil(λ·E/n) (rate) or ceil(U/n)
    (users); None when none does."""
    n = pts["n"]
    if rate is not None:
        R = np.ceil(rate * pts["e2e"] / n)
        lam = np.full_like(R, rate)
    else:
        R = np.ceil(users / n)
        lam = users / pts["e2e"]
    gp = R * pts["gpus"]
    ok = pts["ok"] & np.isfinite(pts["tpot"])
    if tpot_slo is not None:
        ok &= pts["tpot"] <= tpot_slo
    if ttft_slo is not None:
        ok &= pts["ttft"] <= ttft_slo
    if users is not None:
        ok &= n <= users * 1.0 + 1e-9
    cost = np.where(ok, gp * price + 1e-6 * pts["tpot"], np.inf)
    if not np.isfinite(cost).any():
        return None
    i, j = np.unravel_index(int(np.argmin(cost)), cost.shape)
    lay = stt.layout_row(lays, i)
    ranks = stt.attention_ranks(lay)  # schedulers: one per attention-DP group
    return dict(
        mode="aggregated", gpus=int(gp[i, j]), replicas=int(R[i, j]), gpus_per_replica=int(pts["gpus"][i, j]),
        layout=dict(lay, label=layout_label(lay)), concurrency_per_replica=float(n[i, j]),
        planned_concurrency_per_replica=float(n[i, j]),
        max_batch=int(math.ceil(pts["max_batch"][i, j] / ranks)), schedulers=int(ranks),
        budget=int(budget), tpot_s=float(pts["tpot"][i, j]),
        ttft_s=float(pts["ttft"][i, j]), request_rate=float(lam[i, j]))


def _best_disaggregated(st, lays, *, isl, osl, rate, users, ttft_slo, tpot_slo, budget):
    """The cheapest decode pool meeting the TPOT objective, then the cheapest prefill pool (layout × load) meeting
    the TTFT one (``serve.disaggregated_ttft``); None when either has no candidate."""
    price = st.usd_per_gpu_hour
    dp = _decode_points(st, lays, isl, osl)
    pf = _prefill_points(st, lays, isl, budget)
    n = dp["n"]
    e2e_d = (osl - 1.0) * dp["tpot"]
    ok = dp["ok"] & np.isfinite(dp["tpot"])
    if tpot_slo is not None:
        ok &= dp["tpot"] <= tpot_slo
    if rate is not None:
        Rd = np.ceil(rate * np.maximum(e2e_d, 1e-12) / n)
    else:
        Rd = np.ceil(users / n)
        ok &= n <= users
    cost_d = np.where(ok, Rd * dp["gpus"] * price + 1e-6 * dp["tpot"], np.inf)
    if not np.isfinite(cost_d).any():
        return None
    i, j = np.unravel_index(int(np.argmin(cost_d)), cost_d.shape)
    tpot_d = float(dp["tpot"][i, j])
    # prefill pool: loads × layouts
    rho = PREFILL_RHO[None, :]
    ttft = disaggregated_ttft(pf["t_one"][:, None], pf["xfer"][:, None], pf["t_pass"][:, None], rho, st.t_request)
    lam = rate if rate is not None else users / (float(np.median(ttft)) + e2e_d[i, j])
    Rp = np.ceil(lam * isl / (rho * pf["tok_s"][:, None]))
    okp = pf["ok"][:, None] & np.isfinite(ttft)
    if ttft_slo is not None:
        okp &= ttft <= ttft_slo
    cost_p = np.where(okp, Rp * lays["gpus"][:, None] * price + 1e-6 * ttft, np.inf)
    if not np.isfinite(cost_p).any():
        return None
    a, c = np.unravel_index(int(np.argmin(cost_p)), cost_p.shape)
    if users is not None:
        lam = users / (float(ttft[a, c]) + e2e_d[i, j])
        Rp_ac = int(np.ceil(lam * isl / (PREFILL_RHO[c] * pf["tok_s"][a])))
    else:
        Rp_ac = int(Rp[a, c])
    lay_d, lay_p = stt.layout_row(lays, i), stt.layout_row(lays, a)
    ranks_d = stt.attention_ranks(lay_d)
    g_d = int(Rd[i, j] * dp["gpus"][i, j])
    g_p = int(Rp_ac * lays["gpus"][a])
    return dict(
        mode="disaggregated", gpus=g_d + g_p, prefill_gpus=g_p, decode_gpus=g_d,
        replicas=int(Rd[i, j]), prefill_replicas=Rp_ac, gpus_per_replica=int(dp["gpus"][i, j]),
        layout=dict(lay_d, label=layout_label(lay_d)), prefill_layout=dict(lay_p, label=layout_label(lay_p)),
        concurrency_per_replica=float(n[i, j]), max_batch=int(math.ceil(dp["max_batch"][i, j] / ranks_d)),
        schedulers=int(ranks_d), budget=int(budget),
        tpot_s=tpot_d, ttft_s=float(ttft[a, c]), request_rate=float(lam),
        prefill_load=float(PREFILL_RHO[c]), kv_transfer_s=float(pf["xfer"][a]),
        pd_ratio=f"{g_p}:{g_d}")


def _price_deployment(d: dict, price, osl, users, ttft_slo, tpot_slo) -> None:
    """Add to a deployment its sequences in flight at the offered load, $/hour, output tokens/s, $/Mtok
    (``engine.roofline.usd_per_mtok``), tok/s/user and the SLO margins (SLO − predicted) / SLO."""
    # sequences actually in flight per replica at the offered load (the grid point is the planned ceiling)
    load = (users if users is not None else d["request_rate"] * (d["ttft_s"] * (d["mode"] == "aggregated")
                                                                 + (osl - 1.0) * d["tpot_s"]))
    d["concurrency_per_replica"] = float(min(d["concurrency_per_replica"], load / d["replicas"]))
    d["usd_per_hour"] = d["gpus"] * price
    tok_s = d["request_rate"] * osl
    d["output_tok_s"] = tok_s
    d["usd_per_mtok"] = float(usd_per_mtok(d["gpus"], price, max(tok_s, 1e-300)))
    d["tokens_per_s_per_user"] = 1.0 / d["tpot_s"]
    d["margin"] = dict(ttft=None if ttft_slo is None else (ttft_slo - d["ttft_s"]) / ttft_slo,
                       tpot=None if tpot_slo is None else (tpot_slo - d["tpot_s"]) / tpot_slo)


def pareto_points(st, pts, isl, osl) -> dict:
    """Steady-state $/Mtok vs tok/s/user of every fitting (layout, concurrency), and its Pareto front."""
    ok = pts["ok"] & np.isfinite(pts["tpot"])
    speed = (1.0 / pts["tpot"])[ok]
    usd = usd_per_mtok(pts["gpus"], st.usd_per_gpu_hour, pts["out_tok_s"])[ok]
    if speed.size == 0:
        return dict(tok_s_user=[], usd_per_mtok=[], front=[])
    front = pareto_front(usd, speed)
    return dict(tok_s_user=speed.tolist(), usd_per_mtok=usd.tolist(), front=np.asarray(front).tolist())


@dataclass(repr=False)
class PlanResult(ResultMixin):
    """Per chip: the cheapest deployment meeting the SLOs (aggregated and disaggregated), ranked by cost.
    ``to_frame()``: one row per chip of the ranking."""

    _SUMMARY = ()
    _ROW = "chip"

    def _frame_dict(self) -> dict:
        keys = [k for r in self.rows for k, v in r.items()
                if isinstance(v, (int, float, str, bool)) or v is None]
        keys = list(dict.fromkeys(keys))
        return {"model": self.model} | {k: [r.get(k) for r in self.rows] for k in keys}

    model: str
    workload: dict
    slo: dict
    rows: list  # one per chip, cheapest first
    pareto: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    derivations: dict = field(default_factory=dict, repr=False)  # chip → Derivation (plan(..., explain=True))

    def as_dict(self) -> dict:
        return dict(model=self.model, workload=self.workload, slo=self.slo, ranking=self.rows,
                    pareto=self.pareto, notes=self.notes)

    @property
    def best(self):
        return next((r for r in self.rows if r.get("deployment")), None)


def _slos(ttft, tpot, tok_s_user):
    if tpot is not None and tok_s_user is not None:
        raise InputError("tpot", "both --tpot and --tok-s-user given", "one of them (tok/s/user = 1 / TPOT)")
    if tok_s_user is not None:
        check_float(tok_s_user, "tok_s_user", 0.0, 1e5, allow_zero=False,
                    accepted="tokens per second per user, above 0 and up to 10⁵")
        tpot = 1.0 / float(tok_s_user)

    for name, v in (("ttft", ttft), ("tpot", tpot)):  # bounds.check_float: the CLI's bounds (1e-320 refused)
        if v is not None:
            check_float(v, name, 0.0, 1e5, allow_zero=False, accepted="a positive time in seconds, up to 10⁵")
    return (None if ttft is None else float(ttft)), (None if tpot is None else float(tpot))


def _chips(hardware):
    if hardware is None:
        return list(DEFAULT_CHIPS)
    if isinstance(hardware, str):
        hardware = [h.strip() for h in hardware.split(",") if h.strip()]
    if not hardware:
        raise InputError("hardware", "no chip given", "a comma list such as h100,h200,b200,mi355x")
    if len(hardware) > 64:
        raise InputError("hardware", f"{len(hardware)} chips", "at most 64")
    return list({(h if isinstance(h, str) else h.name): h for h in hardware}.values())


def all_chips() -> list:
    """Every chip of the catalog that is not marked announced-only (for ``--all``)."""
    out = []
    for e in latest("chip"):
        if e.data.get("status", "") in ("announced",) or e.data.get("announced"):
            continue
        out.append(str(e.data["name"]))
    return out


def plan(model, hardware=None, *, rate=None, users=None, isl, osl, ttft=None, tpot=None, tok_s_user=None,
         usd_per_gpu_hour=None, weights_dtype=None, kv_dtype=None, mtp=0, acceptance=None, efficiency=None,
         ideal=False, framework=None, modes=("aggregated", "disaggregated"), budget=None, confirm=True,
         confirm_requests=2000, max_gpus_per_replica=None, seed=0, pue=None, usd_per_kwh=None,
         power_cap_w=None, compute_dtype=None, explain=False, recv_interval=None) -> PlanResult:
    """The cheapest deployment of ``model`` per chip meeting the SLOs (module docstring).

    One keyword per option of `rackmath plan` (the public API, ``rackmath.plan``; the CLI and the web app pass them
    by name). ``rate`` (requests/s) or ``users`` (concurrent users, each with one request in flight);
    ``ttft``/``tpot`` in seconds (``tok_s_user`` = 1/TPOT); ``usd_per_gpu_hour``: a number or
    ``{'h100': 2.1, ...}`` / 'h100=2.1,b200=4'. ``confirm`` replays each winner in :func:`simulate`
    (a scaled copy of up to 4 replicas at the same per-replica load) and reports its tails.
    Energy (analyses.lecture.energy, docs/energy.md): each deployment gets ``energy`` (J per output token over all its
    GPUs, tokens/kWh, electricity $/Mtok and share) at ``pue`` and ``usd_per_kwh``; ``power_cap_w`` caps every
    GPU's board power, scaling its compute peaks (the capped chip is what the step model sees).
    """
    if (rate is None) == (users is None):
        raise InputError("rate", "give exactly one of --rate and --users", "--rate R (requests/s) or --users U")
    if rate is not None and not (0 < float(rate) <= 1e7):
        raise InputError("rate", f"{rate!r}", "requests per second, above 0 and up to 10⁷")
    if users is not None and not (1 <= float(users) <= 1e8):
        raise InputError("users", f"{users!r}", "a number of concurrent users from 1 to 10⁸")
    isl, osl = _workload(isl, osl)
    ttft_s, tpot_s = _slos(ttft, tpot, tok_s_user)
    ttft_default = ttft_s is None  # issue 35: a stated default objective, never an unbounded TTFT
    if ttft_default:
        ttft_s = DEFAULT_TTFT_S
    prices = parse_prices(usd_per_gpu_hour)
    fw = framework_defaults(framework)
    T = int(budget or fw["budget"])
    modes = tuple(modes)
    for m in modes:
        if m not in ("aggregated", "disaggregated"):
            raise InputError("mode", f"{m!r}", "aggregated, disaggregated or both")
    q = dict(isl=isl, osl=osl, rate=None if rate is None else float(rate), users=None if users is None else
             float(users), ttft_slo=ttft_s, tpot_slo=tpot_s, budget=T, modes=modes)
    stack_kw = dict(weights_dtype=weights_dtype, kv_dtype=kv_dtype, mtp=mtp, acceptance=acceptance,
                    efficiency=efficiency, ideal=ideal, framework=framework, compute_dtype=compute_dtype,
                    recv_interval=recv_interval)
    energy_kw = dict(power_cap_w=power_cap_w, pue=pue, usd_per_kwh=usd_per_kwh)
    rows, pareto, derivations, st = [], {}, {}, None
    for hw in _chips(hardware):
        st, row, front, deriv = _plan_chip(model, hw, stack_kw, q, prices=prices, energy_kw=energy_kw,
                                           max_gpus_per_replica=max_gpus_per_replica,
                                           n_confirm=confirm_requests if confirm else 0, seed=seed,
                                           explain=explain, ttft_default=ttft_default)
        pareto[st.chip] = front
        if deriv is not None:
            derivations[st.chip] = deriv
        rows.append(row)
    rows.sort(key=lambda r: (r["deployment"] is None, r["deployment"]["usd_per_hour"] if r["deployment"] else 0))
    wl = dict(isl=isl, osl=osl, rate=None if rate is None else float(rate), users=None if users is None else
              float(users), budget=T, framework=fw["name"], weights_dtype=weights_dtype, kv_dtype=kv_dtype,
              mtp=int(mtp or 0), recv_interval=int(st.serving_stack.recv_interval))
    return PlanResult(model=str(getattr(st.model, "name", model)), workload=wl,
                      slo=dict(ttft_s=ttft_s, tpot_s=tpot_s, ttft_default=ttft_default), rows=rows, pareto=pareto,
                      notes=[], derivations=derivations)


def _plan_chip(model, hw, stack_kw: dict, q: dict, *, prices, energy_kw, max_gpus_per_replica, n_confirm, seed,
               explain, ttft_default):
    """One chip of :func:`plan`: its stack (``step_table.stack`` with ``stack_kw``), the cheapest deployments
    (:func:`_best_for_chip` with the query ``q``), their energy (``energy_kw``: power_cap_w, pue, usd_per_kwh), the
    winner replayed in the simulator (``n_confirm`` requests; 0: not), its Pareto front and (``explain``) the
    aggregated derivation. Returns (stack, ranking row, front, derivation or None)."""
    power_cap_w, pue, usd_per_kwh = energy_kw["power_cap_w"], energy_kw["pue"], energy_kw["usd_per_kwh"]
    system = en.capped_system(load_hardware(hw), power_cap_w)
    price = _price_for(prices, system.chip.name, system.name)
    st = stt.stack(model, system, usd_per_gpu_hour=price, **stack_kw)
    lays = stt.replica_layouts(st, max_gpus_per_replica)
    best, pts = _best_for_chip(st, lays, **q)
    if pts is None:
        pts = aggregated_points(st, lays, q["isl"], q["osl"], q["budget"])
    front = pareto_points(st, pts, q["isl"], q["osl"])
    row = dict(chip=st.chip, hardware=system.name, usd_per_gpu_hour=st.usd_per_gpu_hour, efficiency=st.efficiency,
               header=st.label, candidates=int(pts["ok"].sum()), options=best)
    for d in best.values():  # None where a user catalog gives no board power
        d["energy"] = None if system.chip.tdp_w is None else en.energy(
            system.chip, chips=d["gpus"], step_s=1.0, tokens_per_step=d["output_tok_s"], usd_per_mtok=d["usd_per_mtok"],
            power_cap_w=power_cap_w, pue=en.DEFAULT_PUE if pue is None else float(pue),
            usd_per_kwh=en.DEFAULT_USD_PER_KWH if usd_per_kwh is None else float(usd_per_kwh)).as_dict()
    if best:
        # cheapest; at equal $/hour the aggregated one (no KV hand-off to set up, and its prompts do not queue
        # for a separate pool), then the lower TPOT (issue 35)
        win = min(best.values(), key=lambda d: (d["usd_per_hour"], d["mode"] != "aggregated", d["tpot_s"]))
        row["deployment"] = win
        if n_confirm:
            win["simulated"] = _confirm(st, win, q, n_confirm, seed, stack_kw)
    else:
        row["deployment"] = None
        row["why"] = "no deployment meets the SLOs" + (f" (TTFT ≤ {DEFAULT_TTFT_S:g} s is the default objective: "
                     "set --ttft)" if ttft_default else "") + " or the model does not fit a replica of up to " \
                     f"{int(lays['gpus'].max())} GPUs"
    deriv = None
    if explain and "aggregated" in best:
        deriv = explain_aggregated(st, best["aggregated"], q["isl"], q["osl"])
    return st, row, front, deriv


def explain_aggregated(st, d: dict, isl, osl):
    """The derivation of an aggregated deployment as planned: ``serve --explain`` of one replica at the concurrency
    the plan priced (same model, chip, dtypes, stack, budget and preset), i.e. the same ``serve.steady_state`` —
    its TTFT and TPOT are the deployment's (tests/test_explain.py)."""
    from dataclasses import replace

    lay = d["layout"]
    stack = load_stack(st.framework)
    stack = replace(stack, max_num_tokens=stack.max_num_tokens if d["budget"] is None else int(d["budget"]),
                    weights_dtype=st.weights_dtype, kv_dtype=st.kv_dtype, compute_dtype=st.compute_dtype,
                    recv_interval=st.serving_stack.recv_interval)
    p = make_plan(st.model, priced(st.system, st.usd_per_gpu_hour),
                  Workload(isl, osl, d["planned_concurrency_per_replica"], mtp=st.mtp, acceptance=st.acceptance),
                  Layout(d["gpus_per_replica"], lay["tp"], lay["ep"], lay["pp"], lay["attention_dp"],
                         attention_dp_size=lay.get("attention_dp_size") or None), stack, st.eff_serving)
    return evaluate(p, st.eff_serving).explain()


def _confirm(st, d, q: dict, n_req, seed, stack_kw: dict) -> dict:
    """Replay a planned deployment in the simulator (a copy of ≤ 4 replicas at the same per-replica load): ``q`` the
    plan's query (isl, osl, users, the SLOs), ``stack_kw`` its stack options (dtypes, MTP, efficiency, framework)."""
    users = q["users"]
    f = min(1.0, 4.0 / d["replicas"])
    kw = dict(isl=q["isl"], osl=q["osl"], max_batch=d["max_batch"], budget=d["budget"], ttft_slo=q["ttft_slo"],
              tpot_slo=q["tpot_slo"], seed=seed, usd_per_gpu_hour=st.usd_per_gpu_hour, **stack_kw)
    lay = d["layout"]
    kw.update(tp=lay["tp"], ep=lay["ep"], pp=lay["pp"], attention_dp=lay["attention_dp"],
              attention_dp_size=lay.get("attention_dp_size") or None)
    if d["mode"] == "disaggregated":
        rd = max(1, round(d["replicas"] * f))
        rp = max(1, math.ceil(d["prefill_replicas"] * f))
        f_eff = rd / d["replicas"]
        pl = d["prefill_layout"]
        kw.update(prefill_gpus=rp * pl["tp"] * pl["pp"], decode_gpus=rd * d["gpus_per_replica"],
                  prefill_layout={k: pl[k] for k in ("tp", "ep", "pp", "attention_dp", "attention_dp_size")})
        r = simulate(st.model, st.system, rate=d["request_rate"] * f_eff, requests=n_req, **kw)
    else:
        R = max(1, round(d["replicas"] * f))
        kw.update(gpus=R * d["gpus_per_replica"])
        if users is not None:
            c = max(1, int(round(d["concurrency_per_replica"] * R * min(1.0, float(users) / (d["concurrency_per_replica"] * d["replicas"])))))
            r = simulate(st.model, st.system, concurrency=c, requests=max(n_req, 5 * c), **kw)
        else:
            r = simulate(st.model, st.system, rate=d["request_rate"] * R / d["replicas"], requests=n_req, **kw)
    s = r.summary
    return dict(requests=s["counted"], replicas_simulated=r.config["replicas"], ttft_p50_s=s["ttft_s"]["p50"],
                ttft_p90_s=s["ttft_s"]["p90"], ttft_p99_s=s["ttft_s"]["p99"], tpot_p50_s=s["tpot_s"]["p50"],
                tpot_p90_s=s["tpot_s"]["p90"], tpot_p99_s=s["tpot_s"]["p99"], slo_attainment=s["slo_attainment"],
                utilization=s["utilization"])


def compare(model, hardware=None, *, tok_s_user=None, isl=1000, osl=1000, usd_per_gpu_hour=None, weights_dtype=None,
            kv_dtype=None, mtp=0, acceptance=None, efficiency=None, ideal=False, framework=None, budget=None,
            max_gpus_per_replica=None, compute_dtype=None) -> dict:
    """$/Mtok and tok/s/user side by side per chip at a target interactivity (steady state, aggregated).

    One keyword per option of `rackmath compare` (the public API; the CLI and the web app pass them by name).

    For each chip: every fitting replica layout × concurrency (the serving model's steady state,
    as ``serve``); the cheapest $/Mtok among those at ≥ ``tok_s_user`` (default: each chip's
    fastest point counts, i.e. the whole Pareto front is returned for the plot).
    """
    isl, osl = _workload(isl, osl)
    if tok_s_user is not None and not (0 < float(tok_s_user) <= 1e5):
        raise InputError("tok_s_user", f"{tok_s_user!r}", "tokens per second per user, above 0")
    prices = parse_prices(usd_per_gpu_hour)
    T = int(budget or framework_defaults(framework)["budget"])
    rows, fronts = [], {}
    for hw in _chips(hardware):
        system = load_hardware(hw)
        st = stt.stack(model, system, weights_dtype=weights_dtype, kv_dtype=kv_dtype, mtp=mtp, acceptance=acceptance,
                       efficiency=efficiency, ideal=ideal, usd_per_gpu_hour=_price_for(prices, system.chip.name,
                                                                                        system.name),
                       framework=framework, compute_dtype=compute_dtype)
        lays = stt.replica_layouts(st, max_gpus_per_replica)
        pts = aggregated_points(st, lays, isl, osl, T)
        ok = pts["ok"] & np.isfinite(pts["tpot"])
        speed = 1.0 / pts["tpot"]
        usd = usd_per_mtok(pts["gpus"], st.usd_per_gpu_hour, pts["out_tok_s"])
        par = pareto_points(st, pts, isl, osl)
        fronts[st.chip] = par
        row = dict(chip=st.chip, hardware=system.name, usd_per_gpu_hour=st.usd_per_gpu_hour, efficiency=st.efficiency,
                   header=st.label, max_tok_s_user=float(speed[ok].max()) if ok.any() else None)
        sel = ok & (speed >= (float(tok_s_user) if tok_s_user is not None else 0.0))
        if sel.any():
            cost = np.where(sel, usd, np.inf)
            i, j = np.unravel_index(int(np.argmin(cost)), cost.shape)
            lay = stt.layout_row(lays, i)
            row.update(usd_per_mtok=float(usd[i, j]), tok_s_user=float(speed[i, j]),
                       output_tok_s_per_gpu=float(pts["out_tok_s"][i, j] / pts["gpus"][i, j]),
                       layout=layout_label(lay), gpus_per_replica=int(pts["gpus"][i, j]),
                       concurrency_per_replica=float(pts["n"][i, j]), ttft_s=float(pts["ttft"][i, j]))
        else:
            row.update(usd_per_mtok=None, tok_s_user=None,
                       why="no layout reaches this interactivity" if ok.any() else "the model does not fit")
        rows.append(row)
    rows.sort(key=lambda r: (r["usd_per_mtok"] is None, r["usd_per_mtok"] or 0))
    return dict(model=str(st.model.name), isl=isl, osl=osl, tok_s_user=None if tok_s_user is None else float(tok_s_user),
                rows=rows, pareto=fronts)


__all__ = ["plan", "compare", "PlanResult", "parse_prices", "aggregated_points", "pareto_points", "all_chips",
           "DEFAULT_CHIPS", "layout_label"]

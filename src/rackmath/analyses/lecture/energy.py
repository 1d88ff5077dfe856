"""Energy and power: joules per token, tokens per kWh, and electricity's share of $/Mtok.

The lecture prices a token by the chip-seconds it takes (00:10: "$2/hour per GPU"). A chip-second
also burns energy: the board's draw, the chip's share of its server (CPUs, NICs, switches, fans), and
the data centre's cooling and power conversion on top (PUE). This module turns any step time into
energy with the same arithmetic as cost:

    P_chip    = P_board + P_host                     (W per chip, IT power)
    P_facility = P_chip · PUE                        (W per chip at the meter)
    E/token   = N_chips · P_facility · t_step / tokens_per_step      (J/token)
    tokens/kWh = 3.6e6 J/kWh / (E/token)
    $elec/Mtok = E/token · 1e6 / 3.6e6 · $/kWh
    electricity share = $elec/Mtok ÷ $/Mtok          (the part of a rental price that pays for power)

Board power while serving is the chip's measured ``typical_power_w`` when the catalog has one, else
a stated share of its TDP (:data:`SERVING_POWER_SHARE`). A power cap lowers the clock: dynamic CMOS
power ∝ C·V²·f with V roughly ∝ f across the DVFS range, so P ≈ P_static + P_dyn·(f/f_max)³ and
compute peaks scale with f; HBM bandwidth does not (its clock is separate), which is why memory-bound
decode loses little under a cap (Patel et al., "Characterizing Power Management Opportunities for
LLMs in the Cloud", ASPLOS 2024).

Every function broadcasts over numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from ...explain import Derivation

#: J per kWh.
J_PER_KWH = 3.6e6

#: Default power usage effectiveness: facility power ÷ IT power. Hyperscalers report ~1.1 (Google's fleet
#: 1.09 in its 2024 environmental report); the Uptime Institute's 2024 survey average is ~1.56. 1.2 is a
#: modern colocation figure between the two, stated and overridable (--pue).
DEFAULT_PUE = 1.2

#: Default electricity price, $/kWh: the US industrial average (~$0.08/kWh, EIA Electric Power Monthly, 2024).
DEFAULT_USD_PER_KWH = 0.08

#: Board draw while serving as a share of TDP when the catalog has no measured figure. An assumption:
#: decode is memory-bound and leaves most of the tensor cores idle, so boards run below TDP; 0.7 is a
#: round middle of the 50-90% range seen in public power traces of LLM serving (e.g. Patel et al. 2024).
SERVING_POWER_SHARE = 0.7

#: Host power as a share of TDP when the catalog has no figure for the chip's server ([M] assumption).
HOST_POWER_SHARE = 0.25

#: Static (clock-independent) share of board power in the power-cap model ([M] assumption).
STATIC_POWER_SHARE = 0.2


def board_power_w(tdp_w, typical_w=None, share=SERVING_POWER_SHARE):
    """Board draw while serving: the measured typical draw, else share · TDP (W)."""
    if typical_w is not None:
        return np.asarray(typical_w, dtype=float)
    return np.asarray(tdp_w, dtype=float) * share


def chip_it_power_w(board_w, host_w):
    """IT power per chip: P_chip = P_board + P_host (the chip's share of CPUs, NICs, switches, fans)."""
    return np.asarray(board_w, dtype=float) + np.asarray(host_w, dtype=float)


def facility_power_w(it_w, pue=DEFAULT_PUE):
    """Power at the meter: P_facility = P_IT · PUE (cooling and power conversion on top)."""
    return np.asarray(it_w, dtype=float) * np.asarray(pue, dtype=float)


def energy_per_token_j(power_w_per_chip, chips, step_s, tokens_per_step):
    """E/token = N_chips · P · t_step / tokens per step (J): the chip-seconds of a token, in joules."""
    return (np.asarray(chips, dtype=float) * np.asarray(power_w_per_chip, dtype=float)
            * np.asarray(step_s, dtype=float) / np.asarray(tokens_per_step, dtype=float))


def tokens_per_kwh(j_per_token):
    """Tokens per kWh = 3.6e6 J/kWh ÷ (J/token)."""
    return J_PER_KWH / np.asarray(j_per_token, dtype=float)


def electricity_usd_per_mtok(j_per_token, usd_per_kwh=DEFAULT_USD_PER_KWH):
    """Electricity cost per million tokens: $ = (J/token · 10⁶ / 3.6e6 J/kWh) · $/kWh."""
    return np.asarray(j_per_token, dtype=float) * 1e6 / J_PER_KWH * np.asarray(usd_per_kwh, dtype=float)


def electricity_share(elec_usd_per_mtok, usd_per_mtok):
    """Share of the price per token that pays for electricity: $elec/Mtok ÷ $/Mtok (rental prices include power)."""
    return np.asarray(elec_usd_per_mtok, dtype=float) / np.asarray(usd_per_mtok, dtype=float)


def capped_clock_fraction(cap_w, tdp_w, static_share=STATIC_POWER_SHARE):
    """Clock under a power cap: P = P_s + (TDP − P_s)·(f/f_max)³  ⇒  f/f_max = ((cap − P_s)/(TDP − P_s))^(1/3).

    Dynamic CMOS power ∝ C·V²·f with V ∝ f in the DVFS range (the textbook cube law); P_s = static_share · TDP
    does not scale with the clock. Clipped to (0, 1]: a cap above TDP changes nothing.
    """
    cap = np.asarray(cap_w, dtype=float)
    tdp = np.asarray(tdp_w, dtype=float)
    ps = static_share * tdp
    frac = np.clip((cap - ps) / (tdp - ps), 0.0, 1.0)
    return np.cbrt(frac)


def capped_peak_flops(peak_flops, cap_w, tdp_w, static_share=STATIC_POWER_SHARE):
    """Peak FLOP/s under a power cap: peak · f/f_max (memory bandwidth unchanged: HBM has its own clock)."""
    return np.asarray(peak_flops, dtype=float) * capped_clock_fraction(cap_w, tdp_w, static_share)


# --------------------------------------------------------------------------------------------------
# The chip's figures and one result
# --------------------------------------------------------------------------------------------------


#: Board draw while training, as a share of TDP: dense training keeps the tensor cores busy and runs boards at
#: their limit (an assumption, stated; large-scale training power traces sit near TDP).
TRAINING_POWER_SHARE = 1.0

LOADS = ("serving", "training")


def _check_chip(chip):
    if chip.tdp_w is None:
        raise InputError("hardware", f"{chip.name} has no board power (tdp_w) in the catalog",
                         "a chip with tdp_w, or add tdp_w to your catalog entry")


def chip_power(chip, *, power_cap_w=None, share=SERVING_POWER_SHARE, load="serving") -> tuple[float, float, str]:
    """(board W, host W, note) for a catalog chip while serving (or training: TDP), under an optional power cap."""
    _check_chip(chip)
    if load not in LOADS:
        raise InputError("load", f"{load!r} is not accepted", " or ".join(LOADS))
    if load == "training":
        board = float(chip.tdp_w) * TRAINING_POWER_SHARE
        note = f"training at the {chip.tdp_w:,.0f} W TDP (assumption: dense training runs boards at their limit)"
    else:
        board = float(board_power_w(chip.tdp_w, chip.typical_power_w, share))
        note = ("measured typical draw" if chip.typical_power_w is not None
                else f"{share:.0%} of the {chip.tdp_w:,.0f} W TDP (assumption; no measured draw in the catalog)")
    if power_cap_w is not None:
        if board > power_cap_w:
            board, note = float(power_cap_w), f"capped at {power_cap_w:,.0f} W"
    host = chip.host_power_w if chip.host_power_w is not None else HOST_POWER_SHARE * chip.tdp_w
    return board, float(host), note


@dataclass
class EnergyResult:
    """Energy per token and what it costs, broadcast over the inputs' shape."""

    board_w: float
    host_w: float
    pue: float
    usd_per_kwh: float
    facility_w_per_chip: float
    j_per_token: np.ndarray
    tokens_per_kwh: np.ndarray
    elec_usd_per_mtok: np.ndarray
    elec_share: np.ndarray | None
    note: str
    chips: object = 1.0  # the inputs E/token was computed from (broadcast against j_per_token), for explain()
    step_s: object = 1.0
    tokens_per_step: object = 1.0
    usd_per_mtok: object = None

    def as_dict(self) -> dict:
        def val(x):
            if x is None:
                return None
            a = np.asarray(x, dtype=float)
            return float(a) if a.ndim == 0 else a.tolist()
        return {"board_w": self.board_w, "host_w": self.host_w, "pue": self.pue, "usd_per_kwh": self.usd_per_kwh,
                "facility_w_per_chip": self.facility_w_per_chip, "j_per_token": val(self.j_per_token),
                "tokens_per_kwh": val(self.tokens_per_kwh), "elec_usd_per_mtok": val(self.elec_usd_per_mtok),
                "elec_share": val(self.elec_share), "board_power_note": self.note}

    def explain(self, i=0) -> Derivation:
        """The energy block, every line generated from the numbers it was computed with (``Derivation.add`` expr)."""
        shape = np.shape(self.j_per_token)

        def at(x):
            a = np.broadcast_to(np.asarray(x, dtype=float), shape)
            return float(a.reshape(-1)[i]) if a.ndim else float(a)
        d = Derivation("Energy per token")
        d.add("P_board", "board draw under load", "", self.board_w, "W", self.note, key="P_board")
        d.add("P_host", "chip's share of CPUs, NICs, switches, fans", "", self.host_w, "W", key="P_host")
        d.add("P", "(P_board + P_host) · PUE", "", self.facility_w_per_chip, "W",
              expr=f"(P_board + P_host) * {self.pue!r}")
        d.add("E/token", "N_chips · P · t_step / tokens per step", "", at(self.j_per_token), "J",
              expr=f"{at(self.chips)!r} * P * {at(self.step_s)!r} / {at(self.tokens_per_step)!r}", key="E")
        d.add("tokens/kWh", "3.6e6 J/kWh ÷ E/token", "", at(self.tokens_per_kwh), "", expr=f"{J_PER_KWH!r} / E")
        d.add("$elec/Mtok", "E/token · 10⁶ / 3.6e6 · $/kWh", "", at(self.elec_usd_per_mtok), "$",
              expr=f"E * 1000000.0 / {J_PER_KWH!r} * {self.usd_per_kwh!r}", key="elec")
        if self.elec_share is not None:
            d.add("share", "$elec/Mtok ÷ $/Mtok", "", at(self.elec_share), "",
                  "the part of the rental price that pays for electricity",
                  expr=f"elec / {at(self.usd_per_mtok)!r}" if self.usd_per_mtok is not None else "")
        return d


def check_power_cap(chip, power_cap_w) -> float:
    """A power cap the cube law can honour: above the static power (clock → 0 below it), at most 100 kW."""
    _check_chip(chip)
    cap = float(power_cap_w)
    floor = STATIC_POWER_SHARE * chip.tdp_w
    if not (np.isfinite(cap) and floor < cap <= 1e5):
        raise InputError("power_cap", f"{power_cap_w!r} W is not accepted for {chip.name}",
                         f"a board power above {floor:,.0f} W (the static {STATIC_POWER_SHARE:.0%} of its "
                         f"{chip.tdp_w:,.0f} W TDP); a cap at or above TDP changes nothing")
    return cap


def capped_chip(chip, power_cap_w):
    """The chip under a board-power cap: every compute peak × f/f_max (:func:`capped_clock_fraction`), memory and
    interconnect bandwidths unchanged. A derived catalog entry, so every model (roofline, serving, training) sees
    the capped peak without knowing about caps. None: the chip itself."""
    import dataclasses

    if power_cap_w is None:
        return chip
    cap = check_power_cap(chip, power_cap_w)
    f = float(capped_clock_fraction(cap, chip.tdp_w))
    if f >= 1.0:
        return chip
    desc = f"{chip.description} (power-capped at {cap:,.0f} W: clock × {f:.3f})".strip()
    return dataclasses.replace(chip, flops={k: v * f for k, v in chip.flops.items()}, description=desc)


def capped_system(system, power_cap_w):
    """A scale-up system whose chips are power-capped (:func:`capped_chip`); None: unchanged."""
    import dataclasses

    if power_cap_w is None:
        return system
    return dataclasses.replace(system, chip=capped_chip(system.chip, power_cap_w))


def energy(chip, *, chips, step_s, tokens_per_step, usd_per_mtok=None, pue=DEFAULT_PUE,
           usd_per_kwh=DEFAULT_USD_PER_KWH, power_cap_w=None, load="serving") -> EnergyResult:
    """Energy per token of a deployment of ``chips`` chips that emits ``tokens_per_step`` tokens every ``step_s``.

    ``load``: 'serving' (the measured typical draw, else 70% of TDP) or 'training' (TDP)."""
    if not (np.isfinite(pue) and 1.0 <= pue <= 3.0):
        raise InputError("pue", f"{pue!r} is not accepted", "a number from 1.0 to 3.0")
    if not (np.isfinite(usd_per_kwh) and 0.0 <= usd_per_kwh <= 10.0):
        raise InputError("usd_per_kwh", f"{usd_per_kwh!r} is not accepted", "a price from $0 to $10 per kWh")
    if power_cap_w is not None and not (np.isfinite(power_cap_w) and 1.0 <= power_cap_w <= 1e5):
        raise InputError("power_cap", f"{power_cap_w!r} W is not accepted", "a power from 1 W to 100 kW")
    board, host, note = chip_power(chip, power_cap_w=power_cap_w, load=load)
    p = float(facility_power_w(chip_it_power_w(board, host), pue))
    with np.errstate(divide="ignore", invalid="ignore"):
        j = energy_per_token_j(p, chips, step_s, tokens_per_step)
        elec = electricity_usd_per_mtok(j, usd_per_kwh)
        share = None if usd_per_mtok is None else electricity_share(elec, usd_per_mtok)
        tpk = tokens_per_kwh(j)
    return EnergyResult(board, host, float(pue), float(usd_per_kwh), p, j, tpk, elec, share, note, chips, step_s,
                        tokens_per_step, usd_per_mtok)


def run_energy(chip, *, chips, time_s, tokens, usd=None, pue=DEFAULT_PUE, usd_per_kwh=DEFAULT_USD_PER_KWH,
               power_cap_w=None, load="training") -> tuple[EnergyResult, dict]:
    """Energy of a whole run (a training job): every chip at its draw for ``time_s``.

    E = N · P · T (J);  MWh = E / 3.6e9;  electricity $ = E / 3.6e6 · $/kWh;  J/token = E / D;
    share = electricity $ ÷ the run's GPU-hour cost ``usd``."""
    usd_per_mtok = usd / tokens * 1e6 if usd and tokens else None
    e = energy(chip, chips=chips, step_s=time_s, tokens_per_step=tokens, usd_per_mtok=usd_per_mtok, pue=pue,
               usd_per_kwh=usd_per_kwh, power_cap_w=power_cap_w, load=load)
    total = float(e.facility_w_per_chip) * float(chips) * float(time_s)
    return e, {"energy_j": total, "energy_mwh": total / 3.6e9, "electricity_usd": total / J_PER_KWH * e.usd_per_kwh}

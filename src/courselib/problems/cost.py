"""Cost problems: wasted GPU-hours and dollars, with the unit traps people fall into.

The solver prices the problem with :mod:`courselib.model.cost` (``wasted = GPUs held × wait``,
DESIGN §3; a gang admission check holds nothing while pending, volcano-allocate; a lost rank costs every
GPU of the job the time since the last checkpoint + detection + restart: pytorch-distributed-init,
torchrun-elastic).
Difficulty changes the traps: *easy* states the GPUs held, the wait in minutes and one price per
GPU-hour; *medium* states how many GPUs are *missing* (held = gang − missing), the wait in minutes
past the hour or in seconds, and a price range; *hard* gives the wait as clock times, the price per
*node*-hour, and adds a hung rank later in the run whose detection delay is PyTorch's default NCCL
timeout (10 min, not stated: a trap of knowledge, pytorch-distributed-init).
"""
from __future__ import annotations

from courselib.model import cost
from courselib.problems.base import Problem, Solution, cite, rng
from courselib.units import format_duration, format_usd

TOPIC = "cost"
SUMMARY = "wasted GPU-hours and dollars of a partial gang and a lost rank (minutes vs hours, per-GPU vs total)"

TIMEOUT_S = 600.0  # PyTorch's default NCCL timeout (pytorch-distributed-init): the bound for a hung rank


def _clock(minutes: int) -> str:
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


def _draw(r, difficulty: str) -> dict:
    gpn = 8
    gang = r.choice([64, 128, 256, 512, 1024, 2048])
    held = r.randint(gang // 2, gang - gpn) // gpn * gpn
    data = {"gang_size": gang, "held": held, "gpus_per_node": gpn}
    if difficulty == "easy":
        data["stated"] = "held"
        data["wait"] = {"unit": "min", "value": r.randint(5, 55)}
        data["price"] = {"per": "GPU-hour", "low": r.choice([1.5, 2.0, 2.5, 3.0, 3.5, 4.0]), "high": None}
    elif difficulty == "medium":
        data["stated"] = "missing"
        unit = r.choice(["min", "s"])
        data["wait"] = ({"unit": "min", "value": r.randint(61, 200)} if unit == "min"
                        else {"unit": "s", "value": r.randint(20, 120) * 60 + r.choice([0, 30])})
        low = r.choice([1.5, 2.0, 2.5])
        data["price"] = {"per": "GPU-hour", "low": low, "high": low + r.choice([1.0, 1.5, 2.0])}
    else:
        data["stated"] = r.choice(["held", "missing"])
        start = r.randint(0, 23 * 60)
        data["wait"] = {"unit": "clock", "value": [_clock(start), _clock(start + r.randint(20, 300))]}
        low = r.choice([12, 16, 20, 24])
        ranged = r.random() < 0.5
        data["price"] = {"per": "node-hour", "low": float(low), "high": float(low + r.choice([8, 12, 16])) if ranged else None}
        data["lost_rank"] = {"since_checkpoint_min": r.randint(5, 90), "restart_min": r.randint(2, 20)}
    return data


def wait_seconds(wait: dict) -> float:
    """The wait in seconds, from the way the problem states it."""
    if wait["unit"] == "clock":
        (h0, m0), (h1, m1) = (map(int, t.split(":")) for t in wait["value"])
        return float(((h1 * 60 + m1) - (h0 * 60 + m0)) % (24 * 60) * 60)
    return float(wait["value"]) * {"s": 1, "min": 60, "h": 3600}[wait["unit"]]


def price(data: dict) -> cost.Price:
    """The price per GPU-hour (a node-hour price divided by the GPUs in a node)."""
    p = data["price"]
    div = data["gpus_per_node"] if p["per"] == "node-hour" else 1
    high = p["high"] if p["high"] is not None else p["low"]
    return cost.Price(p["low"] / div, high / div)


def _r(v, nd=2):
    return [round(x, nd) for x in v] if isinstance(v, list) else round(v, nd)


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    data = _draw(r, difficulty)
    gang, held = data["gang_size"], data["held"]
    w, p = data["wait"], data["price"]
    who = (f"{held} of its GPUs are placed" if data["stated"] == "held"
           else f"{gang - held} of its GPUs are still missing")
    if w["unit"] == "clock":
        when = f"the placed ranks wait at the NCCL init barrier from {w['value'][0]} to {w['value'][1]}"
    elif w["unit"] == "min":
        when = f"the placed ranks wait {w['value']} minutes for the rest"
    else:
        when = f"the placed ranks wait {w['value']} seconds for the rest"
    money = f"${p['low']:g}" + (f" to ${p['high']:g}" if p["high"] is not None else "")
    lines = [f"A {gang}-GPU training job (one rank per GPU) is scheduled without a gang admission check: "
             f"{who}, and {when}.",
             f"The GPUs cost {money} per {p['per']}" + (f" (a node has {data['gpus_per_node']} GPUs)"
                                                         if p["per"] == "node-hour" else "") + "."]
    q = ["How many GPU-hours are held idle while the job waits, and what do they cost?",
         "What would the same wait cost with a gang admission check (Volcano minMember)?"]
    if "lost_rank" in data:
        lr = data["lost_rank"]
        lines.append(f"Later, one rank's GPU hangs {lr['since_checkpoint_min']} minutes after the last checkpoint "
                     "(no error reaches the others). The other ranks wait in their collective until PyTorch's "
                     "default NCCL timeout fires; "
                     f"then every rank restarts from the checkpoint, which takes {lr['restart_min']} minutes.")
        q.append("How many GPU-hours does the lost rank cost, in dollars, and what is the total bill?")
    question = " ".join(q)
    lines += ["", "Question: " + question]
    return Problem(TOPIC, seed, difficulty, "\n".join(lines), data, question)


def solve(problem: Problem) -> Solution:
    data = problem.data
    gang, held = data["gang_size"], data["held"]
    steps = []
    if data["stated"] == "missing":
        steps.append(f"GPUs held idle = the placed ones, not the missing ones: {gang} - {gang - held} = {held}.")
    else:
        steps.append(f"GPUs held idle: the {held} placed GPUs (the missing {gang - held} hold nothing).")
    wait_s = wait_seconds(data["wait"])
    w = data["wait"]
    if w["unit"] == "clock":
        steps.append(f"Wait: from {w['value'][0]} to {w['value'][1]} is {format_duration(wait_s)} = {wait_s:g} s "
                     f"= {wait_s / 3600:.4f} h.")
    elif w["unit"] == "min":
        steps.append(f"Wait: {w['value']} min = {w['value']}/60 h = {wait_s / 3600:.4f} h "
                     f"(not {w['value'] / 100:g} h: minutes are sixtieths of an hour).")
    else:
        steps.append(f"Wait: {w['value']} s = {w['value']}/3600 h = {wait_s / 3600:.4f} h ({format_duration(wait_s)}).")
    pr = price(data)
    p = data["price"]
    if p["per"] == "node-hour":
        hi = f"–${p['high']:g}" if p["high"] is not None else ""
        steps.append(f"Price per GPU-hour: ${p['low']:g}{hi} per node-hour / {data['gpus_per_node']} GPUs per node = "
                     f"${pr.low:g}" + (f"–${pr.high:g}" if pr.is_range else "") + " per GPU-hour.")
    gw = cost.GangWait(gpus_held=held, wait_s=wait_s, price=pr, gang_size=gang)
    c = cost.gang_wait_cost(gw)
    steps.append(f"Wasted GPU-hours = GPUs held x wait = {held} x {wait_s / 3600:.4f} h = {c.wasted_gpu_hours:,.2f} GPU-h.")
    price_txt = f"${pr.low:g}" + (f"–${pr.high:g}" if pr.is_range else "")
    steps.append(f"Cost = {c.wasted_gpu_hours:,.2f} GPU-h x {price_txt}/GPU-h = {format_usd(c.cost_usd)}"
                 + (" (a range, because the price is a range)" if pr.is_range else "") + ".")
    steps.append("With a gang admission check no pod is bound until all ranks fit (Volcano allocate commits only "
                 "when JobReady), so nothing is held while the job waits: 0 GPU-h, $0; the job starts at the same "
                 "moment.")
    answer = {"gpus_held": held, "wait_h": round(wait_s / 3600, 4),
              "price_per_gpu_hour_usd": [pr.low, pr.high] if pr.is_range else pr.low,
              "wasted_gpu_hours": round(c.wasted_gpu_hours, 2), "cost_usd": _r(c.cost_usd),
              "with_gang_check_gpu_hours": 0.0, "with_gang_check_usd": 0.0}
    if "lost_rank" in data:
        lr = data["lost_rank"]
        since, restart = lr["since_checkpoint_min"] * 60.0, lr["restart_min"] * 60.0
        gh = cost.lost_rank_gpu_hours(gang, since, TIMEOUT_S, restart)
        lost_usd = pr.times(gh)
        steps.append(f"Lost rank: nothing reports a hung rank, so detection waits for PyTorch's default NCCL "
                     f"timeout, 10 min (init_process_group's default for NCCL) {cite('pytorch-distributed-init')}, "
                     f"and every rank restarts (torchrun stops and restarts all workers) {cite('torchrun-elastic')}, so ALL {gang} GPUs lose "
                     f"{lr['since_checkpoint_min']} + 10 + {lr['restart_min']} = "
                     f"{lr['since_checkpoint_min'] + 10 + lr['restart_min']} min: {gang} x "
                     f"{(since + TIMEOUT_S + restart) / 3600:.4f} h = {gh:,.2f} GPU-h, {format_usd(lost_usd)} "
                     "(not just the one GPU of the lost rank).")
        total = [a + b for a, b in zip(c.cost_usd, lost_usd)] if pr.is_range else c.cost_usd + lost_usd
        steps.append(f"Total bill: {format_usd(c.cost_usd)} + {format_usd(lost_usd)} = {format_usd(total)}.")
        answer.update({"lost_rank_gpu_hours": round(gh, 2), "lost_rank_usd": _r(lost_usd), "total_usd": _r(total)})
    return Solution(answer, steps)

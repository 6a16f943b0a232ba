"""The measured schedule of a pipeline run replayed from its --trace (docs/pipeline.md,
"Replaying the measured actions"): per-action costs read off the trace, then an event
simulation of the schedule's dependency graph with those costs, term by term, so that
each term's share of the difference between the formula and the measured bubble shows.

The trace (src/trace, `train --trace FILE`) holds, per rank and step, a span for each
compute action, named by micro-batch and chunk (`F3`, `B3b`, zb-h1's `W3`), a `bubble`
span for each blocking receive (RECV_ACT right before its forward, RECV_GRAD right
before its backward: strategies/shared/schedule.c), a `sendrecv` span for each send's
issue (SEND_ACT / SEND_GRAD right after the compute action), the sends completed after
the last action (`sendrecv.wait`), the optimizer, and the step's end, where the stage's
step as the report counts it, stage_step_ms, ends: the `step` span's end, or in a trace
of a report before 1.19 the first `allreduce_f64` after the last action (the split of
the waits, then inside the step; since 1.19 after it, docs/pipeline.md).

Read off one step of rank r (times in ms), per compute action i in the rank's order:
  dur      the action's own span (forward, backward, B or W of one micro-batch, chunk)
  pre      from the previous action's end (or the step's start) to its receive's post
           (the previous action's send issue, slot bookkeeping, data of the first stage)
  recv     the receive's span; `post` its start
  post_gap from the receive's end to the action's start
  send_at  from the action's end to its send's issue (the message's post)
and per rank: start (the step's start, rank 0's clock), end (the last action's end to
the waits' split: completing the sends, the optimizer, dp).

The dependencies: a forward of micro-batch k on virtual stage v > 0 needs the
activation sent after F(k, v-1) (rank (v-1) mod P); a backward (zb-h1: B) of k on
v < P·V - 1 needs the gradient sent after B(k, v+1); every rank runs its actions in
its list's order (the trace's).

The replay (replay()) runs that graph with a choice of terms:
  equal      every action of a kind the mean over all stages (the formula's equal
             stages); otherwise each action its own measured duration (imbalance)
  latency    a message arrives its own measured latency after its post (receive end
             less the sender's post, where the receive was posted before the message),
             or the run's median of those where it was not (at most the time by which
             its receive had taken it); otherwise at its post
  overhead   pre, post_gap, send_at and a receive's cost when its message is there
             already (the measured gaps; each receive's own span, or the run's median
             where the receive waited); otherwise 0
  fixed      each rank's start and end work; otherwise 0
and reports per rank the bubble as the strategy measures it (each receive's wait up
to its sender's post: strategies/shared/pipeline_exec.c), the step as the strategy
counts it (start to the end of the end work), and the formula's own definition:
the idle of every stage up to the step's last action anywhere (makespan less compute).
"""
import json
import re
import statistics

ACTION = re.compile(r"^([FBW])(\d+)([a-z]?)$")
# spans starting at the same time: a send's issue, then a receive, then an action
_ORDER = {"sendrecv": 0, "bubble": 1}
TERMS = ("imbalance", "latency", "progress", "overhead", "fixed")
TERM_NAMES = {"formula": "formula", "drain": "drain counted as wait, not bubble",
              "imbalance": "stage imbalance", "latency": "point-to-point latency",
              "progress": "message moved only while its sender is in MPI",
              "overhead": "per-action overhead", "fixed": "fixed step work"}


def formula_fraction(schedule, p, m, f, b, w=0.0, v=2):
    """The schedule's bubble as a fraction of the step, equal stages with per-micro-batch
    forward f, backward b (zb-h1: B b and W w) of a whole stage (docs/pipeline.md):
    gpipe and 1f1b (p-1)(f+b); interleaved (p-1)(f+b)/v; zb-h1 (p-1)(f+b) -
    (min(m,p)-1) min(w,f); over compute + bubble. These are the closed forms: exact for
    gpipe, 1f1b and interleaved, and for zb-h1 only when b >= f; the report's
    bubble_fraction_formula (and the replay of equal stages) is the exact value."""
    if schedule == "zb-h1":
        bubble = (p - 1) * (f + b) - (min(m, p) - 1) * min(w, f)
        compute = m * (f + b + w)
    else:
        bubble = (p - 1) * (f + b) / (v if schedule == "interleaved" else 1)
        compute = m * (f + b)
    return bubble / (compute + bubble) if compute + bubble > 0 else 0.0


def load_events(path):
    """The trace's complete ("X") events from a --trace file."""
    return load_events_from(json.load(open(path)))


def load_events_from(doc):
    """The complete ("X") events of a trace document (its dict or its event list)."""
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("ph") == "X"]


def steps_in(events):
    """The step numbers every rank traced, sorted."""
    steps = {}
    for e in events:
        if e.get("name") == "step":
            steps.setdefault(e["pid"], set()).add(e.get("args", {}).get("step"))
    return sorted(set.intersection(*steps.values())) if steps else []


def read_step(events, step, P, V=1):
    """One step's actions per rank (dicts as the module's docstring says), in ms.
    Raises ValueError when the trace is not a pipeline's (no actions, an action
    without its receive)."""
    ranks = {}
    for e in events:
        if e.get("name") == "step" and e.get("args", {}).get("step") == step:
            ranks[e["pid"]] = (e["ts"], e["ts"] + e["dur"])
    if len(ranks) != P:
        raise ValueError(f"step {step}: {len(ranks)} ranks traced, expected {P}")
    out = {}
    for r, (t0, t1) in ranks.items():
        spans = sorted((e for e in events if e["pid"] == r and e.get("tid", 0) == 0
                        and t0 <= e["ts"] <= t1 and e.get("name") != "step"),
                       key=lambda e: (e["ts"], _ORDER.get(e["name"], 2), -e["dur"]))
        acts, prev_end, pending_recv = [], t0, None
        for e in spans:
            name = e["name"]
            m = ACTION.match(name)
            if m:
                kind, mb, ch = m.group(1), int(m.group(2)), m.group(3)
                chunk = ord(ch) - ord("a") if ch else 0
                a = {"kind": kind, "mb": mb, "chunk": chunk, "vstage": r + chunk * P,
                     "start": e["ts"] / 1e3, "dur": e["dur"] / 1e3, "send_at": None,
                     "bytes": 0, "send_dur": 0.0}
                if pending_recv:
                    rs, rd = pending_recv
                    a["recv"] = (rs / 1e3, rd / 1e3)
                    a["pre"] = (rs - prev_end) / 1e3
                    a["post_gap"] = (e["ts"] - rs - rd) / 1e3
                else:
                    a["recv"] = None
                    a["pre"] = (e["ts"] - prev_end) / 1e3
                    a["post_gap"] = 0.0
                acts.append(a)
                prev_end, pending_recv = e["ts"] + e["dur"], None
            elif name == "bubble" and e["ts"] >= prev_end:
                pending_recv = (e["ts"], e["dur"])
            elif name == "sendrecv" and acts and acts[-1]["send_at"] is None \
                    and pending_recv is None and e["ts"] >= prev_end:
                acts[-1]["send_at"] = (e["ts"] - prev_end) / 1e3
                acts[-1]["bytes"] = e.get("args", {}).get("bytes", 0)
                acts[-1]["send_dur"] = e["dur"] / 1e3
        if not acts:
            raise ValueError(f"step {step}: rank {r} traced no pipeline action")
        split = [e["ts"] for e in spans if e["name"] == "allreduce_f64" and e["ts"] >= prev_end]
        end = min(split) if split else t1
        sends = sum(e["dur"] for e in spans if e["name"] == "sendrecv.wait"
                    and prev_end <= e["ts"] < end)
        opt = sum(e["dur"] for e in spans if e["name"] == "optimizer"
                  and prev_end <= e["ts"] < end)
        out[r] = {"t0": t0 / 1e3, "start": 0.0, "actions": acts,
                  "end": (end - prev_end) / 1e3, "end_sends": sends / 1e3,
                  "optimizer": opt / 1e3}
    first = min(v["t0"] for v in out.values())
    for v in out.values():
        v["start"] = v["t0"] - first
    return out


def _key(kind, mb, vstage):
    return (kind, mb, vstage)


def messages(step):
    """Each received message of one step, read back from the trace: {key of the
    action that sent it: (receiving rank, receive's post, receive's span, sender's
    post)}, ms (the sender's post: its send's issue, or its action's end without a
    traced issue)."""
    posts = {}
    for v in step.values():
        for a in v["actions"]:
            if a["kind"] != "W":
                posts[_key(a["kind"], a["mb"], a["vstage"])] = \
                    a["start"] + a["dur"] + (a["send_at"] or 0.0)
    last_vs = max(a["vstage"] for v in step.values() for a in v["actions"])
    out = {}
    for r, v in step.items():
        for a in v["actions"]:
            src = _source(a, last_vs)
            if a["recv"] and src in posts:
                out[src] = (r, a["recv"][0], a["recv"][1], posts[src])
    return out


def measured(step):
    """The strategy's own split of one step read back from the trace: per rank the
    bubble (each receive's wait up to its sender's post) and the step (start to the
    end of the end work), ms; the point-to-point latencies (receive end less its
    sender's post, for receives posted before their message), ms; and the costs of
    the receives posted after their message (their spans), ms."""
    bubble = {r: 0.0 for r in step}
    lat, own = [], []
    for r, rs, rd, sent in messages(step).values():
        bubble[r] += max(0.0, min(rs + rd, sent) - rs)
        (lat if rs <= sent else own).append(rs + rd - sent if rs <= sent else rd)
    steps = {}
    for r, v in step.items():
        last = v["actions"][-1]
        steps[r] = last["start"] + last["dur"] + v["end"] - v["t0"]
    return bubble, steps, lat, own


def latencies(step, median_ms=float("inf")):
    """{message key: latency, ms}: measured for the messages whose receive was posted
    before them (receive end less the sender's post); for the others, which had come
    by the end of their receive, median_ms at most that bound."""
    return {k: (rs + rd - sent if rs <= sent else min(median_ms, rs + rd - sent))
            for k, (_, rs, rd, sent) in messages(step).items()}


def recv_costs(step):
    """{message key: the receive's span, ms} of the receives posted after their message
    (the receive's own cost)."""
    return {k: rd for k, (_, rs, rd, sent) in messages(step).items() if rs > sent}


def _sends(a, last_vs):
    """Whether compute action a sends its result: a forward below the last virtual
    stage, a backward (B) above the first."""
    return (a["kind"] == "F" and a["vstage"] < last_vs) or (a["kind"] == "B" and a["vstage"] > 0)


def _source(a, last_vs):
    """The key of the action whose message action a receives, or None."""
    if a["kind"] == "F" and a["vstage"] > 0:
        return _key("F", a["mb"], a["vstage"] - 1)
    if a["kind"] == "B" and a["vstage"] < last_vs:
        return _key("B", a["mb"], a["vstage"] + 1)
    return None


def costs(steps):
    """Per-action costs over the given steps (from read_step): means by stage of every
    action's duration by kind (F, B, W), of the gaps around an action ("gap"), of a
    send's issue ("send"), of the step's start ("begin"), its end work less the sends
    completed there ("end"; "optimizer" the optimizer's part of it) and those sends
    ("end_sends"); the median receive cost when the message was there, and the median
    measured latency;
    all ms: (costs by (rank, kind), latency, receive cost)."""
    by = {}
    rec_cost, lat = [], []
    for st in steps:
        _, _, l, own = measured(st)
        lat += l
        rec_cost += own
        for r, v in st.items():
            for a in v["actions"]:
                by.setdefault((r, a["kind"]), []).append(a["dur"])
                by.setdefault((r, "gap"), []).append(a["pre"] + a["post_gap"])
                if a["send_at"] is not None:
                    by.setdefault((r, "send"), []).append(a["send_dur"])
            by.setdefault((r, "end"), []).append(v["end"] - v.get("end_sends", 0.0))
            by.setdefault((r, "end_sends"), []).append(v.get("end_sends", 0.0))
            by.setdefault((r, "optimizer"), []).append(v.get("optimizer", 0.0))
            by.setdefault((r, "begin"), []).append(v["actions"][0]["pre"])
    return {k: statistics.fmean(x) for k, x in by.items()}, \
        (statistics.median(lat) if lat else 0.0), \
        (statistics.median(rec_cost) if rec_cost else 0.0)


def replay(step, terms, latency_ms=0.0, recv_cost_ms=0.0, eager_bytes=4096, by_message=None,
           recv_by_message=None):
    """Replays one step (from read_step) with the terms in `terms` (a set of TERMS):
    returns per rank (bubble_ms, step_ms) as the strategy measures them, and the
    formula's definition of the bubble over the step (sum over ranks of makespan -
    compute, over P x makespan). A receive whose message is there already costs
    recv_cost_ms with the overhead term; one that waits ends latency_ms after its
    sender's post, or by_message[key] where given (each message's own measured
    latency: on a loaded machine it holds a receiver descheduled while it waited);
    likewise a receive's cost is recv_by_message[key] where given (its own span). With the progress term, a message of more than eager_bytes
    (Open MPI's eager limit: btl_vader_eager_limit 4096 on one host, btl_tcp 65536
    across hosts) moves only once its sender is inside MPI again after posting it
    (its next receive's post, its next send, or the sends completed after its last
    action): it arrives no earlier than that, and the sender's step ends no earlier
    than its receiver's post of it. The fixed term adds each rank's end work less the
    sends it completed there (measured: end less end_sends). Raises ValueError on a dependency that never
    resolves (a trace whose order is not a pipeline's)."""
    acts = {r: v["actions"] for r, v in step.items()}
    ranks = sorted(acts)
    last_vs = max(a["vstage"] for r in ranks for a in acts[r])
    if "imbalance" in terms:
        dur = lambda r, a: a["dur"]  # noqa: E731
    else:
        means = {}
        for r in ranks:
            for a in acts[r]:
                means.setdefault(a["kind"], []).append(a["dur"])
        means = {k: statistics.fmean(x) for k, x in means.items()}
        dur = lambda r, a: means[a["kind"]]  # noqa: E731
    ov = "overhead" in terms
    lat = latency_ms if "latency" in terms else 0.0
    prog = "progress" in terms
    by_message = by_message if "latency" in terms and by_message else {}

    def lat_of(k):
        return by_message.get(k, lat)

    posted, arrive, pending = {}, {}, {r: [] for r in ranks}
    recv_post, rendezvous = {}, {r: [] for r in ranks}
    t = {r: (step[r]["start"] if "fixed" in terms else 0.0) for r in ranks}
    nxt = {r: 0 for r in ranks}
    bubble = {r: 0.0 for r in ranks}
    busy = {r: 0.0 for r in ranks}

    def progress(r, when):
        for k in pending[r]:
            arrive[k] = max(posted[k] + lat_of(k), when)
        pending[r] = []

    while any(nxt[r] < len(acts[r]) for r in ranks):
        moved = False
        for r in ranks:
            while nxt[r] < len(acts[r]):
                a = acts[r][nxt[r]]
                src = _source(a, last_vs)
                now = t[r] + (a["pre"] if ov else 0.0)
                if src is not None:
                    progress(r, now)  # this rank is in MPI from its receive's post
                    recv_post.setdefault(src, now)
                    if src not in arrive:
                        break
                    sent = posted[src]
                    if now < sent:
                        bubble[r] += sent - now
                    cost = (recv_by_message or {}).get(src, recv_cost_ms) if ov else 0.0
                    done = max(now + cost, arrive[src])
                    now = done + (a["post_gap"] if ov else 0.0)
                d = dur(r, a)
                busy[r] += d
                t[r] = now + d
                if a["kind"] != "W" and _sends(a, last_vs):
                    k = _key(a["kind"], a["mb"], a["vstage"])
                    posted[k] = t[r] + ((a["send_at"] or 0.0) if ov else 0.0)
                    progress(r, posted[k])  # the send's issue is an MPI call
                    if prog and a["bytes"] >= eager_bytes:  # the limit holds the header
                        pending[r].append(k)
                        rendezvous[r].append(k)
                    else:
                        arrive[k] = posted[k] + lat_of(k)
                nxt[r] += 1
                moved = True
            if nxt[r] == len(acts[r]):
                progress(r, t[r])  # the sends completed after the last action
        if not moved:
            raise ValueError("replay: the actions' dependencies never resolve")
    # a rendezvous send still in flight after the last action completes once its
    # receiver has posted the receive and the data has moved
    done = {r: max([t[r]] + [max(arrive[k], recv_post.get(k, arrive[k]))
                             for k in rendezvous[r]]) for r in ranks}
    own = {r: max(0.0, step[r]["end"] - step[r].get("end_sends", 0.0)) for r in ranks}
    ends = {r: done[r] + (own[r] if "fixed" in terms else 0.0) for r in ranks}
    starts = {r: (step[r]["start"] if "fixed" in terms else 0.0) for r in ranks}
    steps = {r: ends[r] - starts[r] for r in ranks}
    span = max(t.values()) - min(starts.values())
    idle = sum(span - busy[r] for r in ranks)
    return bubble, steps, idle / (len(ranks) * span) if span > 0 else 0.0


def fraction(bubble, steps):
    """Mean bubble over mean step, as bench/pipeline.py's measured column."""
    s = statistics.fmean(steps.values())
    return statistics.fmean(bubble.values()) / s if s > 0 else 0.0


def explain(events, P, V=1, first_step=0, eager_bytes=4096):
    """The replay of every step traced from first_step on, averaged: a dict with
    measured (the trace's own bubble over step), formula_replay (equal stages, no
    latency, no overhead, the formula's definition: should equal the closed form),
    the chain drain, +imbalance, +latency, +progress, +overhead, +fixed (each the
    strategy's definition, cumulative), the per-action costs and the latency used."""
    parsed = [read_step(events, s, P, V) for s in steps_in(events) if s >= first_step]
    if not parsed:
        raise ValueError("no traced step at or after the warm-up")
    cost, lat, rcost = costs(parsed)
    chain = [("formula", None), ("drain", set())]
    for i, term in enumerate(TERMS):
        chain.append((term, set(TERMS[:i + 1])))
    num = {k: 0.0 for k, _ in chain}
    den = {k: 0.0 for k, _ in chain}
    idle, m_num, m_den = [], 0.0, 0.0
    for st in parsed:
        b, s, _, _ = measured(st)
        m_num += statistics.fmean(b.values())
        m_den += statistics.fmean(s.values())
        for name, terms in chain:
            if terms is None:
                idle.append(replay(st, set(), 0.0)[2])
                continue
            rb, rs, _ = replay(st, terms, lat, rcost, eager_bytes, latencies(st, lat),
                               recv_costs(st))
            num[name] += statistics.fmean(rb.values())
            den[name] += statistics.fmean(rs.values())
    # over the steps as the report sums them: mean bubble over mean step
    out = {k: num[k] / den[k] if den[k] > 0 else 0.0 for k, _ in chain[1:]}
    out["formula"] = statistics.fmean(idle)
    out["measured"] = m_num / m_den if m_den > 0 else 0.0
    out["latency_ms"] = lat
    out["recv_cost_ms"] = rcost
    out["costs"] = cost
    out["steps"] = len(parsed)
    return out


def classify(row, measured_value, tolerance=0.10):
    """Which term closes the difference between the formula and `measured_value`:
    walking the chain (formula, drain, then TERMS cumulatively), the term
    whose addition brings the replay nearest (the largest drop of |replay - measured|),
    and whether the full replay is within `tolerance` of the measurement. Returns
    (term's name, closed: bool, residual: full replay / measured - 1)."""
    order = ["formula", "drain", *TERMS]
    err = [abs(row[k] - measured_value) for k in order]
    drops = [(err[i - 1] - err[i], order[i]) for i in range(1, len(order))]
    best = max(drops)[1]
    if abs(err[0]) <= tolerance * measured_value:
        best = "formula"
    resid = row["fixed"] / measured_value - 1 if measured_value > 0 else 0.0
    return best, abs(resid) <= tolerance, resid

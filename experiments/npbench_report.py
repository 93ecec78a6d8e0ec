"""Tables for experiments/npbench.py: the summary against the targets, one row per kernel,
and the failure causes with their counts (what to fix first)."""
import collections
import math
import re

TARGETS = {"AD": "37/37 forward and gradient (issue #20)",
           "other": ">= 6 of the issue's 7 others (it does not name them; here every kernel "
                    "outside the AD set counts)"}
LOCATED = re.compile(r"[\w./-]+\.py:\d+")


def causes(rec):
    """Why a kernel fails: (line, error record or None) per failure in the order met: the
    exception (with the engine frame it came from when its message names no source line),
    the wrong result, the crash or timeout."""
    found = []
    for key, wrong in (("error", "forward differs from NumPy without an error"),
                       ("grad_error", "gradient differs from finite differences without an error")):
        err = rec.get(key)
        if err:
            where = "" if located_by(err) != "no" or not err["where"] else f" [{err['where']}]"
            found.append((f"{err['type']}: {err['message']}{where}", err))
        if rec.get("forward" if key == "error" else "gradient") == "WRONG":
            found.append((wrong, None))
    if rec.get("gradient") == "unverified":
        found.append((f"gradient unverified: the finite differences' own error "
                      f"({fmt(rec['fd_noise'], 2)}) is above the tolerance", None))
    if "crash" in rec:
        found.append((f"{rec['crash']['outcome']} in stage {rec['crash']['stage']}", None))
    return found


def cause(rec):
    return "; ".join(text for text, _ in causes(rec))


def located_by(err):
    """What an error names for the user to act on: a source line, an argument, nothing."""
    if LOCATED.search(err["message"]):
        return "line"
    return "argument" if err["type"] == "ArgumentError" else "no"


def cause_key(rec):
    """The cause without what is particular to one kernel: its source location, the
    call chain, quoted names and numbers, so that kernels failing alike count together."""
    text, err = (causes(rec) or [("", None)])[0]
    if err is None:                      # a crash, a timeout, a wrong result: as it is
        return text
    text = re.sub(r"^(\w+: )[\w./-]+\.py:\d+(:\d+)?: ", r"\1", text)
    text = re.sub(r" \(in \w+\(\), called at [^)]*\)", "", text)
    text = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'…'", text)
    text = re.sub(r"\([\w ,+*/-]*\)|(?<=which depends on )\w+", "(…)", text)
    return re.sub(r"\b\d+\b", "N", text)


def correct(rec):
    return rec.get("forward") == "ok" and rec.get("gradient") in ("ok", "n/a")


def summary(records):
    lines = []
    for group in ("AD", "other"):
        rs = [r for r in records if r["set"] == group]
        if not rs:
            continue
        diff = rs if group == "AD" else [r for r in rs if r.get("differentiable")]
        fwd = sum(r.get("forward") == "ok" for r in rs)
        grad = sum(r.get("gradient") == "ok" for r in diff)
        both = sum(correct(r) for r in rs)
        lines.append(f"- {'AD set' if group == 'AD' else 'others'} ({len(rs)} kernels): "
                     f"forward correct {fwd}/{len(rs)}, gradient correct {grad}/{len(diff)} "
                     f"(of those with float inputs and outputs), both {both}/{len(rs)}; "
                     f"target {TARGETS[group]}")
    wrong_f = [r["name"] for r in records if r.get("forward") == "WRONG"]
    wrong_g = [r["name"] for r in records if r.get("gradient") == "WRONG"]
    unverified = [r["name"] for r in records if r.get("gradient") == "unverified"]
    lines.append(f"- wrong without an error: forward {len(wrong_f)} "
                 f"({', '.join(wrong_f) or 'none'}), gradient {len(wrong_g)} "
                 f"({', '.join(wrong_g) or 'none'}); gradient unverified (its error within "
                 f"twice the finite differences' own, which is above the tolerance): "
                 f"{', '.join(unverified) or 'none'}")
    ok = [r for r in records if r.get("forward") == "ok"]
    if ok:
        worst = max(ok, key=lambda r: r["forward_error"])
        lines.append(f"- largest forward error among the correct: {fmt(worst['forward_error'], 2)}"
                     f" ({worst['name']})")
    runs = [r for r in ok if "times" in r]
    fast = [r for r in runs if speedup(r) >= 1.0]
    grads = [r for r in runs if r.get("gradient") == "ok" and "engine_grad" in r["times"]]
    cheap = [r for r in grads if grad_ratio(r) <= 4.0]
    lines.append(f"- speed: compiled forward >= NumPy's in {len(fast)}/{len(runs)} kernels "
                 f"whose forward runs correctly (NumPy/engine geometric mean "
                 f"{fmt(geomean(map(speedup, runs)))}); gradient <= 4x the forward in "
                 f"{len(cheap)}/{len(grads)} whose gradient is correct (grad/fwd geometric "
                 f"mean {fmt(geomean(map(grad_ratio, grads)))})")
    return lines


def geomean(values):
    values = [v for v in values if 0 < v < math.inf]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def speedup(rec):
    t = rec["times"]
    return t["numpy"]["wall"] / t["engine_fwd"]["wall"] if t["engine_fwd"]["wall"] else math.inf


def grad_ratio(rec):
    t = rec["times"]
    return t["engine_grad"]["wall"] / t["engine_fwd"]["wall"] if t["engine_fwd"]["wall"] \
        else math.inf


def escape(text):
    return text.replace("|", "\\|")


def fmt(x, digits=3):
    if x is None:
        return "-"
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    return f"{x:.{digits}g}"


def row(rec):
    t = rec.get("times", {})
    ms = lambda key: fmt(t[key]["wall"] * 1e3) if key in t else "-"  # noqa: E731
    compile_s = " / ".join(fmt(t.get(k)) for k in ("compile_fwd", "compile_grad")
                           if k in t) or "-"
    grad = rec.get("gradient") or "-"
    return "| " + " | ".join([
        rec["name"], rec["set"], rec.get("forward", "-"), fmt(rec.get("forward_error"), 2),
        grad, fmt(rec.get("gradient_error"), 2), compile_s, ms("numpy"), ms("engine_fwd"),
        fmt(speedup(rec)) if "engine_fwd" in t else "-",
        fmt(grad_ratio(rec)) if "engine_grad" in t else "-",
        escape(cause(rec))]) + " |"


def one_line(rec):
    return f"{rec['name']:<26} {rec['set']:<5} fwd {rec.get('forward', '-'):<10} " \
           f"grad {rec.get('gradient') or '-':<8} {cause(rec)[:110]}"


def cause_table(records):
    groups = collections.defaultdict(list)
    for r in records:
        key = cause_key(r)
        if key:
            groups[key].append(r)
    lines = ["| count | cause | located | kernels |", "|---|---|---|---|"]
    for key, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        err = causes(rs[0])[0][1]
        located = "-" if not err else located_by(err)
        names = ", ".join(f"{r['name']}{'*' if r['set'] == 'AD' else ''}" for r in rs)
        lines.append(f"| {len(rs)} | {escape(key)} | {located} | {names} |")
    return lines if len(lines) > 2 else lines + ["| 0 | none | - | - |"]


def markdown(info, records):
    order = sorted(records, key=lambda r: (r["set"] != "AD", r["name"]))
    lines = ["# NPBench's NumPy kernels, unchanged, through the engine", "",
             "Produced by `python experiments/npbench.py PATH` (see its docstring) on a "
             "checkout of https://github.com/spcl/npbench; nothing of NPBench is copied "
             "into this repository.", "",
             f"NPBench commit: `{info.get('npbench_commit')}`; preset {info.get('preset')}.", "",
             "## Summary", ""] + summary(records) + ["", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items() if k != "npbench_commit"]
    lines += ["", "## Kernels", "",
              "forward: the engine's result against the NumPy original's (every array "
              "argument afterwards and the return value), max |got - want| / max |want| "
              "within NPBench's relative tolerance (`norm_error`, default "
              f"{info.get('fwd_rtol')}); gradient: vjp against central differences of the "
              f"original along {info.get('directions')} random directions, relative "
              f"tolerance {info.get('grad_rtol')} (for an original computing in float32, "
              "against its float64 twin: np.float32 read as np.float64); n/a: no float "
              "inputs or no float outputs; where float64's differences miss at every step, "
              "again in long double with smaller steps if the original computes in it, else "
              "unverified when the error is within twice the differences' own (their change "
              "when the step halves) and that is above the tolerance. "
              "Times: best wall time, one core; compile: first call minus steady call "
              "(forward / gradient, s); grad/fwd: vjp + pullback over the forward. "
              "WRONG: differs without an error.", "",
              "| kernel | set | forward | max rel. err | gradient | grad rel. err | compile s "
              "| NumPy ms | engine ms | NumPy/engine | grad/fwd | failure cause |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [row(r) for r in order]
    lines += ["", "## Failure causes", "",
              "Grouped by exception type and message with the location, quoted names and "
              "numbers taken out (the per-kernel table has them); * marks the AD set; "
              "located: what the message names (a source line, an argument, or nothing: an "
              "engine fault, the engine frame it came from in brackets).", ""]
    return "\n".join(lines + cause_table(records)) + "\n"

"""Tables, ratios and geometric means for the benchmark suite (bench.py)."""
import math
import statistics

STENCILS = {"jacobi1d", "jacobi2d", "heat3d", "wave1d", "sor1d", "red_black",
            "nonlinear_seidel", "diffuse32", "smooth_unannotated", "jacobi2d_slices",
            "heat3d_vec", "wave_temporaries", "minmod_advection", "hdiff_limiter", "fdtd_2d",
            "seidel2d", "hdiff_loops", "cavity_flow", "channel_flow"}
GROUPS = [("loop-heavy (loops + mixed)", lambda r: r["kind"] in ("loops", "mixed")),
          ("  loops", lambda r: r["kind"] == "loops"),
          ("  mixed", lambda r: r["kind"] == "mixed"),
          ("vectorised", lambda r: r["kind"] == "vectorised"),
          ("stencils", lambda r: r["name"] in STENCILS),
          ("all", lambda r: True)]


def ms(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    v *= 1e3
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def x(v):
    return "-" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.3g}")


def other(clock):
    return "cpu" if clock == "wall" else "wall"


def time_of(r, key, clock):
    v = r.get("t", {}).get(key)
    return v.get(clock) if v else None


def ratios(r, clock):
    """Derived ratios of one kernel at one size, from the ``clock`` times."""
    def div(a, b):
        x, y = time_of(r, a, clock), time_of(r, b, clock)
        return x / y if x and y else None
    return {"python/engine fwd": div("python_fwd", "engine_fwd"),
            "JAX/engine grad": div("jax_grad", "engine_grad"),
            "JAX faithful/engine grad": div("jaxlit_grad", "engine_grad"),
            "engine grad/fwd": div("engine_grad", "engine_fwd"),
            "JAX grad/fwd": div("jax_grad", "jax_fwd"),
            "JAX/engine fwd": div("jax_fwd", "engine_fwd")}


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def extrapolated(r, prefix="jax"):
    return bool(r.get("t", {}).get(prefix + "_grad", {}).get("extrapolated"))


def checks(r):
    out = []
    if "check_fwd" in r:
        out.append(("fwd", r["check_fwd_ok"], r["check_fwd"]))
    if "check_grad" in r:
        out.append(("∇", r["check_grad_ok"], r["check_grad"]))
    if "check_jaxlit" in r:
        out.append(("∇ literal", r["check_jaxlit_ok"], r["check_jaxlit"]))
    return out


def check_text(r):
    parts = [f"{n} {'ok' if ok else 'FAIL'} ({e:.0e})" for n, ok, e in checks(r)]
    if r.get("jax_error") or r.get("jaxlit_error"):
        parts.append("JAX error")
    return ", ".join(parts) or "-"


def all_ok(records):
    return all(not rec["errors"] and all(ok for s in rec["sizes"].values()
                                         for _, ok, _ in checks(s)) for rec in records)


def one_line(rec, clock):
    parts = [f"{rec['name']:<20s}"]
    for s, r in rec["sizes"].items():
        q = ratios(r, clock)
        jax = ms(time_of(r, "jax_grad", clock)) + ("~" if extrapolated(r) else "")
        lit = ""
        if time_of(r, "jaxlit_grad", clock):
            lit = (f" faithful {ms(time_of(r, 'jaxlit_grad', clock))}"
                   f"{'~' if extrapolated(r, 'jaxlit') else ''}")
            q_lit = f", faithful/grad {x(q['JAX faithful/engine grad'])}"
        else:
            q_lit = ""
        parts.append(f"{s}: py {ms(time_of(r, 'python_fwd', clock))} "
                     f"fwd {ms(time_of(r, 'engine_fwd', clock))} "
                     f"grad {ms(time_of(r, 'engine_grad', clock))} jax {jax}{lit} ms {clock} "
                     f"(py/fwd {x(q['python/engine fwd'])}, jax/grad {x(q['JAX/engine grad'])}"
                     f"{q_lit}) [{check_text(r)}]")
    if rec.get("compile_cold_fwd") is not None:
        parts.append(f"cold {rec['compile_cold_fwd'] + rec['compile_cold_grad']:.2f}s")
    parts += rec["errors"]
    return " | ".join(parts)


def params(p):
    return " ".join(f"{k}={v}" for k, v in p.items())


def size_table(records, s, clock):
    head = ["kernel", "kind", "sizes", "Python fwd", "engine fwd", "Python/engine",
            "engine ∇", "∇/fwd", "JAX fwd", "JAX ∇", "JAX/engine ∇", "JAX ∇/fwd",
            f"JAX/engine ∇ ({other(clock)})", "checks", "load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in records:
        r = rec["sizes"].get(s)
        if r is None:
            lines.append(f"| {rec['name']} | {rec['kind']} | - | " + " | ".join(
                ["-"] * (len(head) - 4)) + f" | {'; '.join(rec['errors'])} |")
            continue
        q, qw = ratios(r, clock), ratios(r, other(clock))
        mark = " (e)" if extrapolated(r) else ""
        cells = [rec["name"], rec["kind"], params(r["params"]),
                 ms(time_of(r, "python_fwd", clock)), ms(time_of(r, "engine_fwd", clock)),
                 x(q["python/engine fwd"]), ms(time_of(r, "engine_grad", clock)),
                 x(q["engine grad/fwd"]), ms(time_of(r, "jax_fwd", clock)),
                 ms(time_of(r, "jax_grad", clock)) + mark, x(q["JAX/engine grad"]) + mark,
                 x(q["JAX grad/fwd"]), x(qw["JAX/engine grad"]) + mark, check_text(r),
                 f"{r['load']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def summary_table(records, sizes, clock):
    head = ["size", "group", "kernels", "Python/engine fwd", "JAX/engine ∇ idiomatic (all)",
            "of which extrapolated", "JAX/engine ∇ idiomatic (measured only)",
            "JAX/engine ∇ faithful (all)", "of which extrapolated",
            "JAX/engine ∇ faithful (measured only)", "JAX ∇ faithful/idiomatic",
            "engine ∇/fwd",
            "JAX ∇/fwd", f"Python/engine fwd ({other(clock)})",
            f"JAX/engine ∇ idiomatic (all, {other(clock)})",
            f"JAX/engine ∇ faithful (all, {other(clock)})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in sizes:
        for label, member in GROUPS:
            rows = [rec["sizes"][s] for rec in records if member(rec) and s in rec["sizes"]]
            if not rows:
                continue
            q, qw = [ratios(r, clock) for r in rows], [ratios(r, other(clock)) for r in rows]
            jax_all = [v["JAX/engine grad"] for v in q if v["JAX/engine grad"]]
            jax_meas = [v["JAX/engine grad"] for v, r in zip(q, rows)
                        if v["JAX/engine grad"] and not extrapolated(r)]
            lit_all = [v["JAX faithful/engine grad"] for v in q if v["JAX faithful/engine grad"]]
            lit_meas = [v["JAX faithful/engine grad"] for v, r in zip(q, rows)
                        if v["JAX faithful/engine grad"] and not extrapolated(r, "jaxlit")]
            lines.append("| " + " | ".join([
                s, label, str(len(rows)), x(geomean(v["python/engine fwd"] for v in q)),
                f"{x(geomean(jax_all))} (n={len(jax_all)})",
                str(sum(extrapolated(r) for r in rows)),
                f"{x(geomean(jax_meas))} (n={len(jax_meas)})",
                f"{x(geomean(lit_all))} (n={len(lit_all)})",
                str(sum(extrapolated(r, "jaxlit") for r in rows)),
                f"{x(geomean(lit_meas))} (n={len(lit_meas)})",
                x(geomean(v["JAX faithful/engine grad"] / v["JAX/engine grad"] for v in q
                          if v["JAX faithful/engine grad"] and v["JAX/engine grad"])),
                x(geomean(v["engine grad/fwd"] for v in q)),
                x(geomean(v["JAX grad/fwd"] for v in q)),
                x(geomean(v["python/engine fwd"] for v in qw)),
                x(geomean(v["JAX/engine grad"] for v in qw)),
                x(geomean(v["JAX faithful/engine grad"] for v in qw))]) + " |")
    return lines


def literal_table(records, sizes, clock):
    rows = [(rec, s, r) for rec in records for s, r in rec["sizes"].items()
            if "jaxlit_grad" in r.get("t", {})]
    if not rows:
        return []
    lines = ["", "## Faithful (literal) JAX ports (a fori_loop per loop, .at[].set per element)",
             "", "The loop-heavy kernels transcribed loop for loop (as "
             "experiments/jax_seidel2d.py does) instead of restructured into vectorised "
             "code or scans; the `faithful` columns of the geometric means.", "",
             "| kernel | size | engine ∇ | JAX ∇ (idiomatic port) | JAX ∇ (literal port) | "
             "literal/engine | literal/idiomatic |", "|---|---|---|---|---|---|---|"]
    for rec, s, r in rows:
        e, j, lit = (time_of(r, k, clock) for k in ("engine_grad", "jax_grad", "jaxlit_grad"))
        mark = " (e)" if extrapolated(r, "jaxlit") else ""
        jm = " (e)" if extrapolated(r) else ""
        lines.append(f"| {rec['name']} | {s} | {ms(e)} | {ms(j)}{jm} | {ms(lit)}{mark} | "
                     f"{x(lit / e if lit and e else None)}{mark} | "
                     f"{x(lit / j if lit and j else None)} |")
    return lines


def compile_table(records):
    head = ["kernel", "cold fwd (s)", "cold ∇ (s)", "cold total (s)", "warm fwd (ms)",
            "warm ∇ (ms)", "warm total (ms)", "JAX compile ∇ at the first size (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in records:
        cold = [rec.get("compile_cold_fwd"), rec.get("compile_cold_grad")]
        warm = [rec.get("compile_warm_fwd"), rec.get("compile_warm_grad")]
        first = next(iter(rec["sizes"].values()), {})

        def s(v):
            return "-" if v is None else f"{v:.2f}"
        lines.append("| " + " | ".join([
            rec["name"], s(cold[0]), s(cold[1]), s(sum(cold)) if None not in cold else "-",
            ms(warm[0]), ms(warm[1]), ms(sum(warm)) if None not in warm else "-",
            s(first.get("jax_compile_grad"))]) + " |")
    return lines


def compile_summary(records):
    cold = [r["compile_cold_fwd"] + r["compile_cold_grad"] for r in records
            if r.get("compile_cold_fwd") is not None]
    warm = [r["compile_warm_fwd"] + r["compile_warm_grad"] for r in records
            if r.get("compile_warm_fwd") is not None]
    out = []
    if cold:
        slow = [r["name"] for r in records if r.get("compile_cold_fwd") is not None
                and r["compile_cold_fwd"] + r["compile_cold_grad"] > 5.0]
        out.append(f"- cold (forward + gradient): median {statistics.median(cold):.2f} s, "
                   f"max {max(cold):.2f} s; over 5 s: {', '.join(slow) or 'none'}")
    if warm:
        slow = [r["name"] for r in records if r.get("compile_warm_fwd") is not None
                and r["compile_warm_fwd"] + r["compile_warm_grad"] > 0.05]
        out.append(f"- warm (new process, loading from the cache): median "
                   f"{statistics.median(warm) * 1e3:.0f} ms, max {max(warm) * 1e3:.0f} ms; "
                   f"over 50 ms: {len(slow)} of {len(warm)}")
    return out


def markdown(info, records, sizes):
    clock = info.get("clock", "wall")
    lines = ["# Benchmark suite: engine vs NumPy/Python originals and JAX", "",
             "Produced by `python experiments/bench.py` (see its docstring).", "",
             "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items() if k != "no_jax_port"]
    lines += ["", "## How to read", "",
              f"Times in milliseconds, **{'best wall time' if clock == 'wall' else 'median CPU time'}** "
              "of up to `repeats` calls (fewer once the calls took `budget_s`, up to 40x more "
              "for fast calls; the Python originals at M often run once). The columns marked "
              f"({'cpu' if clock == 'wall' else 'wall'}) use the other clock: "
              "CPU time is this process's, all threads (median of the calls), which does not "
              "count the time other jobs held the cores -- a cross-check on this shared "
              "machine (JAX's runtime thread is accounted at scheduler ticks, so it is "
              "coarse for calls under a few ms). "
              "`Python/engine` = speed-up of the compiled forward over the original "
              "(`k.py_func`), `JAX/engine ∇` = speed-up of `adjoint.grad` (w.r.t. the corpus "
              "case's wrt) over `jax.jit(jax.grad(port))` of the port in "
              "`adjoint/corpus/jax_ports.py`; `∇/fwd` = gradient time over forward time. "
              "Two JAX ports: **idiomatic** (`jax_ports.PORTS`: the port a JAX expert "
              "writes -- independent loops vectorised into `jnp` array code, recurrences "
              "as `lax.scan`; the columns without a qualifier) and, for the loop-heavy "
              "kernels (kinds loops and mixed), **faithful** (`jax_ports.LITERAL`: the "
              "kernel transcribed loop for loop, what a scientist porting the loop code "
              "gets -- a `lax.fori_loop` per loop in the same order, `x.at[i].set(...)` "
              "per element update, the same arithmetic, scalars carried in the loop state, "
              "an `if` on data as `jnp.where`/`lax.cond`; NumPy slice statements stay "
              "slices; a loop whose bound depends on an enclosing index runs the full "
              "range with the update masked, since JAX cannot reverse-differentiate a "
              "`while_loop`). `JAX/engine ∇ idiomatic` / `faithful` = the engine's "
              "gradient speed-up over each, with the number of kernels (n) and how many "
              "of their times are extrapolated; `JAX ∇ faithful/idiomatic` = how much "
              "slower the faithful port is than the idiomatic one (kernels with both). "
              "`(e)`: the JAX time at that size is **extrapolated** from three smaller "
              "sizes (details below), not measured. Checks: `fwd` = engine forward vs the "
              "original (max error relative to the largest entry, return value and every "
              "array), `∇` = engine gradient vs JAX's (at the largest measured size for "
              "extrapolated rows), `∇ literal` = the same for the faithful port. `load`: "
              "1-minute load average when the size started; the machine was shared with "
              "other jobs, so single timings are noisy, ratios more so at S.", "",
              "## Geometric means", ""]
    lines += summary_table(records, sizes, clock)
    for s in sizes:
        lines += ["", f"## Size {s}", ""]
        lines += size_table(records, s, clock)
    lines += ["", "## Compile times", "",
              "Cold: first calls minus steady-state calls, fresh cache (generate C, compile, "
              "load); warm: the same in a new process with the cache filled (lowering, "
              "analysis and code generation still run; the C compiler does not), the better "
              "of two such processes per kernel (both totals in bench.json: "
              "`compile_warm_runs`).", ""]
    lines += compile_summary(records) + [""] + compile_table(records)
    lines += literal_table(records, sizes, clock)
    ext = [(rec["name"], s, r, p) for rec in records for s, r in rec["sizes"].items()
           for p in ("jax", "jaxlit") if extrapolated(r, p)]
    if ext:
        lines += ["", "## Extrapolated JAX gradient times", ""]
        for name, s, r, p in ext:
            pts = ", ".join(f"{v}: {t * 1e3:.3g} ms" for v, t in r[p + "_points"])
            lines.append(f"- {name}{' (literal port)' if p == 'jaxlit' else ''} at {s}: "
                         f"{ms(time_of(r, p + '_grad', clock))} ms, {r[p + '_grad_how']}; "
                         f"measured {pts}")
    lines += ["", "## JAX ports", ""]
    ported = [rec for rec in records if rec["jax_port"]]
    lines += [f"- {rec['name']}: {rec['jax_port']}" for rec in ported]
    missing = info.get("no_jax_port") or []
    if info.get("jax_skipped"):
        lines += ["", f"JAX skipped: {info['jax_skipped']}."]
    else:
        lines += ["", f"No JAX port: {', '.join(missing) or 'none'}."]
    problems = [f"- {rec['name']}: {e}" for rec in records for e in rec["errors"]]
    problems += [f"- {rec['name']} {s}: {check_text(r)}" for rec in records
                 for s, r in rec["sizes"].items()
                 if not all(ok for _, ok, _ in checks(r))]
    problems += [f"- {rec['name']} {s}: JAX {r[p + '_error']}" for rec in records
                 for s, r in rec["sizes"].items() for p in ("jax", "jaxlit")
                 if r.get(p + "_error")]
    lines += ["", "## Failures and errors", ""] + (problems or ["none"])
    return "\n".join(lines) + "\n"

"""What a finished batch says: the printed summary, the summary plot and the regression check."""
from __future__ import annotations

import math

import numpy as np


def _rows(table):
    return table.to_pylist() if hasattr(table, "to_pylist") else list(table)


def summary(table, spec) -> str:
    """Counts, each metric's min / mean / max over the finished scenarios, the first errors."""
    rows = _rows(table)
    ok = [r for r in rows if r["status"] == "ok"]
    failed = [r for r in rows if r["status"] != "ok"]
    wall = [r["wall_time"] for r in rows if r["wall_time"] == r["wall_time"]]
    lines = [f"{len(rows)} scenarios: {len(ok)} ok, {len(failed)} failed"
             + (f"; {np.mean(wall):.3g} s wall each on average" if wall else "")]
    if spec.metrics:
        lines.append(f"  {'metric':<24} {'min':>12} {'mean':>12} {'max':>12}")
        for m in spec.metrics:
            x = np.array([r[m] for r in ok], dtype=float)
            x = x[np.isfinite(x)]
            if len(x):
                lines.append(f"  {m:<24} {x.min():>12.6g} {x.mean():>12.6g} {x.max():>12.6g}")
            else:
                lines.append(f"  {m:<24} {'-':>12} {'-':>12} {'-':>12}")
    for r in failed[:5]:
        lines.append(f"  failed {r['scenario']} (seed {r['seed']}): {r['error']}")
    if len(failed) > 5:
        lines.append(f"  ... and {len(failed) - 5} more failed (the error column has each one's)")
    return "\n".join(lines)


def plot(table, spec, path):
    """PNG: a histogram of each metric, then one metric over each swept numeric parameter (the
    first declared metric that varies across the scenarios, else the first)."""
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in _rows(table) if r["status"] == "ok"]
    metrics = list(spec.metrics)
    swept = [a.name for a in spec.axes if not a.categorical]
    n_plots = len(metrics) + (len(swept) if metrics else 0)
    if n_plots == 0:
        return None
    cols = min(3, n_plots)
    nrows = math.ceil(n_plots / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    flat = list(axes.ravel())
    for ax, m in zip(flat, metrics):
        x = np.array([r[m] for r in rows], dtype=float)
        x = x[np.isfinite(x)]
        if len(x):
            ax.hist(x, bins=min(30, max(5, len(x) // 2)), color="tab:blue", edgecolor="white")
        ax.set_title(f"{m} ({len(x)} scenarios)", fontsize=9)
        ax.set_xlabel(m, fontsize=8)
        ax.set_ylabel("scenarios", fontsize=8)
    if metrics:
        varies = [m for m in metrics if len({r[m] for r in rows if r[m] == r[m]}) > 1]
        first = (varies or metrics)[0]
        for ax, p in zip(flat[len(metrics):], swept):
            x = np.array([r[p] for r in rows], dtype=float)
            y = np.array([r[first] for r in rows], dtype=float)
            ax.scatter(x, y, s=12, c=[r["seed"] for r in rows], cmap="viridis")
            ax.set_title(f"{first} over {p}", fontsize=9)
            ax.set_xlabel(p, fontsize=8)
            ax.set_ylabel(first, fontsize=8)
    for ax in flat[:n_plots]:
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))    # long tick labels must not collide
    for ax in flat[n_plots:]:
        ax.axis("off")
    failed = len(_rows(table)) - len(rows)
    fig.suptitle(f"{spec.where}: {len(rows)} scenarios ok, {failed} failed", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def compare(table, baseline, spec):
    """(moved, notes): moved = [(scenario, what, old, new, tolerance, which)] for every metric whose
    value moved by more than its tolerance (NaN against a number counts; NaN against NaN does
    not) and every status change, matched by scenario key (seed and parameters); notes: the
    scenarios or metrics the baseline lacks."""
    new = {r["key"]: r for r in _rows(table)}
    old = {r["key"]: r for r in _rows(baseline)}
    names = baseline.column_names if hasattr(baseline, "column_names") else list(next(iter(old.values()), {}))
    moved, notes = [], []
    missing = [k for k in new if k not in old]
    if missing:
        notes.append(f"{len(missing)} scenario(s) have no row in the baseline (e.g. {new[missing[0]]['scenario']})")
    lacking = [m for m in spec.metrics if m not in names]
    if lacking:
        notes.append(f"the baseline has no column for metric(s) {', '.join(lacking)}")
    for key, r in new.items():
        b = old.get(key)
        if b is None:
            continue
        which = ", ".join([f"seed {r['seed']}"] + [f"{a.name} {r[a.name]:g}" if not a.categorical else
                                                  f"{a.name} {r[a.name]}" for a in spec.axes])
        if r["status"] != b["status"]:
            moved.append((r["scenario"], "status", b["status"], r["status"], None, which))
        for m in spec.metrics:
            if m not in b:
                continue
            x, y, tol = b[m], r[m], spec.tolerance(m)
            x = math.nan if x is None else x
            y = math.nan if y is None else y
            if math.isnan(x) and math.isnan(y):
                continue
            if math.isnan(x) or math.isnan(y) or (x != y and not abs(y - x) <= tol):
                moved.append((r["scenario"], m, x, y, tol, which))
    return moved, notes

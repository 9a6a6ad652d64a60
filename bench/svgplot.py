"""A dependency-free SVG plot of latency distributions: one row per series, a box from p25 to p75,
whiskers to p1 and p99, a tick at p50, and every sample as a faint dot, on a log-scaled ms axis."""
import math
from xml.sax.saxutils import escape

COLORS = ["#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"]


def _pct(xs, p):
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def write_latency_svg(path, series, title):
    series = [(name, sorted(x for x in xs if x > 0)) for name, xs in series if xs]
    lo = min(_pct(xs, 0) for _, xs in series)
    hi = max(_pct(xs, 100) for _, xs in series)
    lo_d, hi_d = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    left, right, top, row_h = 300, 40, 50, 38
    width = 1000
    height = top + row_h * len(series) + 50
    plot_w = width - left - right

    def x(v):
        return left + plot_w * (math.log10(v) - lo_d) / (hi_d - lo_d)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
           % (width, height), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>' % (left // 3, escape(title))]
    # Grid: 1, 2, 5 per decade.
    for d in range(lo_d, hi_d + 1):
        for m in (1, 2, 5):
            v = m * 10 ** d
            if v < 10 ** lo_d or v > 10 ** hi_d:
                continue
            gx = x(v)
            out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>'
                       % (gx, top - 10, gx, height - 40, "#bbb" if m == 1 else "#eee"))
            label = ("%g" % v)
            out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>' % (gx, height - 24, label))
    out.append('<text x="%d" y="%d" text-anchor="middle" fill="#444">milliseconds</text>'
               % (left + plot_w // 2, height - 6))
    for i, (name, xs) in enumerate(series):
        cy = top + row_h * i + row_h // 2
        color = COLORS[i % len(COLORS)]
        p1, p25, p50, p75, p99 = (_pct(xs, p) for p in (1, 25, 50, 75, 99))
        out.append('<text x="%d" y="%d" text-anchor="end" dominant-baseline="middle">%s</text>'
                   % (left - 10, cy, escape(name)))
        step = max(1, len(xs) // 400)
        for j, v in enumerate(xs[::step]):
            jitter = ((j * 7919) % 17 - 8) * 0.9
            out.append('<circle cx="%.1f" cy="%.1f" r="1.3" fill="%s" fill-opacity="0.25"/>' % (x(v), cy + jitter, color))
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>' % (x(p1), cy, x(p99), cy, color))
        out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.35" stroke="%s"/>'
                   % (x(p25), cy - 9, max(1.0, x(p75) - x(p25)), 18, color, color))
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-width="2"/>'
                   % (x(p50), cy - 11, x(p50), cy + 11))
        out.append('<text x="%.1f" y="%d" font-size="10" fill="#222">p50 %.1f</text>' % (x(p50) + 3, cy - 12, p50))
    out.append('<text x="%d" y="%d" font-size="10" fill="#666">box p25-p75, whiskers p1-p99, black tick p50, '
               'dots: samples</text>' % (left, top - 22))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")

"""The paper plots' look: fixed-size SVG bar charts written as text, so a redraw is byte-identical."""

COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")


def quantile(values, q):
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def bars_svg(path, title, groups, series):
    """groups: x labels; series: {name: [value or None per group]} drawn side by side."""
    width, height, left, bottom = 640, 360, 50, 40
    top = max(v for values in series.values() for v in values if v is not None) or 1.0
    slot = (width - left - 10) / len(groups)
    bar = slot / (len(series) + 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
        f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="14">{title}</text>',
    ]
    for s, (name, values) in enumerate(series.items()):
        out.append(f'<text x="{left + 120 * s:.1f}" y="{height - 6}" fill="{COLORS[s]}" font-size="11">{name}</text>')
        for g, value in enumerate(values):
            if value is None:
                continue
            h = (height - bottom - 30) * value / top
            x = left + g * slot + s * bar
            out.append(
                f'<rect x="{x:.1f}" y="{height - bottom - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{COLORS[s]}"/>'
            )
    for g, label in enumerate(groups):
        out.append(
            f'<text x="{left + g * slot + slot / 2:.1f}" y="{height - bottom + 14}" text-anchor="middle" '
            f'font-size="10">{label}</text>'
        )
    out.append("</svg>")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out) + "\n")
